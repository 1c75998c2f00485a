//! libccp's connection table, zeroed and enlarged.
//!
//! The `libccp` crate 1.2.0 has two defects here (ebpf-datapath spec §8):
//! - `DatapathBuilder::init` `malloc`s the 1,024-slot table and nothing zeroes it, while
//!   `ccp_connection_start` claims the first slot whose `index` is 0: garbage makes slots look
//!   taken, so sids come out random, or no connection can start at all;
//! - 1,024 slots are hard-coded, and the crate offers no way to change them.
//!
//! libccp itself (the C code) reads the table only through the datapath struct's
//! `ccp_active_connections` and `max_connections`, so right after `init`, before any connection
//! exists, this replaces the crate's table with a zeroed one of the size asked for. The crate
//! keeps the datapath struct private; its C layout (`struct ccp_datapath`, ccp.h) is mirrored
//! below, and every value `init` is known to set is checked before anything is written, so a
//! crate whose layout differs is refused rather than corrupted.

use libccp::Datapath;

/// `sizeof(struct ccp_connection)` in libccp 1.2 on 64-bit Linux (the crate's bindgen layout
/// test asserts the same).
const CONNECTION_SIZE: usize = 216;
/// What the crate's `init` hard-codes.
const CRATE_CONNECTIONS: usize = 1024;
const CRATE_PROGRAMS: usize = 10;
const CRATE_FTO_US: u64 = 1000;
/// Sids are `u16` in libccp (`conn->index`, and its slot scan counts with a `u16`): a larger
/// table would make that scan loop forever.
pub const MAX_CONNECTIONS: usize = u16::MAX as usize;

type Fn = Option<unsafe extern "C" fn()>;

/// `struct ccp_datapath` (libccp 1.2 ccp.h), field for field.
#[repr(C)]
struct RawDatapath {
    set_cwnd: Fn,
    set_rate_abs: Fn,
    send_msg: Fn,
    log: Fn,
    time_zero: u64,
    now: Fn,
    since_usecs: Fn,
    after_usecs: Fn,
    max_connections: usize,
    ccp_active_connections: *mut libc::c_void,
    fto_us: u64,
    last_msg_sent: u64,
    in_fallback: bool,
    max_programs: usize,
    programs: *mut libc::c_void,
    impl_: *mut libc::c_void,
}

const _: () = assert!(size_of::<RawDatapath>() == 128);

/// Gives a freshly initialised datapath a zeroed table of `slots` connections.
///
/// Must run before the first `Connection::start`; `slots` is 1..=[`MAX_CONNECTIONS`].
pub fn replace(dp: &mut Datapath, slots: usize) -> Result<(), String> {
    if !(1..=MAX_CONNECTIONS).contains(&slots) {
        return Err(format!("libccp runs 1 to {MAX_CONNECTIONS} connections, not {slots}"));
    }
    if size_of::<Datapath>() != size_of::<RawDatapath>() {
        return Err(format!(
            "the libccp crate's datapath is {} bytes, not the {} of libccp 1.2's struct ccp_datapath",
            size_of::<Datapath>(),
            size_of::<RawDatapath>()
        ));
    }
    // SAFETY: `Datapath` is a newtype around bindgen's `ccp_datapath`, a repr(C) struct of the
    // same size as `RawDatapath` (checked above), which mirrors it field for field. The values
    // below are checked against what the crate's `init` wrote before anything is changed.
    let raw = unsafe { &mut *(dp as *mut Datapath).cast::<RawDatapath>() };
    let old = raw.ccp_active_connections;
    let looks_right = raw.max_connections == CRATE_CONNECTIONS
        && raw.max_programs == CRATE_PROGRAMS
        && raw.fto_us == CRATE_FTO_US
        && raw.set_cwnd.is_some()
        && raw.send_msg.is_some()
        && !raw.impl_.is_null()
        && !old.is_null();
    if !looks_right {
        return Err("the libccp crate's datapath does not have libccp 1.2.0's layout; refusing to patch it".into());
    }
    // SAFETY: `old` came from the crate's libc::malloc.
    let usable = unsafe { libc::malloc_usable_size(old) };
    if usable < CRATE_CONNECTIONS * CONNECTION_SIZE {
        return Err(format!("the crate's connection table is {usable} bytes, too small for libccp 1.2's layout"));
    }
    // SAFETY: plain allocation; checked for null below.
    let table = unsafe { libc::calloc(slots, CONNECTION_SIZE) };
    if table.is_null() {
        return Err(format!("cannot allocate a table of {slots} libccp connections"));
    }
    raw.ccp_active_connections = table;
    raw.max_connections = slots;
    // SAFETY: no connection exists yet, so nothing points into the old table; it came from
    // libc::malloc. (libccp never frees either table: ours lives as long as the process.)
    unsafe { libc::free(old) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use libccp::{CongestionOps, Connection, DatapathBuilder, DatapathOps, FlowInfo};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Records the sid of every CREATE libccp sends.
    struct Sids(Rc<RefCell<Vec<u32>>>);

    impl DatapathOps for Sids {
        fn send_msg(&mut self, msg: &[u8]) {
            if msg.len() >= 8 && msg[0..2] == [0, 0] {
                self.0.borrow_mut().push(u32::from_le_bytes(msg[4..8].try_into().unwrap()));
            }
        }
    }

    struct Nop;

    impl CongestionOps for Nop {
        fn set_cwnd(&mut self, _: u32) {}
        fn set_rate_abs(&mut self, _: u32) {}
    }

    fn datapath(sids: &Rc<RefCell<Vec<u32>>>) -> Datapath {
        // Dirty the heap first, as a long-running process would have it, so the crate's
        // unzeroed table is likely to hold garbage.
        let junk: Vec<Vec<u8>> = (0..64).map(|i| vec![0xa5u8; 4096 * (i % 64 + 1)]).collect();
        drop(junk);
        DatapathBuilder::default().with_id(0).with_ops(Sids(Rc::clone(sids))).init().expect("libccp init")
    }

    #[test]
    fn a_replaced_table_hands_out_sids_in_order_beyond_the_crates_1024() {
        let sids = Rc::new(RefCell::new(Vec::new()));
        let mut dp = datapath(&sids);
        replace(&mut dp, 3000).expect("the crate has libccp 1.2's layout");
        let conns: Vec<_> = (0..3000).map(|_| Connection::start(&dp, Nop, FlowInfo::default()).expect("a free slot")).collect();
        assert_eq!(*sids.borrow(), (1..=3000).collect::<Vec<u32>>());
        assert!(Connection::start(&dp, Nop, FlowInfo::default()).is_err(), "the table holds 3000");
        drop(conns);
        // Freed slots are reused from the lowest. (libccp holds back the CREATE of a slot whose
        // previous CREATE is under 100 ms old, and retries it from `invoke`: wait that out.)
        std::thread::sleep(std::time::Duration::from_millis(120));
        let again = Connection::start(&dp, Nop, FlowInfo::default()).expect("a freed slot");
        assert_eq!(sids.borrow().last(), Some(&1));
        drop(again);
    }

    #[test]
    fn bad_sizes_are_refused_before_anything_changes() {
        let sids = Rc::new(RefCell::new(Vec::new()));
        let mut dp = datapath(&sids);
        assert!(replace(&mut dp, 0).is_err());
        assert!(replace(&mut dp, MAX_CONNECTIONS + 1).is_err());
        replace(&mut dp, 2).unwrap();
        // A second replacement finds the table it made, not the crate's: refused.
        assert!(replace(&mut dp, 4).unwrap_err().contains("layout"));
    }
}
