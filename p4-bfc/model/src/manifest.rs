//! The static manifest of the model's P4-visible names: every `const`, register, table, and field
//! of the `bfc_h` / `bfc_ctrl_h` headers and the `bfc_meta_t` metadata struct that the .p4 files
//! declare, with its width and size. `tests/p4_consistency.rs` parses both .p4 files and compares
//! them with this list in both directions, so a rename or resize on one side fails CI.
//!
//! Values come from the crate's constants, so the manifest cannot drift from the model; the unit
//! tests below check it against the model's actual register and table allocations.

use crate::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `const bit<width> NAME = value;` (`size` holds the value).
    Const,
    /// A register array: `width` bits per element, `size` elements.
    Register,
    /// A match-action table with `size` entries (`width` unused, 0).
    Table,
    /// A field `header_or_struct.field` of `width` bits (`size` unused, 0).
    Field,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item {
    pub kind: Kind,
    pub name: &'static str,
    pub width: u32,
    pub size: u64,
}

const fn c(name: &'static str, width: u32, value: u64) -> Item {
    Item { kind: Kind::Const, name, width, size: value }
}
const fn r(name: &'static str, width: u32, size: u32) -> Item {
    Item { kind: Kind::Register, name, width, size: size as u64 }
}
const fn t(name: &'static str, size: u32) -> Item {
    Item { kind: Kind::Table, name, width: 0, size: size as u64 }
}
const fn f(name: &'static str, width: u32) -> Item {
    Item { kind: Kind::Field, name, width, size: 0 }
}

/// Routing is not BFC: the P4 needs a forwarding table to pick the egress port, and the model
/// takes that port as an input instead. It is listed so the consistency test still accounts for
/// every table the P4 declares.
pub const FORWARD_TABLE_SIZE: u32 = 1024;

pub const MANIFEST: &[Item] = &[
    c("NUM_PORTS", 32, NUM_PORTS as u64),
    c("QUEUES_PER_PORT", 32, QUEUES_PER_PORT as u64),
    c("CONTROL_QID", 32, CONTROL_QID as u64),
    c("DATA_QUEUES_PER_PORT", 32, DATA_QUEUES_PER_PORT as u64),
    c("QUEUE_COUNT", 32, QUEUE_COUNT as u64),
    c("FLOW_TABLE_PER_PORT", 32, FLOW_TABLE_PER_PORT as u64),
    c("FLOW_TABLE_SIZE", 32, FLOW_TABLE_SIZE as u64),
    c("UPSTREAM_Q_SLOTS", 32, UPSTREAM_Q_SLOTS as u64),
    c("PAUSE_COUNTER_SIZE", 32, PAUSE_COUNTER_SIZE as u64),
    c("BITMAP_WORD_BITS", 32, BITMAP_WORD_BITS as u64),
    c("BITMAP_WORDS_PER_PORT", 32, BITMAP_WORDS_PER_PORT as u64),
    c("PAUSE_BITMAP_SIZE", 32, PAUSE_BITMAP_SIZE as u64),
    c("TH_TABLE_SIZE", 32, TH_TABLE_SIZE as u64),
    c("ALLOW_BP_TABLE_SIZE", 32, ALLOW_BP_TABLE_SIZE as u64),
    c("FORWARD_TABLE_SIZE", 32, FORWARD_TABLE_SIZE as u64),
    c("HRTT_NS", 32, HRTT_NS as u64),
    c("STICKY_NS", 32, STICKY_NS as u64),
    c("BITMAP_PERIOD_NS", 32, BITMAP_PERIOD_NS as u64),
    c("BFC_ETHERTYPE", 16, BFC_ETHERTYPE as u64),
    c("BFC_CTRL_ETHERTYPE", 16, BFC_CTRL_ETHERTYPE as u64),
    c("CTRL_PAUSE", 8, CTRL_PAUSE as u64),
    c("CTRL_RESUME", 8, CTRL_RESUME as u64),
    c("CTRL_BITMAP", 8, CTRL_BITMAP as u64),
    c("CTRL_BITMAP_RECIRC", 8, CTRL_BITMAP_RECIRC as u64),
    r("flow_q", 8, FLOW_TABLE_SIZE),
    r("flow_size", 16, FLOW_TABLE_SIZE),
    r("flow_ts", 32, FLOW_TABLE_SIZE),
    r("pause_counter", 16, PAUSE_COUNTER_SIZE),
    r("pause_bitmap", 32, PAUSE_BITMAP_SIZE),
    r("queue_depth", 32, QUEUE_COUNT),
    r("nonempty_q", 32, NUM_PORTS),
    r("paused_q", 32, NUM_PORTS),
    t("port_index", NUM_PORTS),
    t("th_table", TH_TABLE_SIZE),
    t("allow_bp_table", ALLOW_BP_TABLE_SIZE),
    t("first_free_queue", QUEUES_PER_PORT),
    t("ipv4_forward", FORWARD_TABLE_SIZE),
    f("bfc_h.upstream_q", 16),
    f("bfc_h.ether_type", 16),
    f("bfc_ctrl_h.op", 8),
    f("bfc_ctrl_h.word_index", 8),
    f("bfc_ctrl_h.upstream_q", 16),
    f("bfc_ctrl_h.bitmap", 32),
    f("bfc_meta_t.flow_idx", 32),
    f("bfc_meta_t.qid", 8),
    f("bfc_meta_t.upstream_q_in", 16),
    f("bfc_meta_t.counter_incr", 1),
    f("bfc_meta_t.ingress_port", 8),
    f("bfc_meta_t.egress_port", 8),
    f("bfc_meta_t.len_bytes", 32),
];

/// The manifest entry called `name`.
pub fn find(name: &str) -> Option<&'static Item> {
    MANIFEST.iter().find(|i| i.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(name: &str) -> usize {
        find(name).unwrap_or_else(|| panic!("{name} missing from MANIFEST")).size as usize
    }

    #[test]
    fn registers_and_tables_are_allocated_at_manifest_sizes() {
        let b = Bfc::with_defaults(1);
        // flow_q, flow_size and flow_ts are the three fields of one flow-table entry.
        assert_eq!(b.flow_table.len(), size("flow_q"));
        assert_eq!(b.flow_table.len(), size("flow_size"));
        assert_eq!(b.flow_table.len(), size("flow_ts"));
        assert_eq!(b.pause_counter.len(), size("pause_counter"));
        assert_eq!(b.pause_bitmap.len(), size("pause_bitmap"));
        assert_eq!(b.queue_depth.len(), size("queue_depth"));
        assert_eq!(b.nonempty_q.len(), size("nonempty_q"));
        assert_eq!(b.paused_q.len(), size("paused_q"));
        assert_eq!(b.th_table.len(), size("th_table"));
        assert_eq!(b.allow_bp_table.len(), size("allow_bp_table"));
    }

    #[test]
    fn rust_types_match_declared_widths() {
        // Register element types hold exactly the declared width, so wrap-around matches the P4.
        let bits = |n: usize| (n * 8) as u32;
        let e = FlowEntry::default();
        assert_eq!(find("flow_q").unwrap().width, bits(std::mem::size_of_val(&e.q)));
        assert_eq!(find("flow_size").unwrap().width, bits(std::mem::size_of_val(&e.size)));
        assert_eq!(find("flow_ts").unwrap().width, bits(std::mem::size_of_val(&e.ts)));
        assert_eq!(find("pause_counter").unwrap().width, bits(std::mem::size_of::<u16>()));
        assert_eq!(find("pause_bitmap").unwrap().width, bits(std::mem::size_of::<u32>()));
        assert_eq!(find("bfc_h.upstream_q").unwrap().width, bits(std::mem::size_of::<u16>()));
        assert_eq!(find("bfc_ctrl_h.bitmap").unwrap().width, BITMAP_WORD_BITS);
        // Queue ids fit the flow_q element and the bitmaps hold a port's queues.
        assert!(QUEUES_PER_PORT <= 1 << find("flow_q").unwrap().width);
        assert!(QUEUES_PER_PORT <= find("nonempty_q").unwrap().width);
    }

    #[test]
    fn names_are_unique() {
        for (i, a) in MANIFEST.iter().enumerate() {
            assert!(MANIFEST[i + 1..].iter().all(|b| b.name != a.name), "duplicate manifest name {}", a.name);
        }
    }
}
