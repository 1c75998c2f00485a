/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Definitions shared by the BPF objects (not by user space: that is ccp.h). */
#ifndef CCP_COMMON_BPF_H
#define CCP_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "ccp.h"

#define AF_INET 2
#define AF_INET6 10
#define SOL_TCP 6
#define TCP_CONGESTION 13

/* Shared between the congestion control and the attach programs through a pin (or the same fd
 * in one process); both objects must define it identically. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ccp_prev_cc);
} prev_cc SEC(".maps");

/* Fills a flow id from a socket's common part; a v4-mapped IPv6 address is reported as IPv4 so
 * that filters and rules see one address family per peer. */
static __always_inline void flow_id_from_skc(struct ccp_flow_id *id, const struct sock_common *skc)
{
	__u16 family = skc->skc_family;

	id->sport = skc->skc_num;
	id->dport = bpf_ntohs(skc->skc_dport);
	if (family == AF_INET) {
		id->family = AF_INET;
		*(__u32 *)id->saddr = skc->skc_rcv_saddr;
		*(__u32 *)id->daddr = skc->skc_daddr;
		return;
	}
	id->family = family;
	if (family != AF_INET6)
		return;
	__u32 s[4], d[4];
	for (int i = 0; i < 4; i++) {
		s[i] = skc->skc_v6_rcv_saddr.in6_u.u6_addr32[i];
		d[i] = skc->skc_v6_daddr.in6_u.u6_addr32[i];
	}
	/* ::ffff:a.b.c.d on both ends is an IPv4 flow on a dual-stack socket. */
	if (!s[0] && !s[1] && s[2] == bpf_htonl(0xffff) && !d[0] && !d[1] && d[2] == bpf_htonl(0xffff)) {
		id->family = AF_INET;
		*(__u32 *)id->saddr = s[3];
		*(__u32 *)id->daddr = d[3];
		return;
	}
	for (int i = 0; i < 4; i++) {
		((__u32 *)id->saddr)[i] = s[i];
		((__u32 *)id->daddr)[i] = d[i];
	}
}

/* Compares two NUL-padded congestion control names. */
static __always_inline bool cc_name_eq(const char *a, const volatile char *b)
{
	for (int i = 0; i < 16; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return true;
}

static __always_inline void cc_name_copy(char *dst, const volatile char *src)
{
	for (int i = 0; i < 16; i++)
		dst[i] = src[i];
}

#endif
