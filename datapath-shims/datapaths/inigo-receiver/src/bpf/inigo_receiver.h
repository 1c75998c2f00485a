/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * What the receiver's BPF programs share with user space (src/layout.rs mirrors every struct
 * here; both sides assert the sizes). Integers are host order; addresses and ports in keys are
 * network order, as they are on the wire.
 */
#ifndef INIGO_RECEIVER_H
#define INIGO_RECEIVER_H

/* settings.magic: user space writes it last; until then every packet passes untouched. */
#define INIGO_MAGIC 0x494e4731u /* "ING1" */
/* Bumped whenever a struct below, or what one of its fields or flags means, changes: an instance
 * pinned by another layout is refused (its programs would misread the settings). */
#define INIGO_LAYOUT 3

enum inigo_mode {
	INIGO_MODE_MARK = 0,   /* set CE on late ECN-capable data segments (spec §4.4) */
	INIGO_MODE_WINDOW = 1, /* cap the advertised window of outgoing ACKs (spec §4.3) */
};

enum inigo_rfd_source {
	INIGO_RFD_ARRIVAL = 0, /* R = local arrival-time deltas (spec A-2, default) */
	INIGO_RFD_TSECR = 1,   /* R = TSecr deltas, as the published patch [R] */
};

#define INIGO_F_CLEAR_CE (1u << 0)  /* marking mode: clear CE on segments that are not late ([R]) */
#define INIGO_F_RTT_CREEP (1u << 1) /* RTT_min += 1 µs per segment whose sample exceeds it ([R]) */
#define INIGO_F_SS_HOLD (1u << 2)   /* receiver slow-start exit without halving ([R4.2]) */
#define INIGO_F_RTT_X8 (1u << 3)    /* RTT_min from rcv_rtt_est unshifted (x8), as the patch ([R], A-3) */
#define INIGO_F_NO_TICK_SLACK (1u << 4) /* late above RTT_min · pct / 100 alone: the spec's rule, no tick slack */
#define INIGO_F_CUT_SSTHRESH (1u << 5)  /* window mode: an alpha cut also sets the receiver's ssthresh (ours) */

/* The one entry of the `settings` array. */
struct inigo_settings {
	__u32 magic;
	__u32 layout;
	__u32 mode;          /* enum inigo_mode */
	__u32 rfd_source;    /* enum inigo_rfd_source */
	__u32 threshold_pct; /* late when D_total > RTT_min · pct / 100 (+ one tick: tick slack) */
	__u32 fairness;      /* window mode: sub-window of fairness · MSS bytes; 0 = whole window */
	__u32 flags;         /* INIGO_F_* */
	__u32 ts_tick_us;    /* µs per TSval tick when the connection has no µs timestamps */
	__u32 rebase;        /* window mode: rcv_cwnd · rebase/1024 when D_total < 0; 0 = off ([R]) */
	__u32 l2_len;        /* bytes before the IP header on this device (14 Ethernet, 0 TUN) */
	/* Bookkeeping for user space; the programs do not read these. */
	__u32 ifindex;
	__u32 max_conns;
	__u64 netns_dev;
	__u64 netns_ino;
	/* Bumped on every change of settings: connection state of an older generation restarts. */
	__u64 generation;
};

/* A connection, from the receiving host's side. IPv4 addresses use the first word only. */
struct inigo_key {
	__u32 local[4];
	__u32 remote[4];
	__u16 lport;
	__u16 rport;
	__u16 family; /* 4 or 6 */
	__u16 pad;
};

#define INIGO_C_HAVE_REF (1u << 0) /* reference timestamps saved (T-R1 done) */
#define INIGO_C_USEC_TS (1u << 1)  /* the connection uses µs TCP timestamps */

/* Per-connection state (the LRU `conns` map). Byte windows are bytes; times are µs unless named. */
struct inigo_conn {
	__u64 generation;     /* settings generation this state belongs to */
	__u64 ref_arrival_ns; /* arrival time of the reference segment (ArrivalTime) */
	__s64 rfd_total_us;   /* D_total, clamped at 0 */
	__u64 bytes_total;    /* bytes judged since the last α update */
	__u64 bytes_late;     /* ... of which late */
	__u64 segs_late;      /* late segments over the connection's life */
	__u32 ref_tsval;      /* TSval of the reference segment */
	__u32 ref_tsecr;      /* TSecr of the reference segment (TsecrLiteral) */
	__u32 rtt_min_us;     /* the receiver's RTT_min */
	__u32 rtt_raw;        /* the last tcp_sock.rcv_rtt_est.rtt_us read (the kernel keeps it ×8) */
	__u32 thresh_us;      /* the last threshold used, tick slack included */
	__u32 alpha;          /* α_RFD, 0..1024 */
	__u32 rcv_cwnd;       /* window mode: the window cap, bytes; 0 = unset */
	__u32 rcv_ssthresh;   /* window mode: the receiver's own ssthresh; ~0 = infinity */
	__u32 tick_us;        /* µs per TSval tick for this connection */
	__u16 advmss;
	__u8 wscale;          /* the receive window scale (the shift of windows we advertise) */
	__u8 flags;           /* INIGO_C_* */
	__u32 busy;           /* try-lock: one CPU updates a connection at a time (kept last) */
	__u32 pad;
};

/* Indexes of the per-CPU `counters` array. */
enum inigo_counter {
	/* ingress: arriving segments */
	IC_IN_PACKETS = 0,     /* every packet the ingress program saw */
	IC_IN_TCP,             /* TCP segments (IPv4 or IPv6 without extension headers, unfragmented) */
	IC_IN_DATA,            /* ... carrying payload (the RFD looks at these only) */
	IC_IN_TS,              /* data segments with the Timestamps option */
	IC_IN_NO_TS,           /* data segments without it: passed untouched */
	IC_IN_NON_ECN,         /* marking mode: Not-ECT data segments, passed untouched */
	IC_IN_NO_SOCK,         /* no full TCP socket for the 4-tuple: passed untouched */
	IC_IN_INIT,            /* references saved, nothing judged: a first segment, or no RTT estimate yet (T-R1) */
	IC_IN_ZERO_DELTA,      /* the timestamps did not advance: no RFD sample (T-R2) */
	IC_IN_LATE,            /* judged late: D_total > threshold */
	IC_IN_CE_SET,          /* marking mode: CE set */
	IC_IN_CE_ALREADY,      /* marking mode: late and already CE (a switch's mark), left as is */
	IC_IN_CE_CLEARED,      /* marking mode with clear_ce: CE cleared on a segment that was not late */
	IC_IN_SS_EXIT,         /* window mode: receiver slow-start exits */
	IC_IN_WINDOW_UPDATES,  /* window mode: α and window updates (the patch ACKed at once here) */
	IC_IN_BUSY,            /* another CPU was updating the connection: passed untouched */
	/* egress: outgoing segments */
	IC_OUT_PACKETS,        /* every packet the egress program saw (window mode only) */
	IC_OUT_TCP,            /* TCP segments */
	IC_OUT_ACKS,           /* ACKs of connections with receiver state */
	IC_OUT_CAPPED,         /* ... whose advertised window was lowered to rcv_cwnd */
	IC_OUT_NO_STATE,       /* ACKs of connections the receiver has no state for */
	IC_MAX,
};

/*
 * Test hooks (BPF_PROG_TEST_RUN only): honoured only when the object is loaded with the
 * read-only `test_hooks_enabled` set, which the enable path never does (the verifier then
 * removes the hook branches). They replace the clock and the socket lookup.
 */
struct inigo_test_hooks {
	__u64 now_ns;      /* the arrival clock */
	__u32 sock;        /* 0: behave as if no socket matched */
	__u32 rtt_raw;     /* what tcp_sock.rcv_rtt_est.rtt_us would hold (×8 scaled) */
	__u32 rcv_wnd;     /* tcp_sock.rcv_wnd */
	__u16 advmss;      /* tcp_sock.advmss */
	__u8 wscale;       /* tcp_sock.rx_opt.rcv_wscale */
	__u8 usec_ts;      /* tcp_sock.tcp_usec_ts */
};

#endif
