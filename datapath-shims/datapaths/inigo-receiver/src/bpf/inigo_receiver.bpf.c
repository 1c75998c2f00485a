/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The Inigo receiver (spec inigo.md §4): Relative Forward Delay from TCP timestamps, as tc
 * (TCX) programs on the receiving host's device.
 *
 * ingress: every arriving TCP data segment with the Timestamps option updates its connection's
 *   RFD total D_total (clamped at 0) and is judged late when D_total > RTT_min · pct / 100,
 *   plus one TSval tick for peers without µs timestamps (tick slack; off: the spec's rule).
 *   Marking mode sets CE on late ECN-capable segments before TCP sees them (and, with
 *   clear_ce, clears it on the others, as the published patch did); window mode keeps α_RFD and
 *   the receiver's window cap rcv_cwnd (spec §4.3).
 * egress (window mode): lowers the advertised window of outgoing ACKs to rcv_cwnd.
 *
 * RTT_min comes from the receiving socket (bpf_skc_lookup_tcp + bpf_skc_to_tcp_sock): the
 * kernel's receive-side RTT estimate tcp_sock.rcv_rtt_est.rtt_us, which tcp_rcv_rtt_update()
 * stores left-shifted by 3 (tcp_get_info() reports it >> 3 as tcpi_rcv_rtt). The published patch
 * took that value unshifted (spec A-3), which makes its threshold 8x larger; here it is shifted
 * back unless the rtt_x8 flag asks for the patch's behaviour.
 *
 * Everything that is not a TCP data segment of a connection with timestamps passes untouched;
 * so do non-ECN segments in marking mode. Programs return TCX_NEXT: later programs on the hook
 * still run.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "inigo_receiver.h"

char _license[] SEC("license") = "GPL";

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_TCP_ 6
#define TCPOPT_EOL 0
#define TCPOPT_NOP 1
#define TCPOPT_TIMESTAMP 8
#define TCPOLEN_TIMESTAMP 10
#define BPF_F_CURRENT_NETNS_ (-1L)

#define ECN_MASK 3
#define ECN_NOT_ECT 0
#define ECN_ECT_1 1
#define ECN_ECT_0 2
#define ECN_CE 3

/* TCP flags in the 13th header byte. */
#define TH_FIN 0x01
#define TH_SYN 0x02
#define TH_RST 0x04
#define TH_ACK 0x10

/* The largest window TCP can advertise (65535 << 14). */
#define MAX_WINDOW (65535u << 14)
#define ALPHA_MAX 1024u

/* Set at load time; see struct inigo_test_hooks. */
const volatile __u32 test_hooks_enabled = 0;
struct inigo_test_hooks test_hooks = {};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct inigo_settings);
} settings SEC(".maps");

/* Bounded and LRU: a peer can open connections at will; the oldest state is evicted (and
 * restarts from T-R1 if its connection comes back). Sized by user space before load. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct inigo_key);
	__type(value, struct inigo_conn);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IC_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += 1; /* per-CPU: no atomics needed */
}

static __always_inline const struct inigo_settings *get_settings(void)
{
	__u32 zero = 0;
	const struct inigo_settings *s = bpf_map_lookup_elem(&settings, &zero);

	if (!s || s->magic != INIGO_MAGIC || s->layout != INIGO_LAYOUT)
		return 0;
	return s;
}

/* What parsing an IPv4/IPv6 TCP segment yields. */
struct seg {
	struct inigo_key key;   /* local = destination on ingress, source on egress */
	__u32 ip_off;           /* offset of the IP header from skb->data */
	__u32 tcp_off;          /* offset of the TCP header */
	__u32 payload;          /* TCP payload bytes (all segments of a GRO/GSO packet) */
	__u32 tsval;
	__u32 tsecr;
	__u16 window;           /* host order */
	__u8 v4;
	__u8 ecn;
	__u8 tcp_flags;
	__u8 has_ts;
	__u8 opt_len;
	__u8 ip_first;          /* the byte that holds the ECN bits: tos (v4), or byte 1 (v6) */
};

/*
 * Parses the IP and TCP headers at settings->l2_len. Returns 0 for a TCP segment, -1 for
 * anything else (non-IP, non-TCP, fragments, IPv6 extension headers, truncated packets).
 */
static __always_inline int parse(struct __sk_buff *skb, __u32 l2_len, struct seg *g, bool ingress)
{
	__u32 ip_off = l2_len & 0xff;
	__u32 tcp_off, ip_len, hdr_len;
	__u16 proto = bpf_ntohs(skb->protocol);
	__u8 th[20];

	g->ip_off = ip_off;
	if (proto == ETH_P_IP) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, ip_off, &ip, sizeof(ip)))
			return -1;
		if (ip.version != 4 || ip.ihl < 5 || ip.protocol != IPPROTO_TCP_)
			return -1;
		/* Fragments (MF set or an offset) carry no usable TCP header. */
		if (ip.frag_off & bpf_htons(0x3fff))
			return -1;
		hdr_len = ip.ihl * 4;
		ip_len = bpf_ntohs(ip.tot_len);
		if (!ip_len) /* BIG TCP: the length is the packet's */
			ip_len = skb->len - ip_off;
		g->v4 = 1;
		g->ecn = ip.tos & ECN_MASK;
		g->ip_first = ip.tos;
		g->key.family = 4;
		if (ingress) {
			g->key.local[0] = ip.daddr;
			g->key.remote[0] = ip.saddr;
		} else {
			g->key.local[0] = ip.saddr;
			g->key.remote[0] = ip.daddr;
		}
	} else if (proto == ETH_P_IPV6) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, ip_off, &ip6, sizeof(ip6)))
			return -1;
		if (ip6.version != 6 || ip6.nexthdr != IPPROTO_TCP_)
			return -1;
		hdr_len = sizeof(ip6);
		ip_len = bpf_ntohs(ip6.payload_len);
		ip_len = ip_len ? ip_len + hdr_len : skb->len - ip_off;
		g->v4 = 0;
		/* Traffic class: low nibble of byte 0, high nibble of byte 1; ECN = its low 2 bits. */
		g->ip_first = ((__u8 *)&ip6)[1];
		g->ecn = (g->ip_first >> 4) & ECN_MASK;
		g->key.family = 6;
		for (int i = 0; i < 4; i++) {
			__u32 d = ip6.daddr.in6_u.u6_addr32[i], s = ip6.saddr.in6_u.u6_addr32[i];

			g->key.local[i] = ingress ? d : s;
			g->key.remote[i] = ingress ? s : d;
		}
	} else {
		return -1;
	}

	tcp_off = ip_off + hdr_len;
	g->tcp_off = tcp_off;
	if (bpf_skb_load_bytes(skb, tcp_off, th, sizeof(th)))
		return -1;
	__u32 doff = (th[12] >> 4) * 4;
	if (doff < 20 || doff > 60 || ip_len < hdr_len + doff)
		return -1;
	g->payload = ip_len - hdr_len - doff;
	g->tcp_flags = th[13];
	g->window = ((__u16)th[14] << 8) | th[15];
	__u16 sport = *(__u16 *)&th[0], dport = *(__u16 *)&th[2];
	g->key.lport = ingress ? dport : sport;
	g->key.rport = ingress ? sport : dport;
	g->opt_len = doff - 20;
	return 0;
}

/* Finds the Timestamps option; sets g->has_ts, g->tsval, g->tsecr. */
static __always_inline void parse_ts(struct __sk_buff *skb, struct seg *g)
{
	__u8 opts[64] = {};
	__u32 len = g->opt_len;

	g->has_ts = 0;
	if (len < TCPOLEN_TIMESTAMP || len > 40)
		return;
	if (bpf_skb_load_bytes(skb, g->tcp_off + 20, opts, len))
		return;
	/* Linux, and most stacks: NOP NOP TS first. */
	if (opts[0] == TCPOPT_NOP && opts[1] == TCPOPT_NOP && opts[2] == TCPOPT_TIMESTAMP &&
	    opts[3] == TCPOLEN_TIMESTAMP) {
		g->tsval = bpf_ntohl(*(__u32 *)&opts[4]);
		g->tsecr = bpf_ntohl(*(__u32 *)&opts[8]);
		g->has_ts = 1;
		return;
	}
	__u32 i = 0;

	for (int n = 0; n < 40; n++) {
		if (i + 1 >= len)
			return;
		__u8 kind = opts[i & 0x3f];

		if (kind == TCPOPT_EOL)
			return;
		if (kind == TCPOPT_NOP) {
			i++;
			continue;
		}
		__u8 olen = opts[(i + 1) & 0x3f];

		if (olen < 2)
			return;
		if (kind == TCPOPT_TIMESTAMP) {
			if (olen != TCPOLEN_TIMESTAMP || i + TCPOLEN_TIMESTAMP > len)
				return;
			__u32 a = 0, b = 0;

			for (int k = 0; k < 4; k++) {
				a = (a << 8) | opts[(i + 2 + k) & 0x3f];
				b = (b << 8) | opts[(i + 6 + k) & 0x3f];
			}
			g->tsval = a;
			g->tsecr = b;
			g->has_ts = 1;
			return;
		}
		i += olen;
	}
}

/* What the receiving socket tells us. */
struct sockinfo {
	__u32 rtt_raw;
	__u32 rcv_wnd;
	__u16 advmss;
	__u8 wscale;
	__u8 usec_ts;
};

/* Looks the receiving socket up from the segment's 4-tuple. Returns 0 when a full TCP socket
 * was found (its fields copied to *si), -1 otherwise. */
static __always_inline int lookup_sock(struct __sk_buff *skb, const struct seg *g, struct sockinfo *si)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	__u32 tlen;

	if (test_hooks_enabled) {
		if (!test_hooks.sock)
			return -1;
		si->rtt_raw = test_hooks.rtt_raw;
		si->rcv_wnd = test_hooks.rcv_wnd;
		si->advmss = test_hooks.advmss;
		si->wscale = test_hooks.wscale;
		si->usec_ts = test_hooks.usec_ts;
		return 0;
	}
	/* The tuple is the arriving segment's: source = the peer. */
	if (g->v4) {
		t.ipv4.saddr = g->key.remote[0];
		t.ipv4.daddr = g->key.local[0];
		t.ipv4.sport = g->key.rport;
		t.ipv4.dport = g->key.lport;
		tlen = sizeof(t.ipv4);
	} else {
		for (int i = 0; i < 4; i++) {
			t.ipv6.saddr[i] = g->key.remote[i];
			t.ipv6.daddr[i] = g->key.local[i];
		}
		t.ipv6.sport = g->key.rport;
		t.ipv6.dport = g->key.lport;
		tlen = sizeof(t.ipv6);
	}
	sk = bpf_skc_lookup_tcp(skb, &t, tlen, BPF_F_CURRENT_NETNS_, 0);
	if (!sk)
		return -1;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);

	if (!tp) { /* a request or TIME_WAIT socket */
		bpf_sk_release(sk);
		return -1;
	}
	si->rtt_raw = tp->rcv_rtt_est.rtt_us;
	si->rcv_wnd = tp->rcv_wnd;
	si->advmss = tp->advmss;
	si->wscale = BPF_CORE_READ_BITFIELD(tp, rx_opt.rcv_wscale);
	si->usec_ts = BPF_CORE_READ_BITFIELD(tp, tcp_usec_ts);
	bpf_sk_release(sk);
	return 0;
}

static __always_inline __u64 now_ns(void)
{
	if (test_hooks_enabled)
		return test_hooks.now_ns;
	return bpf_ktime_get_ns();
}

static __always_inline __u32 min_u32(__u32 a, __u32 b)
{
	return a < b ? a : b;
}

static __always_inline __u32 max_u32(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

enum verdict {
	V_INIT = 0, /* references saved, nothing judged (T-R1) */
	V_SKIP,     /* zero delta: the segment is not counted at all (T-R2, TsecrLiteral) */
	V_OK,       /* judged, not late */
	V_LATE,     /* judged, late */
};

/* [R] tcp_rcv_cc: α_RFD and the window cap, once per sub-window of bytes. */
static __always_inline void rcv_cc(struct inigo_conn *c, const struct inigo_settings *s, __u32 mss,
				   __u32 rcv_wnd)
{
	if (!c->rcv_cwnd)
		c->rcv_cwnd = rcv_wnd;
	__u32 interval = c->rcv_cwnd;

	if (s->fairness)
		interval = min_u32(interval, s->fairness * mss);
	if (c->bytes_total < interval || !interval)
		return;
	__u32 alpha = c->alpha > 16 ? c->alpha - (c->alpha >> 4) : 0;

	if (c->bytes_late) {
		__u64 total = c->bytes_total ? c->bytes_total : 1;
		__u64 a = alpha + (c->bytes_late << 6) / total;

		alpha = a > ALPHA_MAX ? ALPHA_MAX : (__u32)a;
	}
	c->alpha = alpha;
	c->bytes_total = 0;
	c->bytes_late = 0;
	if (alpha) {
		__u32 cut = (__u32)(((__u64)interval * alpha) >> 11);
		__u32 w = c->rcv_cwnd > cut ? c->rcv_cwnd - cut : 0;

		c->rcv_cwnd = max_u32(w, 2 * mss);
		/* As a DCTCP sender's cut sets ssthresh: without it a cut leaves rcv_cwnd below the
		 * receiver's ssthresh, i.e. back in its slow start, where the next late segment halves
		 * again and α = 0 grows by whole intervals. */
		if (s->flags & INIGO_F_CUT_SSTHRESH)
			c->rcv_ssthresh = c->rcv_cwnd;
	} else if (c->rcv_cwnd > c->rcv_ssthresh ||
		   ((s->flags & INIGO_F_CUT_SSTHRESH) && c->rcv_cwnd == c->rcv_ssthresh)) {
		c->rcv_cwnd += (__u32)((__u64)mss * interval / c->rcv_cwnd);
	} else {
		c->rcv_cwnd += interval;
	}
	if (c->rcv_cwnd > MAX_WINDOW)
		c->rcv_cwnd = MAX_WINDOW;
	count(IC_IN_WINDOW_UPDATES);
}

static __always_inline void save_ref(struct inigo_conn *c, const struct seg *g, __u64 now)
{
	c->ref_tsval = g->tsval;
	c->ref_tsecr = g->tsecr;
	c->ref_arrival_ns = now;
	c->flags |= INIGO_C_HAVE_REF;
}

/*
 * One data segment with timestamps: [R] tcp_rcv_rfd with the resolutions of spec §13 (A-2 R from
 * arrival times by default, A-3 RTT_min scaled, A-4 a separate ssthresh, A-5 every segment).
 */
static __always_inline enum verdict rfd_step(struct inigo_conn *c, const struct inigo_settings *s,
					     const struct seg *g, const struct sockinfo *si, __u64 now)
{
	__u32 mss = si->advmss ? si->advmss : 536;
	/* tcp_rcv_rtt_update() keeps rcv_rtt_est.rtt_us << 3; the patch used it as it is. */
	__u32 rtt = (s->flags & INIGO_F_RTT_X8) ? si->rtt_raw : si->rtt_raw >> 3;

	c->rtt_raw = si->rtt_raw;
	c->advmss = mss;
	c->wscale = si->wscale;
	if (rtt) {
		if (!c->rtt_min_us || rtt <= c->rtt_min_us)
			c->rtt_min_us = rtt;
		else if (s->flags & INIGO_F_RTT_CREEP)
			c->rtt_min_us += 1;
	}
	if (!(c->flags & INIGO_C_HAVE_REF) || !c->rtt_min_us) {
		c->rcv_cwnd = si->rcv_wnd;
		save_ref(c, g, now);
		return V_INIT;
	}

	__s64 tick = c->tick_us;
	__s32 ds = (__s32)(g->tsval - c->ref_tsval);
	bool sample;
	__s64 d = 0;

	if (s->rfd_source == INIGO_RFD_TSECR) {
		__s32 dr = (__s32)(g->tsecr - c->ref_tsecr);

		/* [R]: both clocks still: the packet is not counted at all; keep the references. */
		if (!ds && !dr)
			return V_SKIP;
		d = (__s64)dr * tick - (__s64)ds * tick;
		sample = true;
	} else {
		/* The sender's clock has not advanced (or went back: reordering): no new sample at
		 * this resolution; keep the reference, but judge the segment on the current total. */
		sample = ds > 0;
		if (sample) {
			__u64 ref = c->ref_arrival_ns;
			/* unsigned division: BPF v3 has no signed one */
			__s64 dr_us = now >= ref ? (__s64)((now - ref) / 1000) : -(__s64)((ref - now) / 1000);

			d = dr_us - (__s64)ds * tick;
		}
	}
	if (sample) {
		c->rfd_total_us += d;
		if (c->rfd_total_us < 0) {
			c->rfd_total_us = 0;
			if (s->rebase && s->mode == INIGO_MODE_WINDOW && c->rcv_cwnd)
				c->rcv_cwnd = max_u32((__u32)((__u64)c->rcv_cwnd * s->rebase / 1024), 2 * mss);
		}
		save_ref(c, g, now);
	} else {
		count(IC_IN_ZERO_DELTA);
	}

	__u32 thresh = (__u32)((__u64)c->rtt_min_us * s->threshold_pct / 100);

	/* Tick slack (ours, README): a TSval is the sender's clock rounded down to its tick, so
	 * D_total = queueing + φ, φ ∈ [0, tick) the phase at which a sample's tick began: one-sided
	 * noise up to a whole tick, more than the threshold itself at small RTTs (0.68 ms at 4 ms).
	 * Above threshold + tick, late means a real queue above the threshold. µs peers: no noise. */
	if (!(s->flags & INIGO_F_NO_TICK_SLACK) && c->tick_us > 1)
		thresh += c->tick_us;
	c->thresh_us = thresh;
	c->bytes_total += g->payload;
	bool late = c->rfd_total_us > (__s64)thresh; /* strict, as [K] and [R] */

	if (late) {
		c->segs_late++;
		if (s->mode == INIGO_MODE_MARK)
			return V_LATE;
		c->bytes_late += g->payload;
		if (c->rcv_cwnd < c->rcv_ssthresh) { /* receiver slow start: leave at once */
			if (!(s->flags & INIGO_F_SS_HOLD))
				c->rcv_cwnd = max_u32(c->rcv_cwnd >> 1, 2 * mss);
			c->rcv_ssthresh = c->rcv_cwnd;
			count(IC_IN_SS_EXIT);
		}
	} else if (s->mode == INIGO_MODE_MARK) {
		return V_OK;
	}
	rcv_cc(c, s, mss, si->rcv_wnd);
	return late ? V_LATE : V_OK;
}

/* Rewrites the ECN field. IPv4: the header checksum follows (so a CHECKSUM_COMPLETE sum over
 * the header is unchanged); IPv6 has none, and the TCP checksum covers neither. */
static __always_inline int set_ecn(struct __sk_buff *skb, const struct seg *g, __u8 ecn)
{
	if (g->v4) {
		__u8 tos = (g->ip_first & ~ECN_MASK) | ecn;
		__u16 old_w, new_w;

		/* The checksum sums 16-bit words; tos is the second byte of the first one. */
		if (bpf_skb_load_bytes(skb, g->ip_off, &old_w, 2))
			return -1;
		new_w = old_w;
		((__u8 *)&new_w)[1] = tos;
		if (bpf_l3_csum_replace(skb, g->ip_off + 10, old_w, new_w, 2))
			return -1;
		return bpf_skb_store_bytes(skb, g->ip_off + 1, &tos, 1, 0);
	}
	/* IPv6: the traffic class spans bytes 0-1; its ECN bits are bits 4-5 of byte 1. */
	__u8 b = (g->ip_first & ~(ECN_MASK << 4)) | (ecn << 4);

	return bpf_skb_store_bytes(skb, g->ip_off + 1, &b, 1, BPF_F_RECOMPUTE_CSUM);
}

SEC("tcx/ingress")
int inigo_ingress(struct __sk_buff *skb)
{
	const struct inigo_settings *s = get_settings();
	struct seg g = {};
	struct sockinfo si = {};

	if (!s)
		return TCX_NEXT;
	count(IC_IN_PACKETS);
	if (parse(skb, s->l2_len, &g, true))
		return TCX_NEXT;
	count(IC_IN_TCP);
	if (g.tcp_flags & (TH_SYN | TH_RST)) {
		/* A new connection on this 4-tuple (its timestamps start from a new random offset),
		 * or the end of one: whatever state the tuple had goes. */
		bpf_map_delete_elem(&conns, &g.key);
		return TCX_NEXT;
	}
	if (!g.payload)
		return TCX_NEXT;
	count(IC_IN_DATA);
	parse_ts(skb, &g);
	if (!g.has_ts) {
		count(IC_IN_NO_TS);
		return TCX_NEXT;
	}
	count(IC_IN_TS);
	/* Marking needs an ECN-capable segment; nothing else to do for the others. */
	if (s->mode == INIGO_MODE_MARK && g.ecn == ECN_NOT_ECT) {
		count(IC_IN_NON_ECN);
		return TCX_NEXT;
	}
	if (lookup_sock(skb, &g, &si)) {
		count(IC_IN_NO_SOCK);
		return TCX_NEXT;
	}

	struct inigo_conn *c = bpf_map_lookup_elem(&conns, &g.key);
	__u64 gen = s->generation;

	if (!c) {
		struct inigo_conn fresh = {};

		fresh.generation = gen;
		bpf_map_update_elem(&conns, &g.key, &fresh, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&conns, &g.key);
		if (!c)
			return TCX_NEXT;
	}
	if (__sync_val_compare_and_swap(&c->busy, 0, 1) != 0) {
		count(IC_IN_BUSY);
		return TCX_NEXT;
	}
	if (c->generation != gen) { /* settings changed: start over (T-R1) */
		__builtin_memset(c, 0, __builtin_offsetof(struct inigo_conn, busy));
		c->generation = gen;
	}
	if (!(c->flags & INIGO_C_HAVE_REF)) {
		c->rcv_ssthresh = ~0u;
		c->tick_us = si.usec_ts ? 1 : (s->ts_tick_us ? s->ts_tick_us : 1000);
		if (si.usec_ts)
			c->flags |= INIGO_C_USEC_TS;
	}
	enum verdict v = rfd_step(c, s, &g, &si, now_ns());

	__sync_fetch_and_and(&c->busy, 0);
	/* The peer sends nothing after its FIN: free the slot (the ECN verdict below still holds). */
	if (g.tcp_flags & TH_FIN)
		bpf_map_delete_elem(&conns, &g.key);

	if (v == V_INIT) {
		count(IC_IN_INIT);
		return TCX_NEXT;
	}
	if (v == V_SKIP) {
		count(IC_IN_ZERO_DELTA);
		return TCX_NEXT;
	}
	if (v == V_LATE)
		count(IC_IN_LATE);
	if (s->mode != INIGO_MODE_MARK)
		return TCX_NEXT;
	if (v == V_LATE) {
		if (g.ecn == ECN_CE)
			count(IC_IN_CE_ALREADY);
		else if (!set_ecn(skb, &g, ECN_CE))
			count(IC_IN_CE_SET);
	} else if ((s->flags & INIGO_F_CLEAR_CE) && g.ecn == ECN_CE) {
		/* ECT(0): what classic-ECN senders send; Not-ECT would look like a retransmission to
		 * the receiving TCP (and force quick ACKs). */
		if (!set_ecn(skb, &g, ECN_ECT_0))
			count(IC_IN_CE_CLEARED);
	}
	return TCX_NEXT;
}

SEC("tcx/egress")
int inigo_egress(struct __sk_buff *skb)
{
	const struct inigo_settings *s = get_settings();
	struct seg g = {};

	if (!s || s->mode != INIGO_MODE_WINDOW)
		return TCX_NEXT;
	count(IC_OUT_PACKETS);
	if (parse(skb, s->l2_len, &g, false))
		return TCX_NEXT;
	count(IC_OUT_TCP);
	if (!(g.tcp_flags & TH_ACK) || (g.tcp_flags & (TH_SYN | TH_RST)))
		return TCX_NEXT; /* SYN windows are never scaled; leave handshakes and resets alone */

	struct inigo_conn *c = bpf_map_lookup_elem(&conns, &g.key);

	if (!c || c->generation != s->generation || !(c->flags & INIGO_C_HAVE_REF) || !c->rcv_cwnd) {
		count(IC_OUT_NO_STATE);
		return TCX_NEXT;
	}
	count(IC_OUT_ACKS);
	__u32 shift = c->wscale & 0xf;
	__u32 cap = c->rcv_cwnd;
	__u64 adv = (__u64)g.window << shift;

	if (adv <= cap)
		return TCX_NEXT;
	/* Round up: a cap of less than one unit must not become a zero window. */
	__u32 nw = (cap + (1u << shift) - 1) >> shift;

	if (!nw)
		nw = 1;
	if (nw > 0xffff)
		return TCX_NEXT;
	__u16 old_w = bpf_htons(g.window), new_w = bpf_htons((__u16)nw);
	__u32 off = g.tcp_off + 14;

	if (bpf_l4_csum_replace(skb, g.tcp_off + 16, old_w, new_w, 2))
		return TCX_NEXT;
	if (bpf_skb_store_bytes(skb, off, &new_w, 2, 0))
		return TCX_NEXT;
	count(IC_OUT_CAPPED);
	return TCX_NEXT;
}
