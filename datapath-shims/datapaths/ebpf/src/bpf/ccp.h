/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The contract between the BPF programs and user space: ring-buffer records, the control map
 * value, the knobs, and the attach programs' filter and listing. Every struct here has a
 * #[repr(C)] mirror in src/record.rs, src/control.rs or src/attach/ with a size assertion, so a
 * field added on one side and not the other fails the Rust build instead of corrupting data.
 *
 * All fields are naturally aligned and padded explicitly: the layout is the same for clang's
 * BPF target and for x86_64 Rust.
 */
#ifndef CCP_H
#define CCP_H

/* Bumped whenever a record layout changes; records of another version are refused by the
 * decoder (an agent restarted with a new version under flows still on an old instance). */
#define CCP_REC_VERSION 1

enum ccp_rec_kind {
	CCP_REC_CREATE = 1,
	CCP_REC_REPORT = 2,
	CCP_REC_CLOSE = 3,
	CCP_REC_ACK = 4, /* per-ACK records only: one ACK's primitives (for a libccp shim) */
};

/* What an instance sends per flow besides CREATE and CLOSE; fixed when it is loaded (its only
 * .rodata variable), so the verifier prunes the other mode's code from cong_control. */
enum ccp_records {
	CCP_RECORDS_FOLDED = 0,  /* REPORT: the fold, once per interval or per RTT, and urgent ones */
	CCP_RECORDS_PER_ACK = 1, /* ACK: one per ACK, plus one on a retransmission timeout */
};

/* Why a report was sent before its interval ended; mirrors ccp_algorithms::Urgent. The numeric
 * order is the precedence when several causes coincide. */
enum ccp_urgent {
	CCP_URGENT_NONE = 0,
	CCP_URGENT_STATE = 1,
	CCP_URGENT_LOSS = 2,
	CCP_URGENT_TIMEOUT = 3,
};

/* Report flags. */
#define CCP_RF_APP_LIMITED (1 << 0) /* the rate sample in the report was app-limited */
#define CCP_RF_FALLBACK (1 << 1)    /* the in-kernel fallback was steering the flow */
#define CCP_RF_PACED (1 << 2)       /* pacing_rate is enforced (SK_PACING_NEEDED) */
/* The window did not limit the sender over the interval: tcp_is_cwnd_limited() was false at every
 * ACK folded and when the report was written. Said in the negative so that a record of an older
 * instance, which never sets it, reads as "limited", the contract's default. */
#define CCP_RF_WINDOW_UNUSED (1 << 3)
/* extra_acked_pkts was measured: the control entry set an aggregation rate and an ACK of the
 * interval delivered data. */
#define CCP_RF_EXTRA_ACKED (1 << 4)

/* Ack flags. */
#define CCP_AF_TIMEOUT (1 << 0)  /* a retransmission timeout (sent from set_state, not for an ACK) */
#define CCP_AF_FALLBACK (1 << 1) /* the in-kernel fallback was steering the flow */

/* Create flags. */
#define CCP_CF_EXISTING (1 << 0) /* the flow had sent data before this CC took it over */
#define CCP_CF_ECN (1 << 1)      /* the connection negotiated ECN */

struct ccp_rec_hdr {
	__u8 version;
	__u8 kind;
	__u16 size; /* of the whole record, header included */
	__u32 fid;
	__u64 ts_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
};

struct ccp_rec_create {
	struct ccp_rec_hdr hdr;
	__u64 cookie;       /* socket cookie, 0 unless something generated it (attach does) */
	__u64 netns_cookie;
	__u64 cgroup_id;    /* cgroup v2 id (the cgroupfs directory's inode number) */
	__u8 saddr[16];     /* IPv4 in the first 4 bytes; network byte order */
	__u8 daddr[16];
	__u16 family;       /* AF_INET or AF_INET6 */
	__u16 sport;        /* local port, host order */
	__u16 dport;        /* remote port, host order */
	__u16 flags;        /* CCP_CF_* */
	__u32 mss;
	__u32 cwnd_pkts;
	__u32 ssthresh;
	__u32 srtt_us;
	__u32 min_rtt_us;
	__u32 uid;          /* sk_uid: the socket's owner in the initial user namespace (was padding: 0 from older instances) */
	char prev_cc[16];   /* the congestion control the flow ran before, when attach recorded it */
};

struct ccp_rec_report {
	struct ccp_rec_hdr hdr;
	__u64 start_ns;       /* start of the interval this report covers */
	__u64 acked_bytes;    /* delta of tp->bytes_acked */
	__u64 rtt_sum_us;
	__u64 pacing_rate;    /* sk_pacing_rate, bytes/s */
	__u32 acked_pkts;     /* newly delivered minus newly SACKed */
	__u32 sacked_pkts;
	__u32 lost_pkts;
	__u32 ce_pkts;
	__u32 ece_acks;
	__u32 acks;           /* ACKs folded */
	__u32 rtt_min_us;
	__u32 rtt_max_us;
	__u32 rtt_last_us;
	__u32 rtt_samples;
	__u32 rtt_over_samples; /* RTT samples above the control entry's threshold */
	__u32 srtt_us;        /* kernel srtt */
	__u32 rate_delivered; /* last valid rate sample: packets delivered ... */
	__u32 rate_snd_us;    /* ... over this send interval ... */
	__u32 rate_rcv_us;    /* ... and this ACK (receive) interval */
	__u32 inflight_pkts;
	__u32 pending_bytes;
	__u32 cwnd_pkts;
	__u32 ssthresh;
	__u32 mss;
	__u32 ctrl_seq;       /* seq of the control entry in force, 0 for none */
	__u16 timeouts;
	__u8 urgent;          /* enum ccp_urgent */
	__u8 flags;           /* CCP_RF_* */
	__u8 ca_state;
	__u8 _pad[3];
	/* tp->packets_out: sent and not cumulatively acknowledged (snd_nxt - snd_una), in flight,
	 * SACKed or lost alike. Was padding: an instance built before it writes 0 (unknown). */
	__u32 unacked_pkts;
	/* The interval's fastest valid rate sample, delivered / max(send, ACK interval) as
	 * tcp_bbr.c's max filter sees each ACK's: packets delivered over this many us (0: none).
	 * Appended: an instance built before it writes 144-byte reports, decoded without it. */
	__u32 rate_max_delivered;
	__u32 rate_max_us;
	/* ACK aggregation (tcp_bbr.c's extra_acked), the interval's largest per-ACK value, packets,
	 * against the control entry's aggregation rate; valid with CCP_RF_EXTRA_ACKED. Appended: an
	 * instance built before it writes 152-byte reports, decoded without it. */
	__u32 extra_acked_pkts;
	__u32 _pad2;
};

/*
 * One ACK, in per-ACK mode: what libccp's ccp_primitives need (ccp-kernel's mapping). The
 * differences are taken from the flow's counters when the previous record was written, so a
 * record lost to a full ring loses no acked or SACKed bytes; the rate sample, RTT, CE and loss
 * counts are this ACK's own (rs), as libccp expects.
 */
struct ccp_rec_ack {
	struct ccp_rec_hdr hdr;
	__u64 bytes_acked;        /* growth of tp->bytes_acked: newly cumulatively acked bytes */
	__u32 packets_acked;      /* newly delivered packets (rs->acked_sacked) minus newly SACKed */
	__u32 packets_misordered; /* newly SACKed: growth of tp->sacked_out */
	__u32 ce_pkts;            /* rs->delivered_ce */
	__u32 lost_pkts;          /* rs->losses: packets newly marked lost */
	__u32 rtt_us;             /* rs->rtt_us; 0: no sample */
	__u32 rate_delivered;     /* valid rate sample: packets delivered ... (0: none) */
	__u32 rate_snd_us;        /* ... over this send interval ... */
	__u32 rate_rcv_us;        /* ... and this ACK (receive) interval */
	__u32 inflight_pkts;
	__u32 pending_bytes;      /* write_seq - snd_una */
	__u32 cwnd_pkts;
	__u32 mss;
	__u8 flags;               /* CCP_AF_* */
	__u8 _pad[7];
};

struct ccp_rec_close {
	struct ccp_rec_hdr hdr;
	__u64 bytes_acked; /* over the flow's life on this CC */
	__u32 lost;
	__u32 _pad;
};

/*
 * The control map value: an array slot (fid & knobs.ctrl_mask), written by user space and
 * applied at the next ACK. An array lookup is inlined by the verifier, where a hash lookup costs
 * tens of ns on every ACK; the fid in the slot tells whose entry it is. A slot shared by two live
 * flows (fids 2^16 apart by default) leaves the older one to the fallback.
 */
struct ccp_ctrl {
	__u64 cwnd_bytes;         /* 0: leave the window alone */
	__u64 pacing_rate;        /* bytes/s; 0: unpaced */
	__u32 report_interval_us; /* 0: the knobs' default */
	__u32 report_rtts_x16;    /* non-zero: report every rtts/16 smoothed RTTs instead */
	__u32 rtt_threshold_us;   /* 0: none */
	__u32 epoch;              /* must equal knobs.epoch, or the entry is stale */
	__u32 seq;                /* echoed in reports once applied */
	__u32 fid;                /* the flow this entry is for; 0: free */
	__u32 report_acked_pkts;  /* non-zero: also report once this many packets are delivered */
	/* Non-zero: measure ACK aggregation against this delivery rate, 1000 bytes/s (was padding:
	 * an older instance ignores it). */
	__u32 aggregation_kbytes_per_s;
};

/* Fallback algorithms. */
enum ccp_fallback {
	CCP_FALLBACK_CUBIC = 0,
	CCP_FALLBACK_RENO = 1,
};

/* Written by user space (one entry of an array map), read on every ACK. */
struct ccp_knobs {
	__u64 heartbeat_ns;        /* the agent's last sign of life, CLOCK_MONOTONIC */
	__u64 silence_timeout_ns;  /* longer silence hands every flow to the fallback */
	__u64 default_interval_ns; /* report interval without a control entry */
	__u64 min_interval_ns;     /* floor of per-RTT report intervals */
	__u64 wake_gap_ns;         /* ordinary records wake the consumer at most this often */
	__u32 epoch;               /* the agent instance; control entries of others are stale */
	__u32 fallback;            /* enum ccp_fallback */
	__u32 default_rtts_x16;    /* non-zero: without a control entry, report per RTT */
	__u32 ctrl_mask;           /* control slots - 1 (a power of two) */
};

/* Written by the BPF programs only (one entry of an array map, shared across instances). */
struct ccp_shared {
	__u64 last_wake_ns;
	__u32 next_fid;
	__u32 _pad;
};

/* Per-CPU counters, indexes into a per-CPU array of u64. */
enum ccp_counter {
	CCP_CNT_ACKS = 0,       /* cong_control calls with state */
	CCP_CNT_PREINIT,        /* cong_control calls without state (before init, or no storage): stateless Reno */
	CCP_CNT_RECORDS,        /* records submitted */
	CCP_CNT_DROPS,          /* records lost to a full ring */
	CCP_CNT_WAKEUPS,        /* records submitted with a forced wakeup */
	CCP_CNT_FALLBACK_ACKS,  /* ACKs steered by the fallback */
	CCP_CNT_NO_STORAGE,     /* init could not get per-flow storage */
	CCP_CNT_MAX,
};

/* --- attach programs --------------------------------------------------------------------- */

/* A flow's addresses as the attach programs see them. */
struct ccp_flow_id {
	__u8 saddr[16]; /* IPv4 in the first 4 bytes; network byte order */
	__u8 daddr[16];
	__u16 family;
	__u16 sport; /* local port, host order */
	__u16 dport; /* remote port, host order */
	__u16 _pad;
};

/* What the iter/tcp switcher does to the sockets its filter selects. */
enum ccp_switch_action {
	CCP_SWITCH_ATTACH = 1,  /* record the current CC, switch to ours */
	CCP_SWITCH_RESTORE = 2, /* sockets on ours: back to the recorded CC, or restore_default */
};

/* One socket the switcher acted on (written to the iterator's seq file). */
struct ccp_switch_result {
	__u64 cookie;
	struct ccp_flow_id id;
	__s32 err; /* of bpf_setsockopt */
	__u8 state;
	__u8 _pad[3];
	char from[16];
	char to[16];
};

/* The congestion control a flow ran before attach switched it (socket storage shared by every
 * program; detach restores it). */
struct ccp_prev_cc {
	char name[16];
};

#define CCP_FILTER_PORTS 8
#define CCP_FILTER_NETS 4

struct ccp_net {
	__u32 family; /* 0: unused slot */
	__u32 prefix_len;
	__u8 addr[16];
};

/* The attach programs' flow filter (their .rodata), encoded by attach::Filter, which documents
 * the semantics. */
struct ccp_filter {
	__u32 all;
	__u32 nports;
	__u16 ports[CCP_FILTER_PORTS];
	__u32 nnets;
	struct ccp_net nets[CCP_FILTER_NETS];
};

/* An attach program instance's settings (its whole .rodata). */
struct ccp_attach_cfg {
	struct ccp_filter filter;
	char cc_name[16];         /* our congestion control */
	char restore_default[16]; /* where restore sends a socket whose previous CC is unknown or gone */
	__u32 action;             /* enum ccp_switch_action, for switch_cc */
};

/* The Rust mirrors assert the same sizes. */
_Static_assert(sizeof(struct ccp_rec_hdr) == 16, "ccp_rec_hdr");
_Static_assert(sizeof(struct ccp_rec_create) == 120, "ccp_rec_create");
_Static_assert(sizeof(struct ccp_rec_report) == 160, "ccp_rec_report");
_Static_assert(sizeof(struct ccp_rec_close) == 32, "ccp_rec_close");
_Static_assert(sizeof(struct ccp_rec_ack) == 80, "ccp_rec_ack");
_Static_assert(sizeof(struct ccp_ctrl) == 48, "ccp_ctrl");
_Static_assert(sizeof(struct ccp_knobs) == 56, "ccp_knobs");
_Static_assert(sizeof(struct ccp_flow_id) == 40, "ccp_flow_id");
_Static_assert(sizeof(struct ccp_switch_result) == 88, "ccp_switch_result");
_Static_assert(sizeof(struct ccp_filter) == 124, "ccp_filter");
_Static_assert(sizeof(struct ccp_attach_cfg) == 160, "ccp_attach_cfg");

#endif
