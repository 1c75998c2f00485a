// SPDX-License-Identifier: GPL-2.0
/*
 * A tc egress program that sets ECN CE on one ECT packet in `every`: the marking a RED or
 * threshold qdisc would do, for a kernel that has none of them. It sees no queue, so the marks
 * are a fixed fraction, which is what an ECN feedback test needs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "GPL";

#define TC_ACT_OK 0

const volatile __u32 every = 10;

__u64 seen = 0;
__u64 marked = 0;

SEC("tc")
int mark_ce(struct __sk_buff *skb)
{
	__u64 n = __sync_fetch_and_add(&seen, 1);

	if (every && n % every == 0 && bpf_skb_ecn_set_ce(skb))
		__sync_fetch_and_add(&marked, 1);
	return TC_ACT_OK;
}
