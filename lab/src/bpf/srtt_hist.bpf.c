/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Per-ACK smoothed RTT of a run's sending sockets, folded into a histogram in the kernel.
 *
 * The Inigo thesis's latency index is the configured RTT over the 99th percentile of *every*
 * tcp_probe SRTT sample of the flows to the server (specs/inigo.md §9.2), i.e. one sample per
 * ACK the senders receive, whatever their congestion control. The tcp:tcp_probe tracepoint fires
 * at the top of tcp_rcv_established() for every segment an established socket receives (on a
 * bulk sender: every ACK), with the socket before the ACK is processed -- where the thesis's
 * tcp_probe module (full=1) sampled it. This program is attached as tp_btf (typed arguments, no
 * tracefs enabling, and it only costs anything while attached), filters to the run's sender
 * network namespace (by its cookie) and destination ports (the scheme's flows), and adds
 * srtt_us >> 3 (the µs SRTT that tcp_probe reports) to a histogram of 10 µs bins up to 1 s plus an
 * overflow bin. Nothing is pinned: the link and maps live as long as ccp-lab's descriptors, so
 * every exit path (including SIGKILL) detaches it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char _license[] SEC("license") = "GPL";

/* Keep in step with src/srtt.rs. */
#define SRTT_BIN_US 10
#define SRTT_BINS 100000 /* 10 µs × 100 000 = 1 s; index SRTT_BINS is the overflow bin */

struct srtt_cfg {
	__u64 netns_cookie; /* 0: count nothing */
	__u16 dport_lo;     /* host order, inclusive */
	__u16 dport_hi;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct srtt_cfg);
} srtt_cfg SEC(".maps");

struct srtt_bins {
	__u64 bins[SRTT_BINS + 1];
};

/* One entry holding every bin, so user space reads the whole histogram in one lookup. Shared by
 * the CPUs (a per-CPU value cannot be this large) and updated with atomic adds. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct srtt_bins);
} srtt_hist SEC(".maps");

/* [0] samples counted, [1] sum of their SRTTs (µs), [2] largest SRTT (µs; a racy max, exact but
 * for a simultaneous larger sample on the other CPU), [3] segments of the namespace's sockets
 * skipped because the socket had no RTT sample yet, [4] skipped for their port. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} srtt_stats SEC(".maps");

static __always_inline void add(__u32 idx, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&srtt_stats, &idx);

	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(srtt_probe, struct sock *sk, const struct sk_buff *skb)
{
	__u32 zero = 0, two = 2, srtt;
	__u64 bin; /* 64-bit, so the bound the verifier sees is the one used in the address */
	struct srtt_cfg *cfg;
	struct srtt_bins *h;
	struct tcp_sock *tp;
	__u64 *max;
	__u16 dport;

	cfg = bpf_map_lookup_elem(&srtt_cfg, &zero);
	if (!cfg || !cfg->netns_cookie)
		return 0;
	if (sk->__sk_common.skc_net.net->net_cookie != cfg->netns_cookie)
		return 0;
	dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (dport < cfg->dport_lo || dport > cfg->dport_hi) {
		add(4, 1);
		return 0;
	}
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return 0;
	srtt = tp->srtt_us >> 3;
	if (!srtt) {
		add(3, 1);
		return 0;
	}
	bin = (__u64)srtt / SRTT_BIN_US;
	if (bin > SRTT_BINS)
		bin = SRTT_BINS;
	h = bpf_map_lookup_elem(&srtt_hist, &zero);
	if (!h)
		return 0;
	__sync_fetch_and_add(&h->bins[bin], 1);
	add(0, 1);
	add(1, srtt);
	max = bpf_map_lookup_elem(&srtt_stats, &two);
	if (max && srtt > *max)
		*max = srtt;
	return 0;
}
