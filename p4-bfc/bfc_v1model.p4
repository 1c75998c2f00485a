/*
 * bfc_v1model.p4 -- BFC (Backpressure Flow Control) switch pipeline for the v1model
 * architecture (BMv2 simple_switch). Spec: specs/bfc.md §5 (dynamic queue assignment), §6
 * (pause counters, pause threshold, control frames), §10 (deadlock allow-table), §12.1 (switch
 * datapath); thesis Chapter 3, §3.3.3.
 *
 * NOT COMPILED OR RUN: there is no p4c on the machine this was written on. The executable
 * reference for this pipeline is the Rust model p4-bfc/model (crate ccp-bfc-model), which uses
 * the same register, table, header-field and constant names and sizes; a test there parses this
 * file's declarations and checks them against the model.
 *
 * v1model is a functional reference, not a performance target: registers declared at top level
 * are shared by ingress and egress, so the dequeue bookkeeping runs directly in egress (no
 * recirculation, unlike bfc_tna.p4). BMv2 has no per-queue DRR scheduler and no data-plane
 * per-queue pause, so the assigned queue id is carried in the BFC header and tracked in
 * registers, but BMv2 itself serves the port as one FIFO and the paused_q register is state only.
 * BMv2 timestamps are microseconds; they are scaled to ns.
 *
 * Clone sessions 1..NUM_PORTS must send to the device port whose port_index is session-1 (pause
 * and resume frames go back out of the port the data came in on). Periodic bitmap frames (BMv2
 * has no packet generator): the controller injects a CTRL_BITMAP frame every BITMAP_PERIOD_NS per
 * (port, word) on a port without a port_index entry (e.g. the CPU port), carrying the target
 * local port in bfc_ctrl_h.upstream_q; the pipeline fills in that word of pause_bitmap and
 * clones the frame to the target port.
 */
#include <core.p4>
#include <v1model.p4>

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

struct headers_t {
    ethernet_h ethernet;
    bfc_h bfc;
    bfc_ctrl_h ctrl;
    ipv4_h ipv4;
    l4_ports_h l4;
}

/* ctrl_*: what a cloned copy needs to become a control frame (preserved into the clone). */
struct metadata_t {
    bfc_meta_t bfc;
    @field_list(1)
    bit<8> ctrl_op;
    @field_list(1)
    bit<16> ctrl_q;
    @field_list(1)
    bit<8> ctrl_port;
    @field_list(1)
    bit<8> ctrl_word;
    @field_list(1)
    bit<32> ctrl_bitmap;
}

/* ---- Registers (top level, shared by ingress and egress). ---- */
register<bit<8>>(FLOW_TABLE_SIZE) flow_q;           // qAssignment
register<bit<16>>(FLOW_TABLE_SIZE) flow_size;       // packets of the entry in the switch
register<bit<32>>(FLOW_TABLE_SIZE) flow_ts;         // last enqueue/dequeue, ns | 1 (0 = unused)
register<bit<16>>(PAUSE_COUNTER_SIZE) pause_counter; // (ingress port, upstreamQ slot)
register<bit<32>>(PAUSE_BITMAP_SIZE) pause_bitmap;  // bit set iff its pause counter > 0
register<bit<32>>(QUEUE_COUNT) queue_depth;         // bytes per (port, queue)
register<bit<32>>(NUM_PORTS) nonempty_q;            // per port: bit q = queue q holds data
register<bit<32>>(NUM_PORTS) paused_q;              // per port: bit q = downstream paused q

parser BfcParser(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    state start {
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

control BfcVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control BfcIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    bit<32> now_ns;
    bit<8> in_local;
    bit<32> flow_hash;
    bit<32> n_active;
    bit<32> th;
    bit<8> first_free;
    bit<32> lowest;
    bool bp_allowed;

    action drop() {
        mark_to_drop(sm);
    }
    /* Routing is outside BFC; the action also returns the egress's local index. */
    action set_egress(bit<9> port, bit<8> local) {
        sm.egress_spec = port;
        meta.bfc.egress_port = local;
    }
    table ipv4_forward {
        key = { hdr.ipv4.dst_addr : lpm; }
        actions = { set_egress; drop; }
        size = FORWARD_TABLE_SIZE;
        default_action = drop();
    }

    action set_local(bit<8> local) {
        in_local = local;
    }
    /* Device port -> local index 0..NUM_PORTS-1; 255 = the controller's port (timer frames). */
    table port_index {
        key = { sm.ingress_port : exact; }
        actions = { set_local; }
        size = NUM_PORTS;
        default_action = set_local(255);
    }

    /* Th = HRTT * mu / N_active for this egress, precomputed by the controller (§6.4), so no
     * division happens per packet. Key n_active is N_active - 1. A miss means "never pause". */
    action set_th(bit<32> th_bytes) {
        th = th_bytes;
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

    /* §10: entries mark the (ingress, egress) pairs whose backpressure edge was removed to keep
     * the backpressure graph acyclic; a miss allows backpressure. */
    action deny_bp() {
        bp_allowed = false;
    }
    action allow_bp() {
        bp_allowed = true;
    }
    table allow_bp_table {
        key = {
            in_local : exact;
            meta.bfc.egress_port : exact;
        }
        actions = { deny_bp; allow_bp; }
        size = ALLOW_BP_TABLE_SIZE;
        default_action = allow_bp();
    }

    /* Priority encoder: index of the lowest set bit of the rotated candidate bitmap (the bit is
     * isolated first, so 32 exact entries suffice). */
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

    apply {
        now_ns = (bit<32>)(sm.ingress_global_timestamp * 1000);

        /* Control frames from the downstream neighbour: set the paused level of our queues on
         * that port. Consumed here; they are hop-by-hop. */
        port_index.apply();
        if (hdr.ctrl.isValid()) {
            bit<32> paused;
            if (hdr.ctrl.op == CTRL_BITMAP && in_local == 255) {
                /* Timer frame from the controller: fill in the bitmap word for the target port
                 * and send it there (clone session = target port + 1). */
                bit<32> w = (bit<32>)hdr.ctrl.upstream_q * BITMAP_WORDS_PER_PORT + (bit<32>)hdr.ctrl.word_index;
                /* An I2E clone carries the packet as received, so the word rides in metadata. */
                pause_bitmap.read(meta.ctrl_bitmap, w);
                meta.ctrl_word = hdr.ctrl.word_index;
                meta.ctrl_op = CTRL_BITMAP;
                meta.ctrl_port = (bit<8>)hdr.ctrl.upstream_q;
                clone_preserving_field_list(CloneType.I2E, (bit<32>)meta.ctrl_port + 1, 1);
            } else {
                paused_q.read(paused, (bit<32>)in_local);
                bit<32> bit_q = (bit<32>)1 << (bit<8>)hdr.ctrl.upstream_q;
                if (hdr.ctrl.op == CTRL_PAUSE && (bit<32>)hdr.ctrl.upstream_q < QUEUES_PER_PORT) {
                    paused = paused | bit_q;
                } else if (hdr.ctrl.op == CTRL_RESUME && (bit<32>)hdr.ctrl.upstream_q < QUEUES_PER_PORT) {
                    paused = paused & ~bit_q;
                } else if (hdr.ctrl.op == CTRL_BITMAP && hdr.ctrl.word_index == 0) {
                    paused = hdr.ctrl.bitmap;
                }
                paused_q.write((bit<32>)in_local, paused);
            }
            drop();
            return;
        }
        if (!hdr.ipv4.isValid() || in_local == 255) {
            drop();
            return;
        }
        ipv4_forward.apply();
        if (!hdr.bfc.isValid()) {
            /* From a device without BFC: treat as upstream queue 0. */
            hdr.bfc.setValid();
            hdr.bfc.upstream_q = 0;
            hdr.bfc.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = BFC_ETHERTYPE;
        }
        meta.bfc.ingress_port = in_local;
        meta.bfc.upstream_q_in = hdr.bfc.upstream_q;
        meta.bfc.len_bytes = sm.packet_length;

        /* §5: flow table indexed by (egress port, hash(5-tuple)); in-slice offset by
         * multiply-shift of the hash's low 16 bits. */
        hash(flow_hash, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol, hdr.l4.src_port, hdr.l4.dst_port },
             32w0xFFFFFFFF);
        meta.bfc.flow_idx = (bit<32>)meta.bfc.egress_port * FLOW_TABLE_PER_PORT
                          + (((flow_hash & 0xFFFF) * FLOW_TABLE_PER_PORT) >> 16);
        bit<16> size;
        bit<32> ts;
        bit<8> q;
        flow_size.read(size, meta.bfc.flow_idx);
        flow_ts.read(ts, meta.bfc.flow_idx);
        flow_q.read(q, meta.bfc.flow_idx);

        bit<32> eg = (bit<32>)meta.bfc.egress_port;
        bit<32> nonempty;
        bit<32> paused;
        nonempty_q.read(nonempty, eg);
        paused_q.read(paused, eg);
        bit<32> data_mask = ((bit<32>)1 << DATA_QUEUES_PER_PORT) - 1;

        /* Sticky rule: reassign only an entry with nothing in the switch that has been idle for
         * more than STICKY_NS (2 hop RTTs), to an empty unpaused queue found by scanning from a
         * random start, else to a random data queue. */
        if (size == 0 && (ts == 0 || now_ns - ts > STICKY_NS)) {
            bit<32> cand = ~nonempty & ~paused & data_mask;
            bit<8> start;
            random(start, 0, (bit<8>)(DATA_QUEUES_PER_PORT - 1));
            if (cand != 0) {
                bit<32> rot = (cand >> start) | (cand << (8w32 - start));
                lowest = rot & (~rot + 1);
                first_free_queue.apply();
                q = (first_free + start) & 31;
            } else {
                random(q, 0, (bit<8>)(DATA_QUEUES_PER_PORT - 1));
            }
            flow_q.write(meta.bfc.flow_idx, q);
        }
        flow_size.write(meta.bfc.flow_idx, size |+| 1);
        flow_ts.write(meta.bfc.flow_idx, now_ns | 1);
        meta.bfc.qid = q;

        bit<32> qi = eg * QUEUES_PER_PORT + (bit<32>)q;
        bit<32> depth_before;
        queue_depth.read(depth_before, qi);
        queue_depth.write(qi, depth_before + meta.bfc.len_bytes);
        nonempty = nonempty | ((bit<32>)1 << q);
        nonempty_q.write(eg, nonempty);

        /* N_active: non-empty, unpaused data queues after this packet, at least 1 (SWAR
         * popcount, §16.3). */
        bit<32> x = nonempty & ~paused & data_mask;
        x = x - ((x >> 1) & 0x55555555);
        x = (x & 0x33333333) + ((x >> 2) & 0x33333333);
        x = (x + (x >> 4)) & 0x0F0F0F0F;
        x = x + (x >> 8);
        x = (x + (x >> 16)) & 0x3F;
        if (x == 0) {
            x = 1;
        }
        n_active = x - 1;

        /* §6.2: count the packet against (ingress, upstreamQ) if it joins a queue above Th;
         * pause the upstream queue on 0 -> 1. */
        meta.bfc.counter_incr = 0;
        allow_bp_table.apply();
        if (bp_allowed) {
            th_table.apply();
            if (depth_before > th) {
                meta.bfc.counter_incr = 1;
                bit<32> pi = (bit<32>)in_local * UPSTREAM_Q_SLOTS + ((bit<32>)hdr.bfc.upstream_q & (UPSTREAM_Q_SLOTS - 1));
                bit<16> c;
                pause_counter.read(c, pi);
                c = c |+| 1;
                pause_counter.write(pi, c);
                if (c == 1) {
                    bit<32> word;
                    pause_bitmap.read(word, pi >> 5);
                    pause_bitmap.write(pi >> 5, word | ((bit<32>)1 << (bit<8>)(pi & 31)));
                    meta.ctrl_op = CTRL_PAUSE;
                    meta.ctrl_q = (bit<16>)(pi & (UPSTREAM_Q_SLOTS - 1));
                    meta.ctrl_port = in_local;
                    clone_preserving_field_list(CloneType.I2E, (bit<32>)in_local + 1, 1);
                }
            }
        }
    }
}

control BfcEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        /* Clones become control frames: ethernet + bfc_ctrl_h only. */
        if (sm.instance_type != 0) {
            hdr.bfc.setInvalid();
            hdr.ipv4.setInvalid();
            hdr.l4.setInvalid();
            hdr.ctrl.setValid();
            hdr.ethernet.ether_type = BFC_CTRL_ETHERTYPE;
            hdr.ctrl.op = meta.ctrl_op;
            if (meta.ctrl_op != CTRL_BITMAP) {
                hdr.ctrl.word_index = 0;
                hdr.ctrl.upstream_q = meta.ctrl_q;
                hdr.ctrl.bitmap = 0;
            } else {
                hdr.ctrl.word_index = meta.ctrl_word;
                hdr.ctrl.upstream_q = 0;
                hdr.ctrl.bitmap = meta.ctrl_bitmap;
            }
            truncate(64);
            return;
        }
        if (!hdr.bfc.isValid()) {
            return;
        }
        bit<32> now_ns = (bit<32>)(sm.egress_global_timestamp * 1000);

        /* Dequeue bookkeeping (§5, §6.2). */
        bit<16> size;
        flow_size.read(size, meta.bfc.flow_idx);
        flow_size.write(meta.bfc.flow_idx, size |-| 1);
        flow_ts.write(meta.bfc.flow_idx, now_ns | 1);

        bit<32> eg = (bit<32>)meta.bfc.egress_port;
        bit<32> qi = eg * QUEUES_PER_PORT + (bit<32>)meta.bfc.qid;
        bit<32> depth;
        queue_depth.read(depth, qi);
        depth = depth |-| meta.bfc.len_bytes;
        queue_depth.write(qi, depth);
        if (depth == 0) {
            bit<32> nonempty;
            nonempty_q.read(nonempty, eg);
            nonempty_q.write(eg, nonempty & ~((bit<32>)1 << meta.bfc.qid));
        }

        /* Keyed by the upstreamQ saved at enqueue, so the decrement hits the counter the
         * increment hit; resume on 1 -> 0. */
        if (meta.bfc.counter_incr == 1) {
            bit<32> pi = (bit<32>)meta.bfc.ingress_port * UPSTREAM_Q_SLOTS
                       + ((bit<32>)meta.bfc.upstream_q_in & (UPSTREAM_Q_SLOTS - 1));
            bit<16> c;
            pause_counter.read(c, pi);
            c = c |-| 1;
            pause_counter.write(pi, c);
            if (c == 0) {
                bit<32> word;
                pause_bitmap.read(word, pi >> 5);
                pause_bitmap.write(pi >> 5, word & ~((bit<32>)1 << (bit<8>)(pi & 31)));
                meta.ctrl_op = CTRL_RESUME;
                meta.ctrl_q = (bit<16>)(pi & (UPSTREAM_Q_SLOTS - 1));
                meta.ctrl_port = meta.bfc.ingress_port;
                clone_preserving_field_list(CloneType.E2E, (bit<32>)meta.bfc.ingress_port + 1, 1);
            }
        }
        /* §16.11: rewrite upstreamQ with this hop's queue on the way out. */
        hdr.bfc.upstream_q = (bit<16>)meta.bfc.qid;
    }
}

control BfcComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control BfcDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ctrl);
        pkt.emit(hdr.bfc);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.l4);
    }
}

V1Switch(BfcParser(), BfcVerifyChecksum(), BfcIngress(), BfcEgress(), BfcComputeChecksum(), BfcDeparser()) main;
