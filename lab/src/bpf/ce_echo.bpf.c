/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * A receiver-side congestion control whose only job is to echo CE marks precisely, one ACK per
 * change of CE state, as Linux's DCTCP receiver does (net/ipv4/tcp_dctcp.h; the kernel's BPF
 * selftest bpf_dctcp.c does the same from struct_ops).
 *
 * Why: with classic ECN (net.ipv4.tcp_ecn = 1) a stock receiver sets ECE on every ACK from the
 * first CE until the sender's CWR arrives, about one RTT later, so the sender's delivered_ce counts
 * a whole RTT of packets per mark. AccECN would count CE per packet but cannot be negotiated on
 * this kernel (tcp_ecn accepts only 0-2). ABC's proxied encoding (brake = CE) needs the exact count.
 *
 * TCP_CONG_NEEDS_ECN is what makes the stack call cwnd_event with CA_EVENT_ECN_IS_CE/NO_CE. Only
 * the receiving (listening) socket uses this CC: a listener with it accepts ECN from a sender
 * whose SYN is not ECT (a sender with net.ipv4.tcp_ecn = 1 and a CC without the flag), whereas a
 * sender with the flag would send an ECT SYN that stock listeners refuse. The receiver's own
 * sending (pure ACKs) never needs a window, so Reno from kfuncs is enough.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

/* include/net/tcp_ecn.h (not in BTF: macros) */
#define TCP_ECN_DEMAND_CWR 4
#define TCP_CONG_NEEDS_ECN 0x2

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

static __always_inline struct inet_connection_sock *inet_csk(struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

struct echo_state {
	__u32 prior_rcv_nxt;
	__u32 ce_state;
};

/* Counters for the run record: [0] CE packets seen, [1] non-CE packets seen, [2] state changes. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} echo_counters SEC(".maps");

static __always_inline void bump(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&echo_counters, &idx);

	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline struct echo_state *state_of(struct sock *sk)
{
	return (struct echo_state *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline void set_demand_cwr(struct sock *sk, __u32 ce)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (ce)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

SEC("struct_ops")
void BPF_PROG(echo_init, struct sock *sk)
{
	struct echo_state *s = state_of(sk);

	s->prior_rcv_nxt = ((struct tcp_sock *)sk)->rcv_nxt;
	s->ce_state = 0;
}

SEC("struct_ops")
void BPF_PROG(echo_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct echo_state *s = state_of(sk);
	__u32 ce;

	if (ev != CA_EVENT_ECN_IS_CE && ev != CA_EVENT_ECN_NO_CE)
		return;
	ce = ev == CA_EVENT_ECN_IS_CE;
	bump(ce ? 0 : 1);
	if (s->ce_state != ce) {
		bump(2);
		/* A delayed ACK still owed covers packets of the old state: send it first, with the
		 * old ECE, so no ACK mixes marked and unmarked packets; then ACK this one at once. */
		if (inet_csk(sk)->icsk_ack.pending & ICSK_ACK_TIMER) {
			set_demand_cwr(sk, s->ce_state);
			bpf_tcp_send_ack(sk, s->prior_rcv_nxt);
		}
		inet_csk(sk)->icsk_ack.pending |= ICSK_ACK_NOW;
	}
	s->prior_rcv_nxt = ((struct tcp_sock *)sk)->rcv_nxt;
	s->ce_state = ce;
	set_demand_cwr(sk, ce);
}

SEC("struct_ops")
void BPF_PROG(echo_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(echo_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(echo_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ce_echo = {
	.init = (void *)echo_init,
	.cwnd_event = (void *)echo_cwnd_event,
	.cong_avoid = (void *)echo_cong_avoid,
	.ssthresh = (void *)echo_ssthresh,
	.undo_cwnd = (void *)echo_undo_cwnd,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = "ccp_ce_echo",
};
