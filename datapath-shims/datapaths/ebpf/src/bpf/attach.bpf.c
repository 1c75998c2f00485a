// SPDX-License-Identifier: GPL-2.0
/*
 * Attach programs: move flows onto the ccp congestion control and back.
 *
 * - switch_cc (iter/tcp) walks the TCP sockets of the network namespace it is created in and
 *   switches those the filter selects with bpf_setsockopt(TCP_CONGESTION). attach records the
 *   congestion control each socket ran in prev_cc; restore switches sockets on ours back to it.
 * - set_cc (sockops, on a cgroup) switches new flows when they reach ESTABLISHED. Setting the CC
 *   at connect time would initialise it in SYN_SENT with a 536-byte MSS.
 *
 * One instance of this object is loaded per operation, so its .rodata (name, filter, action)
 * is that operation's; a pinned sockops link keeps its instance alive after the loader exits.
 */
#include "common.bpf.h"

char _license[] SEC("license") = "GPL";

#define TCP_ESTABLISHED 1
#define TCP_CLOSE_WAIT 8

/* The only .rodata variable, so that user space finds it at offset 0. */
const volatile struct ccp_attach_cfg cfg = {};

static __always_inline bool net_match(const volatile struct ccp_net *n, const struct ccp_flow_id *id, bool local)
{
	const __u8 *addr = local ? id->saddr : id->daddr;
	__u32 plen = n->prefix_len;

	if (n->family != id->family)
		return false;
	for (int b = 0; b < 16; b++) {
		__u32 bits;
		__u8 mask;

		if (plen <= (__u32)b * 8)
			break;
		bits = plen - b * 8;
		mask = bits >= 8 ? 0xff : (__u8)(0xff << (8 - bits));
		if ((addr[b] ^ n->addr[b]) & mask)
			return false;
	}
	return true;
}

/* See attach::Filter: every flow with `all`; otherwise a port condition (either end) and an
 * address condition (either end), each satisfied by any of its entries, and an absent condition
 * holds; a filter with neither selects nothing. */
static __always_inline bool filter_match(const struct ccp_flow_id *id)
{
	bool ports_ok, nets_ok;

	if (cfg.filter.all)
		return true;
	if (!cfg.filter.nports && !cfg.filter.nnets)
		return false;
	ports_ok = !cfg.filter.nports;
	for (int i = 0; i < CCP_FILTER_PORTS; i++) {
		if (i < cfg.filter.nports && (cfg.filter.ports[i] == id->sport || cfg.filter.ports[i] == id->dport))
			ports_ok = true;
	}
	nets_ok = !cfg.filter.nnets;
	for (int i = 0; i < CCP_FILTER_NETS; i++) {
		if (i < cfg.filter.nnets && (net_match(&cfg.filter.nets[i], id, true) || net_match(&cfg.filter.nets[i], id, false)))
			nets_ok = true;
	}
	return ports_ok && nets_ok;
}

SEC("iter/tcp")
int switch_cc(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct ccp_switch_result r = {};
	struct ccp_prev_cc *prev;
	struct tcp_sock *tp;
	bool ours;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	r.state = skc->skc_state;
	if (r.state != TCP_ESTABLISHED && r.state != TCP_CLOSE_WAIT)
		return 0;
	flow_id_from_skc(&r.id, skc);
	if (!filter_match(&r.id))
		return 0;
	if (bpf_getsockopt(tp, SOL_TCP, TCP_CONGESTION, r.from, sizeof(r.from)))
		return 0;
	ours = cc_name_eq(r.from, cfg.cc_name);
	if (cfg.action == CCP_SWITCH_ATTACH) {
		if (ours)
			return 0;
		prev = bpf_sk_storage_get(&prev_cc, tp, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (prev)
			__builtin_memcpy(prev->name, r.from, sizeof(prev->name));
		/* The cookie lets the congestion control name the socket in its create record. */
		r.cookie = bpf_get_socket_cookie(tp);
		cc_name_copy(r.to, cfg.cc_name);
		r.err = bpf_setsockopt(tp, SOL_TCP, TCP_CONGESTION, r.to, sizeof(r.to));
		if (r.err && prev)
			bpf_sk_storage_delete(&prev_cc, tp);
	} else if (cfg.action == CCP_SWITCH_RESTORE) {
		if (!ours)
			return 0;
		r.cookie = bpf_get_socket_cookie(tp);
		prev = bpf_sk_storage_get(&prev_cc, tp, 0, 0);
		if (prev)
			__builtin_memcpy(r.to, prev->name, sizeof(r.to));
		else
			cc_name_copy(r.to, cfg.restore_default);
		r.err = bpf_setsockopt(tp, SOL_TCP, TCP_CONGESTION, r.to, sizeof(r.to));
		if (r.err && prev) {
			/* The recorded congestion control is gone (it was a BPF one, say). */
			cc_name_copy(r.to, cfg.restore_default);
			r.err = bpf_setsockopt(tp, SOL_TCP, TCP_CONGESTION, r.to, sizeof(r.to));
		}
		if (!r.err && prev)
			bpf_sk_storage_delete(&prev_cc, tp);
	} else {
		return 0;
	}
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

SEC("sockops")
int set_cc(struct bpf_sock_ops *skops)
{
	struct ccp_flow_id id = {};
	struct ccp_prev_cc *prev;
	char cur[16] = {}, name[16];
	struct bpf_sock *sk;
	__u32 rport;

	if (skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB && skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	sk = skops->sk;
	if (!sk)
		return 1;
	id.family = skops->family;
	id.sport = skops->local_port;
	/* remote_port holds the network-order port, shifted into the upper half on some kernels. */
	rport = skops->remote_port;
	id.dport = bpf_ntohs((__u16)(rport >> 16 ? rport >> 16 : rport));
	if (id.family == AF_INET) {
		*(__u32 *)id.saddr = skops->local_ip4;
		*(__u32 *)id.daddr = skops->remote_ip4;
	} else if (id.family == AF_INET6) {
		/* Context fields must be read at constant offsets: no loop. */
		__u32 s[4] = { skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2], skops->local_ip6[3] };
		__u32 d[4] = { skops->remote_ip6[0], skops->remote_ip6[1], skops->remote_ip6[2], skops->remote_ip6[3] };
		if (!s[0] && !s[1] && s[2] == bpf_htonl(0xffff) && !d[0] && !d[1] && d[2] == bpf_htonl(0xffff)) {
			id.family = AF_INET;
			*(__u32 *)id.saddr = s[3];
			*(__u32 *)id.daddr = d[3];
		} else {
			for (int i = 0; i < 4; i++) {
				((__u32 *)id.saddr)[i] = s[i];
				((__u32 *)id.daddr)[i] = d[i];
			}
		}
	}
	if (!filter_match(&id))
		return 1;
	if (bpf_getsockopt(skops, SOL_TCP, TCP_CONGESTION, cur, sizeof(cur)) || cc_name_eq(cur, cfg.cc_name))
		return 1;
	prev = bpf_sk_storage_get(&prev_cc, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (prev)
		__builtin_memcpy(prev->name, cur, sizeof(prev->name));
	bpf_get_socket_cookie(skops);
	cc_name_copy(name, cfg.cc_name);
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name, sizeof(name)) && prev)
		bpf_sk_storage_delete(&prev_cc, sk);
	return 1;
}

/* Runs the filter on a flow id given as the context (BPF_PROG_TEST_RUN): lets the unit tests
 * check the kernel's filter against the Rust documentation of its semantics. */
SEC("syscall")
int filter_probe(struct ccp_flow_id *id)
{
	struct ccp_flow_id copy = {};

	__builtin_memcpy(&copy, id, sizeof(copy));
	return filter_match(&copy);
}
