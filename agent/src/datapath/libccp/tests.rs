//! Protocol behaviour of the libccp adapter against an in-memory transport.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ccp_wire::{implicit, ChangeProg, Create, Measure, Msg, Ready, RegKind, UpdateFields};

use std::collections::HashSet;

use super::transport::{Received, Transport};
use super::*;
use crate::datapath::{CloseReason, Datapath, DatapathEvent, FlowRef};

#[derive(Default)]
struct Wire {
    /// Datagrams to receive: bytes, sender, the sender's uid.
    inbox: VecDeque<(Vec<u8>, Option<PathBuf>, Option<u32>)>,
    sent: Vec<(PathBuf, Msg)>,
    /// errno to fail the next sends with, consumed one per send.
    fail: VecDeque<i32>,
    /// The datapath's queue is full: every send fails with EAGAIN until `writable` is set.
    full: bool,
    /// The full queue has room again (reported once by `writable_again`).
    writable: bool,
}

#[derive(Clone, Default)]
struct Mock(Rc<RefCell<Wire>>);

impl Transport for Mock {
    type Addr = PathBuf;
    fn describe(&self) -> String {
        "mock".into()
    }
    fn register(&mut self, _: &mio::Registry, _: mio::Token) -> io::Result<()> {
        Ok(())
    }
    fn recv(&mut self, buf: &mut [u8], _: Instant) -> io::Result<Option<Received<PathBuf>>> {
        Ok(self.0.borrow_mut().inbox.pop_front().map(|(bytes, from, uid)| {
            buf[..bytes.len()].copy_from_slice(&bytes);
            Received { len: bytes.len(), from, uid }
        }))
    }
    fn send(&mut self, to: &PathBuf, msg: &[u8], _: Instant) -> io::Result<()> {
        let mut w = self.0.borrow_mut();
        if w.full {
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
        if let Some(errno) = w.fail.pop_front() {
            return Err(io::Error::from_raw_os_error(errno));
        }
        let (m, _) = ccp_wire::decode(msg).expect("the adapter sends valid messages");
        w.sent.push((to.clone(), m));
        Ok(())
    }
    fn addr_name(&self, a: &PathBuf) -> String {
        a.display().to_string()
    }
    fn writable_again(&mut self, out: &mut Vec<PathBuf>, _: Instant) {
        let mut w = self.0.borrow_mut();
        if std::mem::take(&mut w.writable) {
            w.full = false;
            out.push(PathBuf::from(DP));
        }
    }
}

const DP: &str = "/tmp/ccp/dp";

struct T {
    wire: Mock,
    dp: LibccpDatapath<Mock>,
    /// The flows the runtime would control after the events so far.
    known: HashSet<FlowRef>,
    /// The time of every poll and apply.
    now: Now,
}

impl T {
    fn new() -> T {
        let wire = Mock::default();
        let dp = LibccpDatapath::new(wire.clone(), AddressOrder::Host).unwrap();
        T { wire, dp, known: HashSet::new(), now: Now::at_us(0) }
    }

    fn push_raw(&self, bytes: Vec<u8>) {
        self.wire.0.borrow_mut().inbox.push_back((bytes, Some(PathBuf::from(DP)), None));
    }

    fn push(&self, m: Msg) {
        self.push_raw(m.to_bytes().unwrap());
    }

    fn poll(&mut self) -> Vec<DatapathEvent> {
        let mut out = Vec::new();
        let known = self.known.clone();
        self.dp.poll_events(&|f| known.contains(&f), &mut out, usize::MAX, self.now);
        for e in &out {
            match e {
                DatapathEvent::FlowStarted { flow, .. } => self.known.insert(*flow),
                DatapathEvent::FlowClosed { flow, .. } => self.known.remove(flow),
                _ => false,
            };
        }
        out
    }

    /// Applies the fields of `changed` (libccp sends only those).
    fn apply(&mut self, sid: u32, changed: Command) -> Result<(), ApplyError> {
        let want = Settings {
            cwnd_bytes: 1,
            pacing: None,
            report: ReportPolicy::EveryUs(10_000),
            rtt_threshold_us: None,
            report_acked_pkts: 0,
            ack_aggregation_bw_bytes_per_s: 0,
        };
        self.dp.apply(FlowRef { peer: 0, sid }, &want, &changed, self.now)
    }

    fn sent(&self) -> Vec<Msg> {
        std::mem::take(&mut self.wire.0.borrow_mut().sent).into_iter().map(|(_, m)| m).collect()
    }

    fn fields(&self, pairs: &[(&str, u64)]) -> Vec<u64> {
        let mut f = vec![0; self.dp.fold.layout.num_fields];
        for (name, v) in pairs {
            f[self.dp.fold.program.report_index(name).unwrap()] = *v;
        }
        f
    }

    /// `m` from the datapath at `path`, sent by a process of `uid`.
    fn push_from(&self, m: Msg, path: &str, uid: u32) {
        self.wire.0.borrow_mut().inbox.push_back((m.to_bytes().unwrap(), Some(PathBuf::from(path)), Some(uid)));
    }

    fn create(&mut self, sid: u32) -> Vec<DatapathEvent> {
        self.push(create_msg(sid));
        self.poll()
    }
}

fn create_msg(sid: u32) -> Msg {
    Msg::Create(Create {
        sid,
        init_cwnd: 14480,
        mss: 1448,
        src_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1)),
        src_port: 40000,
        dst_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 2)),
        dst_port: 5201,
        cong_alg: None,
    })
}

fn is_install(m: &Msg) -> bool {
    matches!(m, Msg::Install(i) if i.program_uid == FOLD_UID)
}

#[test]
fn ready_installs_the_fold_with_uid_1() {
    let mut t = T::new();
    t.push(Msg::Ready(Ready { datapath_id: 3 }));
    assert!(t.poll().is_empty());
    let sent = t.sent();
    assert_eq!(sent.len(), 1);
    assert!(is_install(&sent[0]));
    assert_eq!(t.dp.stats().installs, 1);
}

#[test]
fn create_installs_switches_and_announces() {
    let mut t = T::new();
    let ev = t.create(7);
    let sent = t.sent();
    assert!(is_install(&sent[0]), "first contact without READY still installs: {sent:?}");
    assert!(matches!(&sent[1], Msg::ChangeProg(ChangeProg { sid: 7, program_uid: 1, .. })));
    match &ev[..] {
        [DatapathEvent::FlowStarted { flow, info }] => {
            assert_eq!(*flow, FlowRef { peer: 0, sid: 7 });
            assert_eq!(info.mss_bytes, 1448);
            assert_eq!(info.init_cwnd_bytes, 14480);
            assert_eq!(info.src, Some(("10.0.0.1".parse().unwrap(), 40000)));
            assert_eq!(info.dst, Some(("10.0.0.2".parse().unwrap(), 5201)));
            assert!(info.existing.is_none());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn reports_decode_and_close_ends_the_flow() {
    let mut t = T::new();
    t.create(1);
    let f = t.fields(&[("acked_bytes", 2896), ("acked_pkts", 2), ("cwnd_bytes", 14480), ("now_us", 5000)]);
    t.push(Msg::Measure(Measure { sid: 1, program_uid: 1, fields: f }));
    match &t.poll()[..] {
        [DatapathEvent::Report { report, .. }] => {
            assert_eq!(report.acked_bytes, 2896);
            assert_eq!(report.cwnd_bytes, 14480);
            assert_eq!(report.mss_bytes, 1448);
        }
        other => panic!("{other:?}"),
    }
    // An empty report from the fold itself is libccp's artefact after a reinstall, not a close.
    t.push(Msg::Measure(Measure { sid: 1, program_uid: 1, fields: vec![] }));
    assert!(t.poll().is_empty());
    assert_eq!(t.dp.stats().empty_reports, 1);
    t.push(Msg::Measure(Measure { sid: 1, program_uid: 0, fields: vec![] }));
    assert!(matches!(&t.poll()[..], [DatapathEvent::FlowClosed { reason: CloseReason::Closed, .. }]));
    // A second close for the same flow is not an event.
    t.push(Msg::Measure(Measure { sid: 1, program_uid: 0, fields: vec![] }));
    assert!(t.poll().is_empty());
}

#[test]
fn unknown_flow_with_our_layout_is_adopted_from_its_report() {
    let mut t = T::new();
    let f = t.fields(&[
        ("cwnd_bytes", 90_000),
        ("acked_bytes", 9000),
        ("acked_pkts", 10),
        ("rtt_samples", 1),
        ("rtt_sum_us", 30_000),
        ("rtt_min_us", 30_000),
    ]);
    t.push(Msg::Measure(Measure { sid: 4, program_uid: 1, fields: f }));
    let ev = t.poll();
    match &ev[..] {
        [DatapathEvent::FlowStarted { info, .. }, DatapathEvent::Report { report, .. }] => {
            let seed = info.existing.as_ref().expect("adopted flows carry their state");
            assert_eq!(seed.cwnd_bytes, 90_000);
            assert_eq!(seed.srtt_us, Some(30_000));
            assert_eq!(info.mss_bytes, 900, "MSS learnt from bytes per packet");
            assert_eq!(report.acked_bytes, 9000);
        }
        other => panic!("{other:?}"),
    }
    assert!(is_install(&t.sent()[0]), "the datapath's table is rewritten on first contact");
    assert_eq!(t.dp.stats().adopted_flows, 1);
    // Once adopted, its reports are plain reports.
    let f = t.fields(&[("cwnd_bytes", 91_000)]);
    t.push(Msg::Measure(Measure { sid: 4, program_uid: 1, fields: f }));
    assert!(matches!(&t.poll()[..], [DatapathEvent::Report { report, .. }] if report.cwnd_bytes == 91_000));
}

#[test]
fn a_create_and_a_report_in_one_batch_are_not_an_adoption() {
    let mut t = T::new();
    t.push(Msg::Create(Create {
        sid: 2,
        init_cwnd: 14480,
        mss: 1448,
        src_ip: 1,
        src_port: 2,
        dst_ip: 3,
        dst_port: 4,
        cong_alg: None,
    }));
    let f = t.fields(&[("cwnd_bytes", 14480)]);
    t.push(Msg::Measure(Measure { sid: 2, program_uid: 1, fields: f }));
    let ev = t.poll();
    assert!(
        matches!(&ev[..], [DatapathEvent::FlowStarted { info, .. }, DatapathEvent::Report { .. }] if info.existing.is_none()),
        "{ev:?}"
    );
    assert_eq!(t.dp.stats().adopted_flows, 0);
}

#[test]
fn foreign_program_is_switched_then_adopted() {
    let mut t = T::new();
    t.push(Msg::Measure(Measure { sid: 9, program_uid: 5, fields: vec![1, 2, 3] }));
    assert!(t.poll().is_empty(), "nothing to decode yet");
    let sent = t.sent();
    assert!(sent.iter().any(|m| matches!(m, Msg::ChangeProg(c) if c.sid == 9)), "{sent:?}");
    // Repeats within a second are not re-sent.
    t.push(Msg::Measure(Measure { sid: 9, program_uid: 5, fields: vec![1, 2, 3] }));
    t.poll();
    assert!(!t.sent().iter().any(|m| matches!(m, Msg::ChangeProg(_))));
    let f = t.fields(&[("cwnd_bytes", 20_000)]);
    t.push(Msg::Measure(Measure { sid: 9, program_uid: 1, fields: f }));
    assert!(matches!(&t.poll()[..], [DatapathEvent::FlowStarted { .. }, DatapathEvent::Report { .. }]));
    assert_eq!(t.dp.stats().foreign_program_reports, 2);
}

#[test]
fn a_known_flow_switched_back_to_the_fold_has_lost_its_settings() {
    let mut t = T::new();
    t.create(3);
    t.sent();
    // Another agent re-programmed it meanwhile: switching back resets the fold's registers.
    t.push(Msg::Measure(Measure { sid: 3, program_uid: 7, fields: vec![1] }));
    let ev = t.poll();
    assert!(matches!(&ev[..], [DatapathEvent::SettingsLost { flow }] if flow.sid == 3), "{ev:?}");
    assert!(t.sent().iter().any(|m| matches!(m, Msg::ChangeProg(c) if c.sid == 3)));
}

fn cwnd_of(m: &Msg) -> Option<u64> {
    match m {
        Msg::UpdateFields(UpdateFields { fields, .. }) => {
            fields.iter().find(|f| f.kind == RegKind::Implicit && f.index == implicit::CWND).map(|f| f.value)
        }
        _ => None,
    }
}

#[test]
fn only_the_changed_fields_are_sent_and_a_failed_send_is_an_error() {
    let mut t = T::new();
    t.create(1);
    t.sent();
    t.apply(1, Command { cwnd_bytes: Some(30_000), ..Command::default() }).unwrap();
    let sent = t.sent();
    assert_eq!(sent.iter().filter_map(cwnd_of).collect::<Vec<_>>(), vec![30_000]);
    let Msg::UpdateFields(u) = &sent[0] else { panic!("{sent:?}") };
    let mss = t.dp.fold.program.control_update(fold::CTL_MSS_BYTES, 1448).unwrap();
    assert_eq!(u.fields.len(), 2, "the window, and once the flow's MSS for the fold: {u:?}");
    assert!(u.fields.contains(&mss), "{u:?}");
    t.apply(1, Command { cwnd_bytes: Some(31_000), ..Command::default() }).unwrap();
    let sent = t.sent();
    let Msg::UpdateFields(u) = &sent[0] else { panic!("{sent:?}") };
    assert_eq!(u.fields.len(), 1, "nothing but the window: {u:?}");
    t.apply(1, Command::default()).unwrap();
    assert!(t.sent().is_empty(), "nothing changed, nothing sent");

    // The send fails and says so (the runtime's latch retries); the adapter does not resend on
    // its own.
    t.wire.0.borrow_mut().fail.push_back(libc::EPIPE);
    assert!(matches!(
        t.apply(1, Command { cwnd_bytes: Some(40_000), ..Command::default() }),
        Err(ApplyError::Unreachable { .. })
    ));
    t.dp.tick(t.now);
    assert!(t.sent().is_empty());
    assert!(matches!(t.apply(9, Command { cwnd_bytes: Some(1), ..Command::default() }), Err(ApplyError::UnknownFlow(_))));
    let e = t.apply(1, Command { report: Some(ReportPolicy::PerRtt { rtts: 1.0 }), ..Command::default() }).unwrap_err();
    assert!(e.to_string().contains("cannot count RTTs"), "{e}");
}

#[test]
fn oversized_values_are_clamped_to_libccp_registers() {
    let mut t = T::new();
    t.create(1);
    t.sent();
    let cmd = Command { cwnd_bytes: Some(1 << 40), pacing: Some(PacingCommand::BytesPerSec(1 << 40)), ..Command::default() };
    t.apply(1, cmd).unwrap();
    let sent = t.sent();
    let Msg::UpdateFields(u) = &sent[0] else { panic!("{sent:?}") };
    assert!(u.fields.iter().all(|f| f.value <= u64::from(u32::MAX)), "{u:?}");
}

#[test]
fn silent_flow_is_switched_again_with_backoff() {
    let mut t = T::new();
    t.create(1);
    t.sent();
    let t0 = t.now;
    let change_progs = |t: &T| t.sent().iter().filter(|m| matches!(m, Msg::ChangeProg(_))).count();
    t.dp.tick(t0 + Duration::from_millis(100));
    assert_eq!(change_progs(&t), 0);
    t.dp.tick(t0 + Duration::from_millis(300));
    assert_eq!(change_progs(&t), 1, "silent past 250 ms: switched again");
    assert!(matches!(&t.poll()[..], [DatapathEvent::SettingsLost { .. }]), "the switch reset the fold's registers");
    t.dp.tick(t0 + Duration::from_millis(600));
    assert_eq!(change_progs(&t), 0, "backoff doubled to 500 ms");
    t.dp.tick(t0 + Duration::from_millis(850));
    assert_eq!(change_progs(&t), 1);
    // A report ends the retries.
    let f = t.fields(&[("cwnd_bytes", 14480)]);
    t.push(Msg::Measure(Measure { sid: 1, program_uid: 1, fields: f }));
    t.poll();
    t.dp.tick(t0 + Duration::from_secs(30));
    assert_eq!(change_progs(&t), 0);
}

#[test]
fn slow_report_interval_is_not_mistaken_for_silence() {
    let mut t = T::new();
    t.create(1);
    t.apply(1, Command { report: Some(ReportPolicy::EveryUs(1_000_000)), ..Command::default() }).unwrap();
    t.sent();
    t.dp.tick(t.now + Duration::from_secs(2));
    assert!(!t.sent().iter().any(|m| matches!(m, Msg::ChangeProg(_))), "3 intervals have not passed");
}

#[test]
fn vanished_datapath_closes_its_flows() {
    let mut t = T::new();
    t.create(1);
    t.create(2);
    t.wire.0.borrow_mut().fail.push_back(libc::ECONNREFUSED);
    let err = t.apply(1, Command { cwnd_bytes: Some(1), ..Command::default() });
    assert!(err.is_err());
    let mut ev = t.poll();
    ev.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert!(ev.iter().all(|e| matches!(e, DatapathEvent::FlowClosed { reason: CloseReason::DatapathGone, .. })));
}

#[test]
fn garbage_is_counted_and_survived() {
    let mut t = T::new();
    t.push_raw(vec![0xde, 0xad]);
    t.push_raw(vec![0, 0, 10, 0, 1, 0, 0, 0, 0, 0]); // a CREATE far too short
    t.push(Msg::Install(t.dp.fold.program.install(1))); // agent-bound type from a datapath
    t.wire.0.borrow_mut().inbox.push_back((Msg::Ready(Ready { datapath_id: 1 }).to_bytes().unwrap(), None, None));
    let ev = t.create(5);
    assert!(matches!(&ev[..], [DatapathEvent::FlowStarted { .. }]), "{ev:?}");
    let s = t.dp.stats();
    assert_eq!(s.decode_errors, 2);
    assert_eq!(s.unexpected_messages, 1);
    assert_eq!(s.unreplyable_datagrams, 1);
}

#[test]
fn ready_again_means_the_datapath_restarted() {
    let mut t = T::new();
    t.create(1);
    t.sent();
    t.push(Msg::Ready(Ready { datapath_id: 1 }));
    let ev = t.poll();
    assert!(matches!(&ev[..], [DatapathEvent::FlowClosed { reason: CloseReason::DatapathGone, .. }]), "{ev:?}");
    assert!(is_install(&t.sent()[0]), "reinstalled");
}

#[test]
fn a_vanished_datapath_is_forgotten_and_comes_back_as_a_new_peer() {
    let mut t = T::new();
    t.create(1);
    assert_eq!(t.dp.peer_count(), 1);
    t.wire.0.borrow_mut().fail.push_back(libc::ENOENT);
    assert!(t.apply(1, Command { cwnd_bytes: Some(1), ..Command::default() }).is_err());
    let ev = t.poll();
    assert!(matches!(&ev[..], [DatapathEvent::FlowClosed { reason: CloseReason::DatapathGone, .. }]), "{ev:?}");
    assert_eq!(t.dp.peer_count(), 0, "the dead peer is dropped");
    let ev = t.create(1);
    let [DatapathEvent::FlowStarted { flow, .. }] = &ev[..] else { panic!("{ev:?}") };
    assert_eq!(flow.peer, 1, "a new peer id: stale references to the old one cannot reach it");
    assert_eq!(t.dp.peer_count(), 1);
    assert!(t.sent().iter().any(is_install), "the new peer gets the fold");
}

#[test]
fn a_peer_gone_before_it_has_flows_is_forgotten_too() {
    let mut t = T::new();
    t.wire.0.borrow_mut().fail.push_back(libc::ECONNREFUSED);
    t.push(Msg::Ready(Ready { datapath_id: 1 }));
    assert!(t.poll().is_empty());
    assert_eq!(t.dp.peer_count(), 0);
}

/// A full datapath queue is backpressure, not a failure: the program switch of a flow created
/// meanwhile waits, and once the peer has room it goes first, then the runtime is told
/// (`Writable`) to apply the settings that waited; nothing is resent before.
#[test]
fn a_full_queue_holds_messages_until_the_peer_has_room() {
    let mut t = T::new();
    t.create(1);
    t.sent();
    t.wire.0.borrow_mut().full = true;
    assert!(matches!(
        t.apply(1, Command { cwnd_bytes: Some(40_000), ..Command::default() }),
        Err(ApplyError::Backpressure(f)) if f.sid == 1
    ));
    let ev = t.create(2);
    assert!(matches!(&ev[..], [DatapathEvent::FlowStarted { flow, .. }] if flow.sid == 2), "{ev:?}");
    assert!(t.poll().is_empty(), "no room yet: nothing to resume");
    assert!(t.sent().is_empty());
    assert_eq!(t.dp.stats().send_errors, 0, "a full queue is not a send error");
    assert!(t.dp.stats().send_backpressure >= 2);

    t.wire.0.borrow_mut().writable = true;
    let ev = t.poll();
    assert!(matches!(&ev[..], [DatapathEvent::Writable { peer: 0 }]), "{ev:?}");
    let sent = t.sent();
    assert!(matches!(&sent[..], [Msg::ChangeProg(c)] if c.sid == 2), "the waiting switch, once: {sent:?}");
    t.apply(1, Command { cwnd_bytes: Some(40_000), ..Command::default() }).unwrap();
    assert_eq!(t.sent().iter().filter_map(cwnd_of).collect::<Vec<_>>(), vec![40_000]);
}

/// A flow belongs to the user whose process announced it: the sender of its CREATE, or of the
/// report it was adopted from; the datapath's address says nothing of it.
#[test]
fn a_flow_belongs_to_the_user_whose_process_announced_it() {
    let mut t = T::new();
    t.push_from(create_msg(1), DP, 1000);
    let f = t.fields(&[("cwnd_bytes", 20_000), ("acked_bytes", 1448), ("acked_pkts", 1)]);
    t.push_from(Msg::Measure(Measure { sid: 2, program_uid: 1, fields: f }), "/tmp/ccp/other", 1001);
    // The next datapath to send from the first one's address is another user's process.
    t.push_from(create_msg(3), DP, 0);
    let owners: Vec<(u32, Option<u32>)> = t
        .poll()
        .iter()
        .filter_map(|e| match e {
            DatapathEvent::FlowStarted { flow, info } => Some((flow.sid, info.uid)),
            _ => None,
        })
        .collect();
    assert_eq!(owners, vec![(1, Some(1000)), (2, Some(1001)), (3, Some(0))]);
}
