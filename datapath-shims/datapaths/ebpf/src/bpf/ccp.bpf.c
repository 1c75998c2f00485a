// SPDX-License-Identifier: GPL-2.0
/*
 * The ccp congestion control: a tcp_congestion_ops whose per-ACK entry (cong_control) folds the
 * measurement contract into one report per interval chosen by the agent (or, in per-ACK mode, for
 * a libccp shim, sends each ACK's primitives instead), applies the agent's window and pacing rate
 * from the control map, and steers the flow itself (Cubic or Reno) while the agent has nothing to
 * say or has gone silent.
 *
 * cong_control replaces the stack's whole window logic: no PRR, no cong_avoid, no pacing-rate
 * update, and tcp_end_cwnd_reduction returns early. So this program owns the loss response and
 * sk_pacing_rate in both modes (agent: hold what the agent commanded, conserving packets from a
 * loss until the agent answers it; fallback: the algorithm and a PRR reduction as the stack
 * would do).
 *
 * Per-flow state lives in socket storage (the 104 bytes of icsk_ca_priv are too few for the fold
 * plus the fallback). cong_control can run before init on an active open (the SYN-ACK is acked
 * before tcp_init_transfer), so every op first checks that the state exists.
 */
#include "common.bpf.h"
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define NSEC_PER_USEC 1000ULL
#define TCP_ECN_OK 1 /* include/net/tcp.h: the connection negotiated ECN */
#define NSEC_PER_MSEC 1000000ULL
#define MIN_CWND 2
/* tcp_input.c: the ACK carried ECN-Echo (in cong_control's `flag` since 4.9's cong_control). */
#define FLAG_ECE 0x40
/* Cubic: beta = 717/1024 (0.7), C = 0.4 packets/s^3. */
#define CUBIC_BETA 717
#define CUBIC_BETA_SCALE 1024
/* 1 / C in ms^3 per packet: (1000 ms)^3 / 0.4. */
#define CUBIC_INV_C_MS3 2500000000ULL

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

enum mode { MODE_FALLBACK = 0, MODE_AGENT = 1 };

struct cubic {
	__u64 epoch_ns;      /* start of the current growth epoch; 0: none */
	__u32 cnt;           /* grow the window by one packet per this many packets acked */
	__u32 last_max_cwnd; /* window before the last reduction */
	__u32 origin;        /* the plateau the cubic curve is centred on */
	__u32 k_ms;          /* time from the epoch start to the plateau */
	__u32 tcp_cwnd;      /* what Reno would have by now (TCP-friendly region) */
	__u32 ack_cnt;
};

struct flow {
	__u32 fid;
	__u8 mode;
	__u8 urgent;   /* pending urgent cause, reported at the next ACK */
	__u8 ca_state; /* as of the last set_state */
	__u8 paced;    /* this program set SK_PACING_NEEDED */
	__u64 start_ns;
	__u64 last_urgent_ns;
	/* Cumulative kernel counters at the start of the interval. */
	__u64 snap_bytes_acked;
	__u32 snap_delivered;
	__u32 snap_ce;
	__u32 snap_lost;
	__u32 prev_sacked_out;
	/* Folded over the interval. */
	__u64 rtt_sum;
	__u32 sacked;
	__u32 ece;
	__u32 acks;
	__u32 rtt_min;
	__u32 rtt_max;
	__u32 rtt_last;
	__u32 rtt_samples;
	__u32 rtt_over;
	__u32 rate_delivered;
	__u32 rate_snd_us;
	__u32 rate_rcv_us;
	__u32 rate_max_delivered; /* the interval's fastest sample (see ccp_rec_report) */
	__u32 rate_max_us;
	__u32 agg_extra_max;      /* the interval's largest ACK-aggregation excess, packets */
	__u8 agg_measured;        /* agg_extra_max was measured this interval */
	__u16 timeouts;
	__u8 rate_app_limited;
	__u8 cwnd_limited;  /* tcp_is_cwnd_limited() at an ACK of the interval */
	/* Control and fallback. */
	__u32 rtt_threshold_us;
	__u32 agg_kbytes_per_s; /* the control entry's aggregation rate (0: not measured) */
	__u32 agg_epoch_acked;  /* packets delivered in the aggregation epoch */
	__u64 agg_epoch_us;     /* the epoch's start, tp->delivered_mstamp */
	__u32 ctrl_epoch;   /* epoch and seq of the control entry last applied */
	__u32 ctrl_seq;
	__u32 ctrl_mss;     /* the MSS ctrl_cwnd was computed with */
	__u32 ctrl_cwnd;    /* the entry's window in packets (0: none) */
	__u32 prr_delivered;
	/* Loss recovery under the agent: packets conserved from the stack's entry into Recovery
	 * until the agent's next control entry (see conserve_until_answer). */
	__u64 hold_start_ns; /* 0: not holding */
	__u32 hold_seq;      /* ctrl_seq at the entry */
	/* Life totals, for the close record. */
	__u64 life_bytes_acked;
	__u32 life_lost;
	__u32 slot;         /* control slot last found to hold this flow's entry */
	struct cubic cubic;
};

/* enum ccp_records, set by the loader; the only .rodata variable, so it sits at offset 0. */
const volatile __u32 cfg_records = CCP_RECORDS_FOLDED;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* set from user space before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536); /* set from user space before load: a power of two */
	__type(key, __u32);
	__type(value, struct ccp_ctrl);
} ctrl SEC(".maps");

/* Flows whose control entry user space placed away from their home slot (fid & ctrl_mask, held
 * by another live flow): fid -> slot. Looked up only while a flow's cached slot does not hold its
 * entry. Sized like ctrl from user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} ctrl_slot SEC(".maps");

/* The create record of every live flow, for an agent that adopts flows it did not see start
 * (allocated on demand: release deletes each entry). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct ccp_rec_create);
} flow_info SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ccp_knobs);
} knobs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ccp_shared);
} shared SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CCP_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct flow);
} flows SEC(".maps");

/* Time from `then` to `now`, 0 if `now` is earlier: ACKs are stamped in us (tcp_mstamp) and
 * other events in ns, so a later event can look a few hundred ns older. */
static __always_inline __u64 since(__u64 now, __u64 then)
{
	return now > then ? now - then : 0;
}

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c)
		*c += 1;
}

static __always_inline struct ccp_knobs *get_knobs(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&knobs, &zero);
}

static __always_inline struct flow *get_flow(struct sock *sk)
{
	struct flow *f = bpf_sk_storage_get(&flows, sk, 0, 0);

	return f && f->fid ? f : 0;
}

static __always_inline __u32 in_flight(const struct tcp_sock *tp)
{
	__u32 left = tp->sacked_out + tp->lost_out;
	__u32 out = tp->packets_out;

	return (out > left ? out - left : 0) + tp->retrans_out;
}

static __always_inline bool in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* tcp_is_cwnd_limited(): growth only when the window, not the application or the receiver,
 * limits sending. The kernel keeps is_cwnd_limited for a window of data (tcp_cwnd_validate). */
static __always_inline bool cwnd_limited(const struct tcp_sock *tp)
{
	if (tp->is_cwnd_limited)
		return true;
	if (in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

static __always_inline void set_cwnd(struct tcp_sock *tp, __u32 cwnd)
{
	if (cwnd < MIN_CWND)
		cwnd = MIN_CWND;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	if (tp->snd_cwnd != cwnd) {
		tp->snd_cwnd = cwnd;
		tp->snd_cwnd_stamp = (__u32)bpf_jiffies64();
	}
}

/*
 * What tcp_update_pacing_rate() would set: 2x (slow start) or 1.2x cwnd/srtt. Unless pacing is
 * enforced this only sizes TSO bursts (tcp_tso_autosize), as for any unpaced kernel flow.
 */
static __always_inline void stack_pacing_rate(struct sock *sk, const struct tcp_sock *tp)
{
	__u32 srtt = tp->srtt_us;
	__u64 rate = (__u64)tp->mss_cache * ((1000000 / 100) << 3);
	__u32 cwnd = tp->snd_cwnd > tp->packets_out ? tp->snd_cwnd : tp->packets_out;

	rate *= tp->snd_cwnd < tp->snd_ssthresh / 2 ? 200 : 120;
	rate *= cwnd;
	if (srtt)
		rate /= srtt;
	if (rate > sk->sk_max_pacing_rate)
		rate = sk->sk_max_pacing_rate;
	sk->sk_pacing_rate = rate;
}

/* Gives up pacing this program enforced; SO_MAX_PACING_RATE keeps the socket paced. */
static __always_inline void unpace(struct sock *sk, struct flow *f)
{
	if (sk->sk_max_pacing_rate == ~0UL)
		sk->sk_pacing_status = SK_PACING_NONE;
	f->paced = 0;
}

/* --- records ------------------------------------------------------------------------------- */

static __always_inline void hdr_init(struct ccp_rec_hdr *h, __u8 kind, __u16 size, __u32 fid, __u64 now)
{
	h->version = CCP_REC_VERSION;
	h->kind = kind;
	h->size = size;
	h->fid = fid;
	h->ts_ns = now;
}

/*
 * Wakeup policy: an urgent record wakes the consumer at once; an ordinary one only if no record
 * woke it within wake_gap_ns. The consumer also drains on a timer, so a record that did not wake
 * it waits at most that long. Waking on every record costs an IPI per record (3-7 us on KVM).
 */
static __always_inline __u64 wake_flags(__u64 now, bool urgent, const struct ccp_knobs *k)
{
	__u32 zero = 0;
	struct ccp_shared *s = bpf_map_lookup_elem(&shared, &zero);

	if (!s)
		return BPF_RB_NO_WAKEUP;
	if (urgent || since(now, s->last_wake_ns) >= k->wake_gap_ns) {
		s->last_wake_ns = now;
		count(CCP_CNT_WAKEUPS);
		return BPF_RB_FORCE_WAKEUP;
	}
	return BPF_RB_NO_WAKEUP;
}

/* Starts a new interval: the cumulative counters become the new baseline. */
static __always_inline void interval_reset(struct flow *f, const struct tcp_sock *tp, __u64 now)
{
	f->start_ns = now;
	f->snap_bytes_acked = tp->bytes_acked;
	f->snap_delivered = tp->delivered;
	f->snap_ce = tp->delivered_ce;
	f->snap_lost = tp->lost;
	f->rtt_sum = 0;
	f->sacked = 0;
	f->ece = 0;
	f->acks = 0;
	f->rtt_min = 0;
	f->rtt_max = 0;
	f->rtt_last = 0;
	f->rtt_samples = 0;
	f->rtt_over = 0;
	f->rate_delivered = 0;
	f->rate_snd_us = 0;
	f->rate_rcv_us = 0;
	f->rate_max_delivered = 0;
	f->rate_max_us = 0;
	f->agg_extra_max = 0;
	f->agg_measured = 0;
	f->rate_app_limited = 0;
	f->cwnd_limited = 0;
	f->timeouts = 0;
	f->urgent = CCP_URGENT_NONE;
}

static __always_inline void emit_report(struct sock *sk, struct tcp_sock *tp, struct flow *f, __u64 now,
					__u8 urgent, const struct ccp_knobs *k)
{
	struct ccp_rec_report *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		/* Keep folding: the next report covers this interval too, and says what made this
		 * one urgent (a timeout's report may be the only one for several RTOs). */
		count(CCP_CNT_DROPS);
		if (urgent > f->urgent)
			f->urgent = urgent;
		return;
	}
	hdr_init(&r->hdr, CCP_REC_REPORT, sizeof(*r), f->fid, now);
	r->start_ns = f->start_ns;
	r->acked_bytes = tp->bytes_acked - f->snap_bytes_acked;
	r->rtt_sum_us = f->rtt_sum;
	r->pacing_rate = sk->sk_pacing_rate;
	__u32 delivered = tp->delivered - f->snap_delivered;
	r->acked_pkts = delivered > f->sacked ? delivered - f->sacked : 0;
	r->sacked_pkts = f->sacked;
	r->lost_pkts = tp->lost - f->snap_lost;
	r->ce_pkts = tp->delivered_ce - f->snap_ce;
	r->ece_acks = f->ece;
	r->acks = f->acks;
	r->rtt_min_us = f->rtt_min;
	r->rtt_max_us = f->rtt_max;
	r->rtt_last_us = f->rtt_last;
	r->rtt_samples = f->rtt_samples;
	r->rtt_over_samples = f->rtt_over;
	r->srtt_us = tp->srtt_us >> 3;
	r->rate_delivered = f->rate_delivered;
	r->rate_snd_us = f->rate_snd_us;
	r->rate_rcv_us = f->rate_rcv_us;
	r->rate_max_delivered = f->rate_max_delivered;
	r->rate_max_us = f->rate_max_us;
	r->extra_acked_pkts = f->agg_extra_max;
	r->_pad2 = 0;
	r->inflight_pkts = in_flight(tp);
	r->unacked_pkts = tp->packets_out;
	r->pending_bytes = tp->write_seq - tp->snd_una;
	r->cwnd_pkts = tp->snd_cwnd;
	r->ssthresh = tp->snd_ssthresh;
	r->mss = tp->mss_cache;
	r->ctrl_seq = f->mode == MODE_AGENT ? f->ctrl_seq : 0;
	r->timeouts = f->timeouts;
	r->urgent = urgent;
	r->flags = (f->rate_app_limited ? CCP_RF_APP_LIMITED : 0) | (f->mode == MODE_FALLBACK ? CCP_RF_FALLBACK : 0) |
		   (sk->sk_pacing_status == SK_PACING_NEEDED ? CCP_RF_PACED : 0) |
		   (f->cwnd_limited || cwnd_limited(tp) ? 0 : CCP_RF_WINDOW_UNUSED) |
		   (f->agg_measured ? CCP_RF_EXTRA_ACKED : 0);
	r->ca_state = f->ca_state;
	__builtin_memset(r->_pad, 0, sizeof(r->_pad));
	bpf_ringbuf_submit(r, wake_flags(now, urgent != CCP_URGENT_NONE, k));
	count(CCP_CNT_RECORDS);
	if (urgent)
		f->last_urgent_ns = now;
	interval_reset(f, tp, now);
}

/*
 * Per-ACK mode: one record with this ACK's primitives, or with none but the timeout flag when
 * set_state reports an RTO (rs is NULL then). The flow's snapshots advance only when a record is
 * written. Losses and timeouts wake the consumer at once, as urgent reports do.
 */
static __always_inline void emit_ack(struct sock *sk, struct tcp_sock *tp, struct flow *f, const struct rate_sample *rs,
				     __u64 now, __u8 flags, const struct ccp_knobs *k)
{
	struct ccp_rec_ack *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	__u32 sacked_out = tp->sacked_out;
	__u32 misordered = sacked_out > f->prev_sacked_out ? sacked_out - f->prev_sacked_out : 0;
	__u32 acked_sacked = 0, lost = 0;
	bool urgent;

	if (!r) {
		count(CCP_CNT_DROPS);
		return;
	}
	hdr_init(&r->hdr, CCP_REC_ACK, sizeof(*r), f->fid, now);
	r->bytes_acked = tp->bytes_acked - f->snap_bytes_acked;
	f->snap_bytes_acked = tp->bytes_acked;
	f->prev_sacked_out = sacked_out;
	r->packets_misordered = misordered;
	r->ce_pkts = 0;
	r->rtt_us = 0;
	r->rate_delivered = 0;
	r->rate_snd_us = 0;
	r->rate_rcv_us = 0;
	if (rs) {
		acked_sacked = rs->acked_sacked;
		lost = rs->losses > 0 ? rs->losses : 0;
		r->ce_pkts = rs->delivered_ce > 0 ? rs->delivered_ce : 0;
		r->rtt_us = rs->rtt_us > 0 ? (rs->rtt_us > 0xffffffffL ? 0xffffffff : (__u32)rs->rtt_us) : 0;
		if (rs->delivered > 0 && rs->interval_us > 0 && rs->snd_interval_us > 0 && rs->rcv_interval_us > 0) {
			r->rate_delivered = rs->delivered;
			r->rate_snd_us = rs->snd_interval_us;
			r->rate_rcv_us = rs->rcv_interval_us;
		}
	}
	r->packets_acked = acked_sacked > misordered ? acked_sacked - misordered : 0;
	r->lost_pkts = lost;
	r->inflight_pkts = in_flight(tp);
	r->pending_bytes = tp->write_seq - tp->snd_una;
	r->cwnd_pkts = tp->snd_cwnd;
	r->mss = tp->mss_cache;
	r->flags = flags | (f->mode == MODE_FALLBACK ? CCP_AF_FALLBACK : 0);
	__builtin_memset(r->_pad, 0, sizeof(r->_pad));
	urgent = lost || (flags & CCP_AF_TIMEOUT);
	bpf_ringbuf_submit(r, wake_flags(now, urgent, k));
	count(CCP_CNT_RECORDS);
}

/* --- the fold -------------------------------------------------------------------------------- */

/* tcp_bbr.c's bbr_ack_epoch_acked_reset_thresh and the epoch counter's width. */
#define AGG_EPOCH_RESET_PKTS (1U << 20)
#define AGG_EPOCH_MAX_PKTS 0xFFFFF

/*
 * ACK aggregation, per ACK as tcp_bbr.c's bbr_update_ack_aggregation measures it, against the
 * rate the agent set (BBR's BtlBw): an epoch starts when the packets delivered since it began
 * fall behind rate × its age; each ACK's excess over that product, at most the window, is
 * max-folded over the interval. A report alone spreads its delivery over its interval, so
 * bursts within it were invisible to the agent: at 200 Mbit/s the kernel's BBR found 60-125
 * packets of aggregation where the agent's per-report estimate found 23.
 */
static __always_inline void fold_aggregation(struct flow *f, const struct tcp_sock *tp, const struct rate_sample *rs)
{
	__u64 epoch_us, expected;
	__u32 mss = tp->mss_cache ? tp->mss_cache : 1;
	__u32 extra;

	if (!f->agg_kbytes_per_s || rs->acked_sacked <= 0 || rs->delivered < 0 || rs->interval_us <= 0)
		return;
	epoch_us = since(tp->delivered_mstamp, f->agg_epoch_us);
	if (epoch_us > 0xffffffffULL)
		epoch_us = 0xffffffffULL;
	/* kB/s × µs / 1000 = bytes; < 2^32 × 2^32 / 1000, no overflow. */
	expected = (__u64)f->agg_kbytes_per_s * epoch_us / 1000 / mss;
	if (f->agg_epoch_acked <= expected || f->agg_epoch_acked + rs->acked_sacked >= AGG_EPOCH_RESET_PKTS) {
		f->agg_epoch_acked = 0;
		f->agg_epoch_us = tp->delivered_mstamp;
		expected = 0;
	}
	f->agg_epoch_acked += rs->acked_sacked;
	if (f->agg_epoch_acked > AGG_EPOCH_MAX_PKTS)
		f->agg_epoch_acked = AGG_EPOCH_MAX_PKTS;
	extra = f->agg_epoch_acked - (__u32)expected;
	if (extra > tp->snd_cwnd)
		extra = tp->snd_cwnd;
	if (!f->agg_measured || extra > f->agg_extra_max)
		f->agg_extra_max = extra;
	f->agg_measured = 1;
}

static __always_inline void fold(struct flow *f, const struct tcp_sock *tp, int flag, const struct rate_sample *rs)
{
	__u32 sacked_out = tp->sacked_out;
	long rtt = rs->rtt_us;

	if (sacked_out > f->prev_sacked_out)
		f->sacked += sacked_out - f->prev_sacked_out;
	f->prev_sacked_out = sacked_out;
	f->acks++;
	if (cwnd_limited(tp))
		f->cwnd_limited = 1;
	/* ECN-Echo from cong_control's flags rather than an in_ack_event op: that op would be a
	 * second program run, and a second storage lookup, on every ACK. */
	if (flag & FLAG_ECE)
		f->ece++;
	if (rtt > 0) {
		__u32 r = rtt > 0xffffffffL ? 0xffffffff : (__u32)rtt;

		if (!f->rtt_samples || r < f->rtt_min)
			f->rtt_min = r;
		if (r > f->rtt_max)
			f->rtt_max = r;
		f->rtt_last = r;
		f->rtt_sum += r;
		f->rtt_samples++;
		/* Per sample, not per packet: Inigo counts late RTTs per ACK. */
		if (f->rtt_threshold_us && r > f->rtt_threshold_us)
			f->rtt_over++;
	}
	/* Send and delivery rates from the same rate sample (Nimbus needs the pair). */
	if (rs->delivered > 0 && rs->interval_us > 0 && rs->snd_interval_us > 0 && rs->rcv_interval_us > 0) {
		f->rate_delivered = rs->delivered;
		f->rate_snd_us = rs->snd_interval_us;
		f->rate_rcv_us = rs->rcv_interval_us;
		f->rate_app_limited = rs->is_app_limited;
		/* BBR's bandwidth filter is a max over every ACK's sample: the last one of a report
		 * would be a random draw from them, and at 1 % loss the agent's BBR then ran 5-35 %
		 * below the kernel's. rs->interval_us is the longer of the two intervals. */
		if ((__u64)rs->delivered * f->rate_max_us >= (__u64)f->rate_max_delivered * rs->interval_us) {
			f->rate_max_delivered = rs->delivered;
			f->rate_max_us = rs->interval_us;
		}
	}
	fold_aggregation(f, tp, rs);
}

static __always_inline __u64 report_interval_ns(const struct tcp_sock *tp, const struct ccp_ctrl *c,
						const struct ccp_knobs *k)
{
	__u32 rtts = c ? c->report_rtts_x16 : k->default_rtts_x16;
	__u64 ns;

	if (rtts)
		ns = (__u64)(tp->srtt_us >> 3) * NSEC_PER_USEC * rtts / 16;
	else if (c && c->report_interval_us)
		ns = (__u64)c->report_interval_us * NSEC_PER_USEC;
	else
		ns = k->default_interval_ns;
	return ns < k->min_interval_ns ? k->min_interval_ns : ns;
}

/* --- control from the agent ---------------------------------------------------------------- */

static __always_inline void apply_ctrl(struct sock *sk, struct tcp_sock *tp, struct flow *f, const struct ccp_ctrl *c)
{
	__u32 mss = tp->mss_cache ? tp->mss_cache : 1;

	/* The entry is a level re-applied on every ACK; its division is redone only when the
	 * entry or the MSS changes. */
	if (c->seq != f->ctrl_seq || c->epoch != f->ctrl_epoch || mss != f->ctrl_mss) {
		__u64 pkts = c->cwnd_bytes ? (c->cwnd_bytes + mss / 2) / mss : 0;

		f->ctrl_cwnd = pkts > 0xffffffff ? 0xffffffff : (__u32)pkts;
		f->ctrl_mss = mss;
		f->ctrl_seq = c->seq;
		f->ctrl_epoch = c->epoch;
		f->rtt_threshold_us = c->rtt_threshold_us;
		f->agg_kbytes_per_s = c->aggregation_kbytes_per_s;
		if (!c->pacing_rate && f->paced)
			unpace(sk, f);
		if (!c->pacing_rate)
			stack_pacing_rate(sk, tp);
	}
	if (f->ctrl_cwnd && tp->snd_cwnd != f->ctrl_cwnd)
		set_cwnd(tp, f->ctrl_cwnd);
	if (c->pacing_rate) {
		__u64 rate = c->pacing_rate;

		if (rate > sk->sk_max_pacing_rate)
			rate = sk->sk_max_pacing_rate;
		if (sk->sk_pacing_rate != rate)
			sk->sk_pacing_rate = rate;
		if (sk->sk_pacing_status != SK_PACING_NEEDED)
			sk->sk_pacing_status = SK_PACING_NEEDED;
		f->paced = 1;
	}
}

/*
 * The stack has just detected a loss (Recovery) and reported it urgently; the agent's answer is
 * a round trip through user space away. Until it comes (a control entry newer than the one in
 * force at the entry), and for at most one smoothed RTT, one packet goes out per packet
 * delivered (RFC 6937's packet conservation; the first recovery round of Linux's BBR), with one
 * for the fast retransmit. Without this the window of before the loss stays in force, and the
 * ACK that detects the loss, having taken the lost packet out of the flight, sends new data into
 * the queue that just overflowed: the agent's Reno lost three packets per overflow where the
 * kernel's lost two, the last two sent before its cut. Not on an ECN-Echo (CWR): nothing left
 * the flight there, and for ABC, whose brake and accelerate marks are not congestion, holding
 * the window at every echo broke its sharing (4 flows: Jain 0.86).
 */
static __always_inline void conserve_until_answer(struct tcp_sock *tp, struct flow *f, const struct rate_sample *rs,
						  __u64 now)
{
	__u32 acked = rs->acked_sacked > 0 ? rs->acked_sacked : 1;
	__u32 conserve;

	if (!f->hold_start_ns)
		return;
	if (f->ctrl_seq != f->hold_seq || f->ca_state != TCP_CA_Recovery ||
	    since(now, f->hold_start_ns) > (__u64)(tp->srtt_us >> 3) * NSEC_PER_USEC) {
		f->hold_start_ns = 0;
		return;
	}
	conserve = in_flight(tp) + acked;
	if (tp->snd_cwnd > conserve)
		set_cwnd(tp, conserve);
}

/* The running agent's control entry for this flow: at the cached slot (every ACK of a controlled
 * flow: one array lookup), else where ctrl_slot says user space moved it, else at home. An entry
 * of an earlier agent (another epoch) is passed over at each step: after a restart it can still
 * sit at the flow's cached or moved slot while the new agent's entry is at home, and taking it
 * would keep the flow on the fallback for as long as nothing overwrites that slot. */
static __always_inline const struct ccp_ctrl *find_ctrl(struct flow *f, const struct ccp_knobs *k)
{
	__u32 slot = f->slot & k->ctrl_mask;
	const struct ccp_ctrl *c = bpf_map_lookup_elem(&ctrl, &slot);
	__u32 *moved;

	if (c && c->fid == f->fid && c->epoch == k->epoch)
		return c;
	moved = bpf_map_lookup_elem(&ctrl_slot, &f->fid);
	if (moved) {
		slot = *moved & k->ctrl_mask;
		c = bpf_map_lookup_elem(&ctrl, &slot);
		if (c && c->fid == f->fid && c->epoch == k->epoch) {
			f->slot = slot;
			return c;
		}
	}
	slot = f->fid & k->ctrl_mask;
	c = bpf_map_lookup_elem(&ctrl, &slot);
	if (c && c->fid == f->fid && c->epoch == k->epoch) {
		f->slot = slot;
		return c;
	}
	return 0;
}

/* The control entry in force, or NULL when the agent has none for this flow or went silent. */
static __always_inline const struct ccp_ctrl *live_ctrl(struct flow *f, const struct ccp_knobs *k, __u64 now)
{
	if (since(now, k->heartbeat_ns) > k->silence_timeout_ns)
		return 0;
	return find_ctrl(f, k);
}

/* --- fallback: Cubic or Reno in the kernel --------------------------------------------------- */

/* Bits needed to write v: smear the top bit down, then count (no branches, no clz: clang 14's
 * BPF backend cannot lower __builtin_clzll). */
static __always_inline __u32 bit_length(__u64 v)
{
	v |= v >> 1;
	v |= v >> 2;
	v |= v >> 4;
	v |= v >> 8;
	v |= v >> 16;
	v |= v >> 32;
	v = v - ((v >> 1) & 0x5555555555555555ULL);
	v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
	v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (__u32)((v * 0x0101010101010101ULL) >> 56);
}

/*
 * Integer cube root: Newton's method from a power of two above the root, which only decreases
 * towards it. Branch-free apart from the final correction, so the verifier walks it once.
 */
static __always_inline __u32 cbrt_u64(__u64 v)
{
	__u32 bits;
	__u64 x;

	if (v < 2)
		return (__u32)v;
	bits = bit_length(v);
	x = 1ULL << ((bits + 2) / 3);
	for (int i = 0; i < 6; i++)
		x = (2 * x + v / (x * x)) / 3;
	if (x * x * x > v)
		x--;
	return (__u32)x;
}

/* The Cubic window growth (RFC 9438): sets c->cnt for tcp_cong_avoid_ai. */
static __always_inline void cubic_update(struct cubic *c, const struct tcp_sock *tp, __u32 acked, __u64 now)
{
	__u32 cwnd = tp->snd_cwnd;
	__u64 t_ms, offs, delta, target;
	__u32 cnt;

	c->ack_cnt += acked;
	if (!c->epoch_ns) {
		c->epoch_ns = now;
		c->ack_cnt = acked;
		c->tcp_cwnd = cwnd;
		if (c->last_max_cwnd <= cwnd) {
			c->k_ms = 0;
			c->origin = cwnd;
		} else {
			c->k_ms = cbrt_u64((__u64)(c->last_max_cwnd - cwnd) * CUBIC_INV_C_MS3);
			c->origin = c->last_max_cwnd;
		}
	}
	/* Aim at where the curve will be one minimum RTT from now. */
	t_ms = since(now, c->epoch_ns) / NSEC_PER_MSEC + tp->rtt_min.s[0].v / 1000;
	offs = t_ms < c->k_ms ? c->k_ms - t_ms : t_ms - c->k_ms;
	if (offs > 1000000)
		offs = 1000000;
	delta = offs * offs * offs / CUBIC_INV_C_MS3;
	if (t_ms < c->k_ms)
		target = c->origin > delta ? c->origin - delta : 0;
	else
		target = c->origin + delta;
	if (target > cwnd) {
		__u64 d = target - cwnd;

		cnt = d >= cwnd ? 1 : cwnd / (__u32)d;
	} else {
		cnt = 100 * cwnd;
	}
	/* Before the first loss there is no plateau to respect: at least 5% growth per RTT. */
	if (c->last_max_cwnd == 0 && cnt > 20)
		cnt = 20;

	/* TCP-friendly region: never grow slower than Reno with the same beta would. */
	__u32 step = cwnd * (8 * (CUBIC_BETA_SCALE + CUBIC_BETA) / 3 / (CUBIC_BETA_SCALE - CUBIC_BETA)) / 8;

	if (step) {
		__u32 inc = c->ack_cnt / step;

		c->tcp_cwnd += inc;
		c->ack_cnt -= inc * step;
	}
	if (c->tcp_cwnd > cwnd) {
		__u32 max_cnt = cwnd / (c->tcp_cwnd - cwnd);

		if (cnt > max_cnt)
			cnt = max_cnt;
	}
	c->cnt = cnt < 2 ? 2 : cnt;
}

static __always_inline __u32 cubic_ssthresh(struct cubic *c, __u32 cwnd)
{
	c->epoch_ns = 0;
	/* Fast convergence: a flow that lost below its last plateau yields bandwidth sooner. */
	if (cwnd < c->last_max_cwnd)
		c->last_max_cwnd = cwnd * (CUBIC_BETA_SCALE + CUBIC_BETA) / (2 * CUBIC_BETA_SCALE);
	else
		c->last_max_cwnd = cwnd;
	cwnd = cwnd * CUBIC_BETA / CUBIC_BETA_SCALE;
	return cwnd < MIN_CWND ? MIN_CWND : cwnd;
}

/* Proportional Rate Reduction (RFC 6937), which the stack skips when cong_control is set. */
static __always_inline void prr(struct tcp_sock *tp, struct flow *f, __u32 newly_acked_sacked)
{
	__u32 prior_cwnd = tp->prior_cwnd;
	__u32 inflight = in_flight(tp);
	__u32 ssthresh = tp->snd_ssthresh;
	__u32 prr_out = tp->prr_out;
	__s64 sndcnt;

	if (!newly_acked_sacked || !prior_cwnd)
		return;
	f->prr_delivered += newly_acked_sacked;
	if (inflight > ssthresh) {
		__u64 dividend = (__u64)ssthresh * f->prr_delivered + prior_cwnd - 1;

		sndcnt = (__s64)(dividend / prior_cwnd) - prr_out;
	} else {
		__s64 delta = (__s64)ssthresh - inflight;

		sndcnt = (__s64)f->prr_delivered - prr_out;
		if (sndcnt < newly_acked_sacked)
			sndcnt = newly_acked_sacked;
		if (sndcnt > delta)
			sndcnt = delta;
	}
	if (sndcnt < (prr_out ? 0 : 1))
		sndcnt = prr_out ? 0 : 1;
	tp->snd_cwnd = inflight + (__u32)sndcnt;
}

static __always_inline void fallback_ack(struct sock *sk, struct tcp_sock *tp, struct flow *f, __u32 ack,
					 const struct rate_sample *rs, __u64 now, __u32 alg)
{
	__u32 acked = rs->acked_sacked;

	if (f->ca_state == TCP_CA_CWR || f->ca_state == TCP_CA_Recovery) {
		prr(tp, f, acked);
	} else if (acked && cwnd_limited(tp)) {
		if (alg == CCP_FALLBACK_RENO) {
			tcp_reno_cong_avoid(sk, ack, acked);
		} else {
			if (in_slow_start(tp))
				acked = tcp_slow_start(tp, acked);
			if (acked) {
				cubic_update(&f->cubic, tp, acked, now);
				tcp_cong_avoid_ai(tp, f->cubic.cnt, acked);
			}
		}
	}
	stack_pacing_rate(sk, tp);
}

/*
 * A flow with no state of ours: cong_control before init on an active open (the SYN-ACK), or
 * socket storage that could not be allocated at init (memory pressure). Returning early would
 * freeze its window (no growth, no loss response: cong_control replaces the stack's), so it runs
 * the stack's Reno without state: growth by tcp_reno_cong_avoid, and in CWR/Recovery the window
 * cut to the ssthresh ccp_ssthresh gave (Reno's, without state) at once instead of by PRR.
 */
static __always_inline void stateless_ack(struct sock *sk, struct tcp_sock *tp, __u32 ack, const struct rate_sample *rs)
{
	__u8 state = BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_state);

	if (state == TCP_CA_CWR || state == TCP_CA_Recovery) {
		if (tp->snd_cwnd > tp->snd_ssthresh)
			set_cwnd(tp, tp->snd_ssthresh);
	} else if (rs->acked_sacked) {
		tcp_reno_cong_avoid(sk, ack, rs->acked_sacked);
	}
	stack_pacing_rate(sk, tp);
}

/* The agent stopped steering the flow: continue from its window, without its pacing. */
static __always_inline void enter_fallback(struct sock *sk, struct flow *f)
{
	f->mode = MODE_FALLBACK;
	f->cubic.epoch_ns = 0;
	f->ctrl_seq = 0;
	if (f->paced)
		unpace(sk, f);
}

/* --- struct_ops -------------------------------------------------------------------------- */

SEC("struct_ops")
void BPF_PROG(ccp_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct ccp_knobs *k = get_knobs();
	__u32 zero = 0;
	struct ccp_shared *s = bpf_map_lookup_elem(&shared, &zero);
	struct flow *f = bpf_sk_storage_get(&flows, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	struct ccp_rec_create rec = {};
	struct ccp_flow_id id = {};
	__u64 now = bpf_ktime_get_ns();

	if (!f || !s || !k) {
		count(CCP_CNT_NO_STORAGE);
		return;
	}
	__builtin_memset(f, 0, sizeof(*f));
	f->fid = __sync_fetch_and_add(&s->next_fid, 1);
	if (!f->fid)
		f->fid = __sync_fetch_and_add(&s->next_fid, 1);
	f->slot = f->fid & k->ctrl_mask;
	f->mode = MODE_FALLBACK;
	f->ca_state = BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_state);
	f->prev_sacked_out = tp->sacked_out;
	f->life_bytes_acked = tp->bytes_acked;
	f->life_lost = tp->lost;
	interval_reset(f, tp, now);

	/* A flow switched from BBR keeps BBR's pacing, which nothing would update any more. */
	if (sk->sk_max_pacing_rate == ~0UL && sk->sk_pacing_status == SK_PACING_NEEDED)
		sk->sk_pacing_status = SK_PACING_NONE;
	stack_pacing_rate(sk, tp);

	flow_id_from_skc(&id, &sk->__sk_common);
	hdr_init(&rec.hdr, CCP_REC_CREATE, sizeof(rec), f->fid, now);
	rec.cookie = sk->__sk_common.skc_cookie.counter;
	rec.netns_cookie = sk->__sk_common.skc_net.net->net_cookie;
	rec.cgroup_id = sk->sk_cgrp_data.cgroup->kn->id;
	__builtin_memcpy(rec.saddr, id.saddr, 16);
	__builtin_memcpy(rec.daddr, id.daddr, 16);
	rec.family = id.family;
	rec.sport = id.sport;
	rec.dport = id.dport;
	rec.flags = tp->data_segs_out ? CCP_CF_EXISTING : 0;
	if (tp->ecn_flags & TCP_ECN_OK)
		rec.flags |= CCP_CF_ECN;
	rec.mss = tp->mss_cache;
	rec.cwnd_pkts = tp->snd_cwnd;
	rec.ssthresh = tp->snd_ssthresh;
	rec.srtt_us = tp->srtt_us >> 3;
	rec.min_rtt_us = tp->rtt_min.s[0].v;
	rec.uid = sk->sk_uid.val;
	struct ccp_prev_cc *prev = bpf_sk_storage_get(&prev_cc, sk, 0, 0);
	if (prev)
		__builtin_memcpy(rec.prev_cc, prev->name, sizeof(rec.prev_cc));
	bpf_map_update_elem(&flow_info, &f->fid, &rec, BPF_ANY);
	if (bpf_ringbuf_output(&events, &rec, sizeof(rec), wake_flags(now, false, k)))
		count(CCP_CNT_DROPS);
	else
		count(CCP_CNT_RECORDS);
}

SEC("struct_ops")
void BPF_PROG(ccp_release, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct flow *f = get_flow(sk);
	struct ccp_knobs *k = get_knobs();
	struct ccp_rec_close rec = {};
	__u64 now = bpf_ktime_get_ns();
	__u32 fid;

	if (!f || !k)
		return;
	fid = f->fid;
	hdr_init(&rec.hdr, CCP_REC_CLOSE, sizeof(rec), fid, now);
	rec.bytes_acked = tp->bytes_acked - f->life_bytes_acked;
	rec.lost = tp->lost - f->life_lost;
	if (bpf_ringbuf_output(&events, &rec, sizeof(rec), wake_flags(now, false, k)))
		count(CCP_CNT_DROPS);
	else
		count(CCP_CNT_RECORDS);
	__u32 slot = f->slot & k->ctrl_mask;
	struct ccp_ctrl *c = bpf_map_lookup_elem(&ctrl, &slot);

	if (c && c->fid == fid)
		__builtin_memset(c, 0, sizeof(*c));
	if (slot != (fid & k->ctrl_mask))
		bpf_map_delete_elem(&ctrl_slot, &fid);
	bpf_map_delete_elem(&flow_info, &fid);
	/* Whatever runs the socket next must not inherit a rate only this program maintained. */
	if (f->paced)
		unpace(sk, f);
	f->fid = 0;
	bpf_sk_storage_delete(&flows, sk);
}

/* Folded mode: report when the interval has elapsed, or at once on an urgent cause. */
static __always_inline void report_folded(struct sock *sk, struct tcp_sock *tp, struct flow *f, const struct rate_sample *rs,
					  const struct ccp_ctrl *c, __u64 now, const struct ccp_knobs *k)
{
	__u8 urgent = f->urgent;

	/* At most one loss report per smoothed RTT: a recovery episode marks losses on many ACKs. */
	if (rs->losses > 0 && urgent < CCP_URGENT_LOSS &&
	    since(now, f->last_urgent_ns) >= (__u64)(tp->srtt_us >> 3) * NSEC_PER_USEC)
		urgent = CCP_URGENT_LOSS;
	if (urgent || since(now, f->start_ns) >= report_interval_ns(tp, c, k) ||
	    (c && c->report_acked_pkts && tp->delivered - f->snap_delivered >= c->report_acked_pkts)) {
		emit_report(sk, tp, f, now, urgent, k);
		/* An unpaced agent flow's TSO sizing follows its RTT once per report. */
		if (c && !c->pacing_rate)
			stack_pacing_rate(sk, tp);
	}
}

/* Per-ACK mode: a record for every ACK; TSO sizing as in folded mode, once per interval. */
static __always_inline void report_per_ack(struct sock *sk, struct tcp_sock *tp, struct flow *f, const struct rate_sample *rs,
					   const struct ccp_ctrl *c, __u64 now, const struct ccp_knobs *k)
{
	emit_ack(sk, tp, f, rs, now, 0, k);
	if (c && !c->pacing_rate && since(now, f->start_ns) >= report_interval_ns(tp, c, k)) {
		stack_pacing_rate(sk, tp);
		f->start_ns = now;
	}
}

SEC("struct_ops")
void BPF_PROG(ccp_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct flow *f = get_flow(sk);
	struct ccp_knobs *k = get_knobs();
	const struct ccp_ctrl *c;
	__u64 now;

	if (!f || !k) {
		count(CCP_CNT_PREINIT);
		stateless_ack(sk, tp, ack, rs);
		return;
	}
	count(CCP_CNT_ACKS);
	/* The stack stamped this ACK (tcp_mstamp_refresh, CLOCK_MONOTONIC in us): no clock read. */
	now = tp->tcp_mstamp * NSEC_PER_USEC;
	/* cfg_records is a load-time constant: the verifier drops the other mode's branches. */
	if (cfg_records == CCP_RECORDS_FOLDED)
		fold(f, tp, flag, rs);
	c = live_ctrl(f, k, now);
	if (c)
		f->mode = MODE_AGENT;
	else if (f->mode == MODE_AGENT)
		enter_fallback(sk, f);

	if (cfg_records == CCP_RECORDS_PER_ACK)
		report_per_ack(sk, tp, f, rs, c, now, k);
	else
		report_folded(sk, tp, f, rs, c, now, k);

	if (c) {
		apply_ctrl(sk, tp, f, c);
		conserve_until_answer(tp, f, rs, now);
	} else {
		count(CCP_CNT_FALLBACK_ACKS);
		fallback_ack(sk, tp, f, ack, rs, now, k->fallback);
	}
}

SEC("struct_ops")
__u32 BPF_PROG(ccp_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct flow *f = get_flow(sk);
	struct ccp_knobs *k = get_knobs();

	/* The stack enters CWR, Recovery or Loss. The agent decides the window in its own mode;
	 * this value is what the stack and a later fallback start from. */
	if (!f || !k || k->fallback == CCP_FALLBACK_RENO)
		return tcp_reno_ssthresh(sk);
	return cubic_ssthresh(&f->cubic, tp->snd_cwnd);
}

SEC("struct_ops")
__u32 BPF_PROG(ccp_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct flow *f = get_flow(sk);

	/* A spurious loss: the fallback restores the window as Reno and Cubic do; the agent keeps
	 * what it commanded (it saw the loss report and decides). */
	if (f && f->mode == MODE_AGENT)
		return tp->snd_cwnd;
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(ccp_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct flow *f = get_flow(sk);
	struct ccp_knobs *k = get_knobs();
	__u8 old;

	if (!f || !k)
		return;
	old = f->ca_state;
	f->ca_state = new_state;
	if (new_state == TCP_CA_Loss) {
		/* A retransmission timeout: no ACK may come for a while, so report now. */
		__builtin_memset(&f->cubic, 0, sizeof(f->cubic));
		f->timeouts++;
		if (cfg_records == CCP_RECORDS_PER_ACK)
			emit_ack(sk, tp, f, 0, bpf_ktime_get_ns(), CCP_AF_TIMEOUT, k);
		else
			emit_report(sk, tp, f, bpf_ktime_get_ns(), CCP_URGENT_TIMEOUT, k);
		return;
	}
	if ((new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery) && old != new_state) {
		f->prr_delivered = 0;
		if (f->mode == MODE_AGENT && new_state == TCP_CA_Recovery) {
			f->hold_start_ns = tp->tcp_mstamp * NSEC_PER_USEC;
			f->hold_seq = f->ctrl_seq;
		}
		if (f->urgent < CCP_URGENT_STATE)
			f->urgent = CCP_URGENT_STATE;
		return;
	}
	/* tcp_end_cwnd_reduction() returns early under cong_control: end the reduction as it would
	 * (unless the stack undid it). */
	if (new_state == TCP_CA_Open && (old == TCP_CA_CWR || old == TCP_CA_Recovery) && f->mode == MODE_FALLBACK &&
	    tp->snd_ssthresh < TCP_INFINITE_SSTHRESH && (old == TCP_CA_CWR || tp->undo_marker))
		set_cwnd(tp, tp->snd_ssthresh);
}

SEC("struct_ops")
void BPF_PROG(ccp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct flow *f = get_flow(sk);
	struct ccp_knobs *k = get_knobs();
	const struct ccp_ctrl *c;

	if (!f || !k || ev != CA_EVENT_TX_START)
		return;
	/* Restarting after idle: start from the agent's window rather than a stale one. */
	c = live_ctrl(f, k, bpf_ktime_get_ns());
	if (c)
		apply_ctrl(sk, tp, f, c);
	else
		f->cubic.epoch_ns = 0;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ccp = {
	.init = (void *)ccp_init,
	.release = (void *)ccp_release,
	.cong_control = (void *)ccp_cong_control,
	.ssthresh = (void *)ccp_ssthresh,
	.undo_cwnd = (void *)ccp_undo_cwnd,
	.set_state = (void *)ccp_set_state,
	.cwnd_event = (void *)ccp_cwnd_event,
	.flags = 0,
	.name = "ccp",
};
