/*
 * bfc_tna.p4 -- BFC (Backpressure Flow Control) switch pipeline for Tofino2 (TNA, t2na.p4), the
 * target of the BFC paper. Spec: specs/bfc.md §5 (dynamic queue assignment), §6 (pause counters,
 * pause threshold, control frames), §9 (Tofino2 constraints), §10 (deadlock allow-table), §12.1;
 * thesis Chapter 3, §3.3.3 and §3.4.
 *
 * NOT COMPILED OR RUN: there is no bf-p4c (Intel P4 Studio / open-source bf-p4c) on the machine
 * this was written on, and the intrinsic-metadata details below (ghost thread, advanced flow
 * control word layout, pktgen header) follow public t2na examples without having been checked by
 * the compiler. The executable reference is the Rust model p4-bfc/model (crate ccp-bfc-model);
 * a test there parses this file's declarations and checks names and sizes against the model.
 *
 * Layout (§9): the flow table (three register arrays in successive stages) and the pause
 * counters live in the ingress pipeline. Dequeue bookkeeping needs egress -> ingress
 * communication: egress mirrors a small deq_mirror_h to a recirculation port of the same pipe
 * (mirror session NUM_PORTS + 1), and the ingress runs the decrements there. Recirculation is
 * capped at ~12% of switch capacity, fine for average packets above ~500 B (§9; sampling, App. E,
 * is not implemented here). The ghost thread copies every queue's depth from the traffic manager
 * into queue_depth (in 176-byte cells, so the controller installs th_table in cells, §16.2) and
 * keeps nonempty_q. The TM queue mapping must make the ghost qid equal to local_port * 32 + q.
 * Queue pause/resume is Tofino2 advanced flow control (AFC), one queue per packet.
 *
 * Mirror sessions 1..NUM_PORTS send to the device port whose local index is session-1, on queue
 * CONTROL_QID (strict priority): they carry PAUSE/RESUME frames back to the upstream device.
 * The packet generator runs a periodic timer app every BITMAP_PERIOD_NS emitting one packet per
 * (port, word): batch_id = target device port, packet_id = word index.
 * All ports are assumed to be in one pipe (NUM_PORTS = 32 x 100G); a 4-pipe switch replicates the
 * registers per pipe, which is what §9's per-pipeline split of the flow table describes.
 */
#include <core.p4>
#include <t2na.p4>

/* ---- Constants: the same names, widths and values as ccp-bfc-model (checked by
 * p4-bfc/model/tests/p4_consistency.rs). Sizes per specs/bfc.md §4 and §9: one pipeline of
 * 32 x 100G ports, 32 queues per port (Tofino2) with one reserved for control frames, a flow
 * table of 100 entries per queue (25 x 4096 per Tofino2 pipe), and 2 us hop RTT. ---- */
const bit<32> NUM_PORTS = 32;
const bit<32> QUEUES_PER_PORT = 32;
const bit<32> CONTROL_QID = 31;
const bit<32> DATA_QUEUES_PER_PORT = 31;
const bit<32> QUEUE_COUNT = NUM_PORTS * QUEUES_PER_PORT;
const bit<32> FLOW_TABLE_PER_PORT = 100 * QUEUES_PER_PORT;
const bit<32> FLOW_TABLE_SIZE = NUM_PORTS * FLOW_TABLE_PER_PORT;
const bit<32> UPSTREAM_Q_SLOTS = 128;
const bit<32> PAUSE_COUNTER_SIZE = NUM_PORTS * UPSTREAM_Q_SLOTS;
const bit<32> BITMAP_WORD_BITS = 32;
const bit<32> BITMAP_WORDS_PER_PORT = UPSTREAM_Q_SLOTS / BITMAP_WORD_BITS;
const bit<32> PAUSE_BITMAP_SIZE = NUM_PORTS * BITMAP_WORDS_PER_PORT;
const bit<32> TH_TABLE_SIZE = NUM_PORTS * QUEUES_PER_PORT;
const bit<32> ALLOW_BP_TABLE_SIZE = NUM_PORTS * NUM_PORTS;
const bit<32> FORWARD_TABLE_SIZE = 1024;
const bit<32> HRTT_NS = 2000;
const bit<32> STICKY_NS = 2 * HRTT_NS;
const bit<32> BITMAP_PERIOD_NS = 1000;
const bit<16> BFC_ETHERTYPE = 0x88B5;
const bit<16> BFC_CTRL_ETHERTYPE = 0x88B6;
const bit<8> CTRL_PAUSE = 1;
const bit<8> CTRL_RESUME = 2;
const bit<8> CTRL_BITMAP = 3;
const bit<8> CTRL_BITMAP_RECIRC = 4;

/* ---- Headers ---- */
header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

/* Carried by every data packet (Ethernet type BFC_ETHERTYPE): the queue the packet left at the
 * previous hop (switch queue or NIC queue, §6.1). */
header bfc_h {
    bit<16> upstream_q;
    bit<16> ether_type;
}

/* Hop-by-hop control frame (Ethernet type BFC_CTRL_ETHERTYPE) to the upstream neighbour: PAUSE or
 * RESUME of one upstream queue, or one word of the periodic pause bitmap (§6.3). Pause state is a
 * level, so applying a frame twice changes nothing. */
header bfc_ctrl_h {
    bit<8> op;
    bit<8> word_index;
    bit<16> upstream_q;
    bit<32> bitmap;
}

header ipv4_h {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header l4_ports_h {
    bit<16> src_port;
    bit<16> dst_port;
}

/* Carried from enqueue to dequeue (§12.1). */
struct bfc_meta_t {
    bit<32> flow_idx;
    bit<8> qid;
    bit<16> upstream_q_in;
    bit<1> counter_incr;
    bit<8> ingress_port;
    bit<8> egress_port;
    bit<32> len_bytes;
}

/* Egress -> ingress dequeue record (mirrored, then recirculated), and the ingress -> egress
 * mirror that becomes a control frame. */
header deq_mirror_h {
    bit<8> kind;          // 1 = dequeue record, 2 = control frame to emit
    bit<8> ctrl_op;
    bit<16> ctrl_q;
    bit<32> flow_idx;
    bit<8> qid;
    bit<16> upstream_q_in;
    bit<7> pad;
    bit<1> counter_incr;
    bit<8> ingress_port;
    bit<8> egress_port;
    bit<16> ingress_dev_port;
    bit<32> len_bytes;
}

/* Ingress -> egress bridged metadata for data packets. */
header bridge_h {
    bit<32> flow_idx;
    bit<8> qid;
    bit<16> upstream_q_in;
    bit<7> pad;
    bit<1> counter_incr;
    bit<8> ingress_port;
    bit<8> egress_port;
    bit<16> ingress_dev_port;
    bit<32> len_bytes;
}

struct headers_t {
    bridge_h bridge;
    deq_mirror_h deq;
    pktgen_timer_header_t timer;
    ethernet_h ethernet;
    bfc_ctrl_h ctrl;
    bfc_h bfc;
    ipv4_h ipv4;
    l4_ports_h l4;
}

struct ig_meta_t {
    bfc_meta_t bfc;
    bit<8> mirror_kind;
    bit<8> ctrl_op;
    bit<16> ctrl_q;
    MirrorId_t session;
}

struct eg_meta_t {
    bfc_meta_t bfc;
    MirrorId_t session;
    bit<8> mirror_kind;
}

/* ---- Registers: per pipe. ---- */
Register<bit<8>, bit<32>>(FLOW_TABLE_SIZE, 0) flow_q;            // qAssignment
Register<bit<16>, bit<32>>(FLOW_TABLE_SIZE, 0) flow_size;        // packets of the entry in the switch
Register<bit<32>, bit<32>>(FLOW_TABLE_SIZE, 0) flow_ts;          // last enqueue/dequeue, ns | 1
Register<bit<16>, bit<32>>(PAUSE_COUNTER_SIZE, 0) pause_counter; // (ingress port, upstreamQ slot)
Register<bit<32>, bit<32>>(PAUSE_BITMAP_SIZE, 0) pause_bitmap;   // bit set iff its counter > 0
Register<bit<32>, bit<32>>(QUEUE_COUNT, 0) queue_depth;          // cells, from the ghost thread
Register<bit<32>, bit<32>>(NUM_PORTS, 0) nonempty_q;             // per port: queue q holds data
Register<bit<32>, bit<32>>(NUM_PORTS, 0) paused_q;               // per port: downstream paused q

parser IngressParser(packet_in pkt, out headers_t hdr, out ig_meta_t meta, out ingress_intrinsic_metadata_t ig_intr_md) {
    /* Ports that carry dequeue records back (recirculation) and packet-generator ports. */
    ParserValueSet<PortId_t>(4) recirc_ports;
    ParserValueSet<PortId_t>(4) pktgen_ports;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            recirc_ports: parse_deq;
            pktgen_ports: parse_timer;
            default: parse_ethernet;
        }
    }
    state parse_deq {
        pkt.extract(hdr.deq);
        transition accept;
    }
    state parse_timer {
        pkt.extract(hdr.timer);
        transition accept;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            BFC_ETHERTYPE: parse_bfc;
            BFC_CTRL_ETHERTYPE: parse_ctrl;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_bfc {
        pkt.extract(hdr.bfc);
        transition select(hdr.bfc.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ctrl {
        pkt.extract(hdr.ctrl);
        transition accept;
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            6: parse_l4;
            17: parse_l4;
            default: accept;
        }
    }
    state parse_l4 {
        pkt.extract(hdr.l4);
        transition accept;
    }
}

control Ingress(inout headers_t hdr, inout ig_meta_t meta,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md,
                in ghost_intrinsic_metadata_t gmd) {
    bit<32> now_ns;
    bit<16> lookup_port;
    bit<8> local;
    bit<32> flow_base;
    bit<16> flow_hash;
    bit<32> n_active;
    bit<32> th;
    bit<8> first_free;
    bit<32> lowest;
    bool bp_allowed;
    bool reassign;
    bit<16> old_size;
    bit<32> old_ts;
    bit<8> start;

    Hash<bit<16>>(HashAlgorithm_t.CRC16) flow_hasher;
    Random<bit<8>>() rng;

    action drop() {
        ig_dprsr_md.drop_ctl = 1;
    }
    /* Routing is outside BFC; the action also returns the egress's local index and the base of
     * its flow-table slice (local * FLOW_TABLE_PER_PORT, precomputed: no multiply at line rate). */
    action set_egress(PortId_t port, bit<8> egress_local, bit<32> base) {
        ig_tm_md.ucast_egress_port = port;
        meta.bfc.egress_port = egress_local;
        flow_base = base;
    }
    table ipv4_forward {
        key = { hdr.ipv4.dst_addr : lpm; }
        actions = { set_egress; drop; }
        size = FORWARD_TABLE_SIZE;
        default_action = drop();
    }

    action set_local(bit<8> l) {
        local = l;
    }
    table port_index {
        key = { lookup_port : exact; }
        actions = { set_local; }
        size = NUM_PORTS;
        default_action = set_local(255);
    }

    action set_th(bit<32> th_cells) {
        th = th_cells;
    }
    action no_th() {
        th = 0xFFFFFFFF;
    }
    table th_table {
        key = {
            meta.bfc.egress_port : exact;
            n_active : exact;
        }
        actions = { set_th; no_th; }
        size = TH_TABLE_SIZE;
        default_action = no_th();
    }

    action deny_bp() {
        bp_allowed = false;
    }
    action allow_bp() {
        bp_allowed = true;
    }
    table allow_bp_table {
        key = {
            meta.bfc.ingress_port : exact;
            meta.bfc.egress_port : exact;
        }
        actions = { deny_bp; allow_bp; }
        size = ALLOW_BP_TABLE_SIZE;
        default_action = allow_bp();
    }

    action set_first_free(bit<8> i) {
        first_free = i;
    }
    table first_free_queue {
        key = { lowest : exact; }
        actions = { set_first_free; }
        size = QUEUES_PER_PORT;
        default_action = set_first_free(0);
        const entries = {
            32w0x1 : set_first_free(0);
            32w0x2 : set_first_free(1);
            32w0x4 : set_first_free(2);
            32w0x8 : set_first_free(3);
            32w0x10 : set_first_free(4);
            32w0x20 : set_first_free(5);
            32w0x40 : set_first_free(6);
            32w0x80 : set_first_free(7);
            32w0x100 : set_first_free(8);
            32w0x200 : set_first_free(9);
            32w0x400 : set_first_free(10);
            32w0x800 : set_first_free(11);
            32w0x1000 : set_first_free(12);
            32w0x2000 : set_first_free(13);
            32w0x4000 : set_first_free(14);
            32w0x8000 : set_first_free(15);
            32w0x10000 : set_first_free(16);
            32w0x20000 : set_first_free(17);
            32w0x40000 : set_first_free(18);
            32w0x80000 : set_first_free(19);
            32w0x100000 : set_first_free(20);
            32w0x200000 : set_first_free(21);
            32w0x400000 : set_first_free(22);
            32w0x800000 : set_first_free(23);
            32w0x1000000 : set_first_free(24);
            32w0x2000000 : set_first_free(25);
            32w0x4000000 : set_first_free(26);
            32w0x8000000 : set_first_free(27);
            32w0x10000000 : set_first_free(28);
            32w0x20000000 : set_first_free(29);
            32w0x40000000 : set_first_free(30);
            32w0x80000000 : set_first_free(31);
        }
    }

    /* ---- Flow table: three arrays, one stage each (§9). ---- */
    RegisterAction<bit<16>, bit<32>, bit<16>>(flow_size) size_inc = {
        void apply(inout bit<16> v, out bit<16> old) {
            old = v;
            v = v |+| 1;
        }
    };
    RegisterAction<bit<16>, bit<32>, bit<16>>(flow_size) size_dec = {
        void apply(inout bit<16> v) {
            v = v |-| 1;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(flow_ts) ts_swap = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            v = now_ns | 1;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(flow_q) q_read = {
        void apply(inout bit<8> v, out bit<8> q) {
            q = v;
        }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(flow_q) q_write = {
        void apply(inout bit<8> v, out bit<8> q) {
            v = meta.bfc.qid;
            q = v;
        }
    };

    /* ---- Pause counters and the bitmap derived from them (§6.2, §6.3). ---- */
    RegisterAction<bit<16>, bit<32>, bit<16>>(pause_counter) counter_inc = {
        void apply(inout bit<16> v, out bit<16> now_v) {
            v = v |+| 1;
            now_v = v;
        }
    };
    RegisterAction<bit<16>, bit<32>, bit<16>>(pause_counter) counter_dec = {
        void apply(inout bit<16> v, out bit<16> now_v) {
            v = v |-| 1;
            now_v = v;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(pause_bitmap) bitmap_set = {
        void apply(inout bit<32> v) {
            v = v | lowest;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(pause_bitmap) bitmap_clear = {
        void apply(inout bit<32> v) {
            v = v & ~lowest;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(pause_bitmap) bitmap_read = {
        void apply(inout bit<32> v, out bit<32> r) {
            r = v;
        }
    };

    RegisterAction<bit<32>, bit<32>, bit<32>>(queue_depth) depth_read = {
        void apply(inout bit<32> v, out bit<32> r) {
            r = v;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(nonempty_q) nonempty_read = {
        void apply(inout bit<32> v, out bit<32> r) {
            r = v;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(paused_q) paused_read = {
        void apply(inout bit<32> v, out bit<32> r) {
            r = v;
        }
    };
    /* Control frames set the level (idempotent); the old value comes back to find what changed. */
    RegisterAction<bit<32>, bit<32>, bit<32>>(paused_q) paused_set = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            v = v | lowest;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(paused_q) paused_clear = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            v = v & ~lowest;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(paused_q) paused_level = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            v = hdr.ctrl.bitmap;
        }
    };

    /* AFC word: qfc (1 = pause) | port | qid | credit, per public t2na examples. */
    action afc(bit<1> pause, bit<7> q) {
        ig_dprsr_md.adv_flow_ctl = pause ++ (bit<9>)ig_intr_md.ingress_port ++ q ++ 15w0;
    }

    action emit_ctrl(bit<8> op, bit<16> q, bit<8> port_local) {
        meta.mirror_kind = 2;
        meta.ctrl_op = op;
        meta.ctrl_q = q;
        meta.session = (MirrorId_t)port_local + 1;
        ig_dprsr_md.mirror_type = 1;
    }

    apply {
        now_ns = (bit<32>)ig_prsr_md.global_tstamp;
        if (hdr.deq.isValid()) {
            lookup_port = hdr.deq.ingress_dev_port;
        } else if (hdr.timer.isValid()) {
            lookup_port = (bit<16>)hdr.timer.batch_id;
        } else {
            lookup_port = (bit<16>)ig_intr_md.ingress_port;
        }
        port_index.apply();

        if (hdr.deq.isValid()) {
            /* ---- Dequeue bookkeeping (recirculated from egress, §9). ---- */
            size_dec.execute(hdr.deq.flow_idx);
            ts_swap.execute(hdr.deq.flow_idx);
            if (hdr.deq.counter_incr == 1) {
                bit<32> pi = (bit<32>)hdr.deq.ingress_port * UPSTREAM_Q_SLOTS
                           + ((bit<32>)hdr.deq.upstream_q_in & (UPSTREAM_Q_SLOTS - 1));
                lowest = (bit<32>)1 << (bit<8>)(pi & 31);
                bit<16> c = counter_dec.execute(pi);
                if (c == 0) {
                    bitmap_clear.execute(pi >> 5);
                    /* Resume on 1 -> 0: this record becomes the RESUME frame. */
                    /* The mirror session truncates the copy, so little rides behind the frame. */
                    hdr.deq.setInvalid();
                    hdr.ethernet.setValid();
                    hdr.ethernet.ether_type = BFC_CTRL_ETHERTYPE;
                    hdr.ctrl.setValid();
                    hdr.ctrl.op = CTRL_RESUME;
                    hdr.ctrl.word_index = 0;
                    hdr.ctrl.upstream_q = (bit<16>)(pi & (UPSTREAM_Q_SLOTS - 1));
                    hdr.ctrl.bitmap = 0;
                    ig_tm_md.ucast_egress_port = (PortId_t)hdr.deq.ingress_dev_port;
                    ig_tm_md.qid = (QueueId_t)CONTROL_QID;
                    ig_tm_md.bypass_egress = 1;
                    return;
                }
            }
            drop();
            return;
        }

        if (hdr.timer.isValid()) {
            /* ---- Periodic pause bitmap (§6.3): one word per timer packet. ---- */
            bit<32> w = (bit<32>)local * BITMAP_WORDS_PER_PORT + ((bit<32>)hdr.timer.packet_id & (BITMAP_WORDS_PER_PORT - 1));
            bit<32> word = bitmap_read.execute(w);
            hdr.timer.setInvalid();
            hdr.ethernet.setValid();
            hdr.ethernet.ether_type = BFC_CTRL_ETHERTYPE;
            hdr.ctrl.setValid();
            hdr.ctrl.op = CTRL_BITMAP;
            hdr.ctrl.word_index = (bit<8>)w & (bit<8>)(BITMAP_WORDS_PER_PORT - 1);
            hdr.ctrl.upstream_q = 0;
            hdr.ctrl.bitmap = word;
            ig_tm_md.ucast_egress_port = (PortId_t)lookup_port;
            ig_tm_md.qid = (QueueId_t)CONTROL_QID;
            ig_tm_md.bypass_egress = 1;
            return;
        }

        if (hdr.ctrl.isValid()) {
            /* ---- Control frame from the downstream neighbour on this port: set the level of
             * our queue(s) toward it, and pause/resume the TM queue with AFC. ---- */
            bit<32> old;
            bit<32> new_level;
            if (hdr.ctrl.op == CTRL_PAUSE && (bit<32>)hdr.ctrl.upstream_q < QUEUES_PER_PORT) {
                lowest = (bit<32>)1 << (bit<8>)hdr.ctrl.upstream_q;
                paused_set.execute((bit<32>)local);
                afc(1, (bit<7>)hdr.ctrl.upstream_q);
                drop();
            } else if (hdr.ctrl.op == CTRL_RESUME && (bit<32>)hdr.ctrl.upstream_q < QUEUES_PER_PORT) {
                lowest = (bit<32>)1 << (bit<8>)hdr.ctrl.upstream_q;
                paused_clear.execute((bit<32>)local);
                afc(0, (bit<7>)hdr.ctrl.upstream_q);
                drop();
            } else if (hdr.ctrl.op == CTRL_BITMAP && hdr.ctrl.word_index == 0) {
                /* Write the level; if it changed (a frame was lost), replay the change one queue
                 * per pass through the recirculation port, since AFC acts on one queue per packet.
                 * The cursor rides in upstream_q, the changed bits in bitmap. */
                old = paused_level.execute((bit<32>)local);
                new_level = hdr.ctrl.bitmap;
                hdr.ctrl.bitmap = old ^ new_level;
                if (hdr.ctrl.bitmap == 0) {
                    drop();
                } else {
                    hdr.ctrl.op = CTRL_BITMAP_RECIRC;
                    hdr.ctrl.upstream_q = 0;
                    hdr.ctrl.word_index = (bit<8>)local;
                    ig_tm_md.ucast_egress_port = (PortId_t)ig_intr_md.ingress_port;  // loopback-configured
                    ig_tm_md.bypass_egress = 1;
                }
            } else if (hdr.ctrl.op == CTRL_BITMAP_RECIRC) {
                bit<32> cur = (bit<32>)1 << (bit<8>)hdr.ctrl.upstream_q;
                lowest = cur;
                bit<32> level = paused_read.execute((bit<32>)hdr.ctrl.word_index);
                if ((hdr.ctrl.bitmap & cur) != 0) {
                    afc((bit<1>)((level >> (bit<8>)hdr.ctrl.upstream_q) & 1), (bit<7>)hdr.ctrl.upstream_q);
                }
                hdr.ctrl.bitmap = hdr.ctrl.bitmap & ~cur;
                hdr.ctrl.upstream_q = hdr.ctrl.upstream_q + 1;
                if (hdr.ctrl.bitmap == 0) {
                    drop();
                }
            } else {
                drop();
            }
            return;
        }

        if (!hdr.ipv4.isValid() || local == 255) {
            drop();
            return;
        }
        ipv4_forward.apply();
        if (!hdr.bfc.isValid()) {
            hdr.bfc.setValid();
            hdr.bfc.upstream_q = 0;
            hdr.bfc.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = BFC_ETHERTYPE;
        }
        meta.bfc.ingress_port = local;
        meta.bfc.upstream_q_in = hdr.bfc.upstream_q;
        meta.bfc.len_bytes = (bit<32>)hdr.ipv4.total_len + 18;

        /* ---- §5 dynamic queue assignment. ---- */
        flow_hash = flow_hasher.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                                      hdr.l4.src_port, hdr.l4.dst_port });
        /* (hash * 3200) >> 16 as shifts and adds: 3200 = 2048 + 1024 + 128. */
        bit<32> h = (bit<32>)flow_hash;
        meta.bfc.flow_idx = flow_base + (((h << 11) + (h << 10) + (h << 7)) >> 16);
        old_size = size_inc.execute(meta.bfc.flow_idx);
        old_ts = ts_swap.execute(meta.bfc.flow_idx);
        reassign = old_size == 0 && (old_ts == 0 || now_ns - old_ts > STICKY_NS);

        bit<32> eg = (bit<32>)meta.bfc.egress_port;
        bit<32> nonempty = nonempty_read.execute(eg);
        bit<32> paused = paused_read.execute(eg);
        bit<32> data_mask = ((bit<32>)1 << DATA_QUEUES_PER_PORT) - 1;
        if (reassign) {
            bit<32> cand = ~nonempty & ~paused & data_mask;
            start = rng.get() & 31;
            if (start >= (bit<8>)DATA_QUEUES_PER_PORT) {
                start = start - (bit<8>)DATA_QUEUES_PER_PORT;
            }
            if (cand != 0) {
                /* Rotate by start: a funnel shift of cand ++ cand. */
                bit<64> dbl = cand ++ cand;
                bit<32> rot = (dbl >> start)[31:0];
                lowest = rot & (~rot + 1);
                first_free_queue.apply();
                meta.bfc.qid = (first_free + start) & 31;
            } else {
                meta.bfc.qid = start;
            }
            q_write.execute(meta.bfc.flow_idx);
        } else {
            meta.bfc.qid = q_read.execute(meta.bfc.flow_idx);
        }
        ig_tm_md.qid = (QueueId_t)meta.bfc.qid;

        /* ---- §6.2/§6.4: N_active (SWAR popcount), Th lookup, pause counter. ---- */
        bit<32> qi = eg * QUEUES_PER_PORT + (bit<32>)meta.bfc.qid;
        bit<32> depth_before = depth_read.execute(qi);
        bit<32> x = (nonempty | ((bit<32>)1 << meta.bfc.qid)) & ~paused & data_mask;
        x = x - ((x >> 1) & 0x55555555);
        x = (x & 0x33333333) + ((x >> 2) & 0x33333333);
        x = (x + (x >> 4)) & 0x0F0F0F0F;
        x = x + (x >> 8);
        x = (x + (x >> 16)) & 0x3F;
        if (x == 0) {
            x = 1;
        }
        n_active = x - 1;

        meta.bfc.counter_incr = 0;
        allow_bp_table.apply();
        if (bp_allowed) {
            th_table.apply();
            if (depth_before > th) {
                meta.bfc.counter_incr = 1;
                bit<32> pi = (bit<32>)local * UPSTREAM_Q_SLOTS + ((bit<32>)hdr.bfc.upstream_q & (UPSTREAM_Q_SLOTS - 1));
                lowest = (bit<32>)1 << (bit<8>)(pi & 31);
                bit<16> c = counter_inc.execute(pi);
                if (c == 1) {
                    bitmap_set.execute(pi >> 5);
                    emit_ctrl(CTRL_PAUSE, (bit<16>)(pi & (UPSTREAM_Q_SLOTS - 1)), local);
                }
            }
        }

        hdr.bridge.setValid();
        hdr.bridge.flow_idx = meta.bfc.flow_idx;
        hdr.bridge.qid = meta.bfc.qid;
        hdr.bridge.upstream_q_in = meta.bfc.upstream_q_in;
        hdr.bridge.pad = 0;
        hdr.bridge.counter_incr = meta.bfc.counter_incr;
        hdr.bridge.ingress_port = meta.bfc.ingress_port;
        hdr.bridge.egress_port = meta.bfc.egress_port;
        hdr.bridge.ingress_dev_port = (bit<16>)ig_intr_md.ingress_port;
        hdr.bridge.len_bytes = meta.bfc.len_bytes;
    }
}

control IngressDeparser(packet_out pkt, inout headers_t hdr, in ig_meta_t meta,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Mirror() mirror;
    apply {
        if (ig_dprsr_md.mirror_type == 1) {
            /* The PAUSE frame: egress turns this mirrored copy into ethernet + bfc_ctrl_h. */
            mirror.emit<deq_mirror_h>(meta.session, {
                meta.mirror_kind, meta.ctrl_op, meta.ctrl_q, 0, 0, 0, 0, 0, 0, 0, 0, 0 });
        }
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ctrl);
        pkt.emit(hdr.bfc);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.l4);
    }
}

parser EgressParser(packet_in pkt, out headers_t hdr, out eg_meta_t meta, out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        /* Mirrored copies start with deq_mirror_h (kind != 0); normal packets with bridge_h,
         * whose first byte (flow_idx[31:24]) is 0 because FLOW_TABLE_SIZE < 2^24. */
        transition select(pkt.lookahead<bit<8>>()) {
            0: parse_bridge;
            default: parse_mirror;
        }
    }
    state parse_mirror {
        pkt.extract(hdr.deq);
        transition accept;
    }
    state parse_bridge {
        pkt.extract(hdr.bridge);
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            BFC_ETHERTYPE: parse_bfc;
            default: accept;
        }
    }
    state parse_bfc {
        pkt.extract(hdr.bfc);
        transition accept;
    }
}

control Egress(inout headers_t hdr, inout eg_meta_t meta,
               in egress_intrinsic_metadata_t eg_intr_md,
               in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
               inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
               inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply {
        if (hdr.deq.isValid()) {
            /* A PAUSE mirrored by ingress: emit it as a control frame on the control queue. */
            hdr.ethernet.setValid();
            hdr.ethernet.ether_type = BFC_CTRL_ETHERTYPE;
            hdr.ctrl.setValid();
            hdr.ctrl.op = hdr.deq.ctrl_op;
            hdr.ctrl.word_index = 0;
            hdr.ctrl.upstream_q = hdr.deq.ctrl_q;
            hdr.ctrl.bitmap = 0;
            hdr.deq.setInvalid();
            return;
        }
        if (!hdr.bridge.isValid()) {
            return;
        }
        /* The packet has left its queue: send the dequeue record to this pipe's recirculation
         * port (mirror session NUM_PORTS + 1), and stamp our queue as the next hop's upstreamQ. */
        meta.mirror_kind = 1;
        meta.session = (MirrorId_t)(NUM_PORTS + 1);
        eg_dprsr_md.mirror_type = 1;
        hdr.deq.setValid();
        hdr.deq.kind = 1;
        hdr.deq.ctrl_op = 0;
        hdr.deq.ctrl_q = 0;
        hdr.deq.flow_idx = hdr.bridge.flow_idx;
        hdr.deq.qid = hdr.bridge.qid;
        hdr.deq.upstream_q_in = hdr.bridge.upstream_q_in;
        hdr.deq.pad = 0;
        hdr.deq.counter_incr = hdr.bridge.counter_incr;
        hdr.deq.ingress_port = hdr.bridge.ingress_port;
        hdr.deq.egress_port = hdr.bridge.egress_port;
        hdr.deq.ingress_dev_port = hdr.bridge.ingress_dev_port;
        hdr.deq.len_bytes = hdr.bridge.len_bytes;
        hdr.bfc.upstream_q = (bit<16>)hdr.bridge.qid;
        hdr.bridge.setInvalid();
    }
}

control EgressDeparser(packet_out pkt, inout headers_t hdr, in eg_meta_t meta,
                       in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Mirror() mirror;
    apply {
        if (eg_dprsr_md.mirror_type == 1) {
            mirror.emit<deq_mirror_h>(meta.session, hdr.deq);
        }
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ctrl);
        pkt.emit(hdr.bfc);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.l4);
    }
}

/* Ghost thread (Tofino2): the traffic manager's queue depths, pushed to ingress at no cost in
 * ingress cycles (§9). Keeps queue_depth and the per-port non-empty bitmap. */
control Ghost(in ghost_intrinsic_metadata_t gmd) {
    bit<32> bitq;
    RegisterAction<bit<32>, bit<32>, bit<32>>(queue_depth) depth_write = {
        void apply(inout bit<32> v) {
            v = (bit<32>)gmd.qlength;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(nonempty_q) nonempty_set = {
        void apply(inout bit<32> v) {
            v = v | bitq;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(nonempty_q) nonempty_clear = {
        void apply(inout bit<32> v) {
            v = v & ~bitq;
        }
    };
    apply {
        bit<32> qi = (bit<32>)gmd.qid;
        bitq = (bit<32>)1 << (bit<8>)(qi & 31);
        depth_write.execute(qi);
        if (gmd.qlength == 0) {
            nonempty_clear.execute(qi >> 5);
        } else {
            nonempty_set.execute(qi >> 5);
        }
    }
}

Pipeline(IngressParser(), Ingress(), IngressDeparser(), EgressParser(), Egress(), EgressDeparser(), Ghost()) pipe;
Switch(pipe) main;
