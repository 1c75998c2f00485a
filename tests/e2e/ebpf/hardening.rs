//! Windows that must never freeze or drift: control slots shared by fids a slot-count apart, a
//! flow the program holds no state for, IPv6 flows under address rules, and 1,000 flows through
//! an agent's kill -9 and restart.

use std::time::{Duration, Instant};

use super::farm::Farm;
use super::support::*;

/// Polls `cond` every 50 ms until it holds or `within` passes; returns how long it took.
fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if cond() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn all_at(farm: &Farm, v4: u32, v6: u32) -> bool {
    farm.cwnds().iter().all(|(_, is6, c)| *c == if *is6 { v6 } else { v4 })
}

#[test]
fn flows_whose_fids_share_a_home_slot_each_keep_their_own_control_entry() {
    if skip_without_root("flows_whose_fids_share_a_home_slot_each_keep_their_own_control_entry") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("slots");
    // Four control slots: fid 5's home is fid 1's.
    let setup =
        AgentSetup::new(&tag, "max_flows = 4\n[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 5\n");
    let agent = setup.start();
    let farm = Farm::new(&format!("ccpslot{tag}"), &setup.name);
    farm.add(4, 0);
    assert!(wait_until(Duration::from_secs(5), || all_at(&farm, 5, 5)).is_some(), "{:?}\n{}", farm.cwnds(), agent.log());
    // fids 2 and 3 close; fids 5 and 6 start: 5's home slot is held by the live fid 1.
    farm.close(&[1, 2]);
    farm.add(2, 0);
    assert!(wait_until(Duration::from_secs(5), || all_at(&farm, 5, 5)).is_some(), "{:?}\n{}", farm.cwnds(), agent.log());
    // And it stays so: a flow that lost its entry would grow on the fallback within this time.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(50));
        let c = farm.cwnds();
        assert!(c.iter().all(|(_, _, w)| *w == 5), "every live flow holds the commanded window: {c:?}");
    }
    // A fifth live flow has no slot: it runs on the fallback (and is counted), nothing stalls.
    let extra = farm.add(1, 0)[0];
    let grew = wait_until(Duration::from_secs(3), || farm.cwnds().iter().any(|(i, _, w)| *i == extra && *w > 10));
    assert!(grew.is_some(), "the flow without a slot runs on the fallback: {:?}", farm.cwnds());
    assert!(all_at_except(&farm, extra, 5), "{:?}", farm.cwnds());
    drop(farm);
    let stopped = agent.stop();
    assert!(stopped.status.success(), "{}", stopped.log);
}

fn all_at_except(farm: &Farm, skip: usize, w: u32) -> bool {
    farm.cwnds().iter().filter(|(i, _, _)| *i != skip).all(|(_, _, c)| *c == w)
}

/// Deletes the program's per-flow state of socket `fd` through the pinned `flows` map, as if
/// its socket storage had never been allocated.
fn delete_flow_state(pin_dir: &std::path::Path, fd: i32) {
    let path = std::ffi::CString::new(pin_dir.join("flows").to_str().unwrap()).unwrap();
    let mut attr = [0u64; 16];
    attr[0] = path.as_ptr() as u64; // pathname; bpf_fd and file_flags 0
                                    // SAFETY: BPF_OBJ_GET with a valid attr (128 bytes, zero beyond the path pointer).
    let map_fd = unsafe { libc::syscall(libc::SYS_bpf, 7, attr.as_mut_ptr(), 128) } as i32;
    assert!(map_fd >= 0, "BPF_OBJ_GET {}: {}", pin_dir.display(), std::io::Error::last_os_error());
    let key: i32 = fd;
    let mut attr = [0u64; 16];
    attr[0] = map_fd as u64; // map_fd, then 4 bytes of padding
    attr[1] = &key as *const i32 as u64;
    // SAFETY: BPF_MAP_DELETE_ELEM (3) on a socket-storage map keyed by a socket fd.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, 3, attr.as_mut_ptr(), 128) };
    let err = std::io::Error::last_os_error();
    // SAFETY: closing the map fd we opened.
    unsafe { libc::close(map_fd) };
    assert_eq!(rc, 0, "deleting the flow's socket storage: {err}");
}

#[test]
fn a_flow_the_program_holds_no_state_for_keeps_a_moving_window() {
    if skip_without_root("a_flow_the_program_holds_no_state_for_keeps_a_moving_window") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("nostate");
    let setup = AgentSetup::new(&tag, "[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 4\n");
    let agent = setup.start();
    let farm = Farm::new(&format!("ccpnost{tag}"), &setup.name);
    let i = farm.add(1, 0)[0];
    assert!(wait_until(Duration::from_secs(5), || all_at(&farm, 4, 4)).is_some(), "{:?}", farm.cwnds());
    delete_flow_state(&setup.pin_dir(), farm.client_fd(i));
    // cong_control now finds no state: before, it returned at once and the window stayed at 4
    // for good; now the stack's Reno steers it, and a window-limited flow grows.
    let grew = wait_until(Duration::from_secs(3), || farm.cwnds()[0].2 > 8);
    assert!(grew.is_some(), "the window moves without per-flow state: {:?}", farm.cwnds());
    drop(farm);
    let stopped = agent.stop();
    assert!(stopped.status.success(), "{}", stopped.log);
}

#[test]
fn ipv6_flows_match_address_rules() {
    if skip_without_root("ipv6_flows_match_address_rules") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("v6rule");
    let setup = AgentSetup::new(
        &tag,
        "[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 4\n\
         [[rules]]\nname = \"v6-loopback\"\nmatch = { dst_addr = \"::1/128\" }\nalgorithm = \"constant\"\nparams = { cwnd_pkts = 7 }\n",
    );
    let agent = setup.start();
    let farm = Farm::new(&format!("ccpv6r{tag}"), &setup.name);
    farm.add(2, 2);
    let ok = wait_until(Duration::from_secs(5), || all_at(&farm, 4, 7));
    assert!(ok.is_some(), "IPv4 flows on the default (4), IPv6 ones on the rule (7): {:?}\n{}", farm.cwnds(), agent.log());
    drop(farm);
    let stopped = agent.stop();
    assert!(stopped.log.contains("chosen_by=v6-loopback"), "{}", stopped.log);
}

/// The restart figure: 1,000 live flows (500 IPv4, 500 IPv6, each on its rule's window); the
/// agent is killed with SIGKILL: every window must move within 2 s (the fallback took over),
/// and a restarted agent must re-adopt every flow with its rule.
#[test]
fn after_kill_9_under_1000_flows_no_window_freezes_and_every_flow_is_readopted_with_its_rule() {
    if skip_without_root("after_kill_9_under_1000_flows_no_window_freezes_and_every_flow_is_readopted_with_its_rule") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("restart");
    let config = "silence_timeout_ms = 1000\n[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 4\n\
         [[rules]]\nname = \"v6\"\nmatch = { dst_addr = \"::1/128\" }\nalgorithm = \"constant\"\nparams = { cwnd_pkts = 6 }\n";
    let setup = AgentSetup::new(&tag, config);
    let agent = setup.start_with("info", &[]);
    let farm = Farm::new(&format!("ccprst{tag}"), &setup.name);
    farm.add(500, 500);
    let first = wait_until(Duration::from_secs(20), || all_at(&farm, 4, 6));
    assert!(first.is_some(), "1,000 flows under control: {:?}", farm.cwnds().iter().filter(|c| c.2 != 4 && c.2 != 6).count());

    let before = farm.cwnds();
    agent.kill9();
    let killed = Instant::now();
    let mut moved = vec![false; before.len()];
    let all_moved = wait_until(Duration::from_secs(2), || {
        for (k, (_, _, w)) in farm.cwnds().iter().enumerate() {
            moved[k] |= *w != before[k].2;
        }
        moved.iter().all(|m| *m)
    });
    let frozen = moved.iter().filter(|m| !**m).count();
    eprintln!("restart figure: {frozen} of {} windows frozen 2 s after kill -9 (all moved after {all_moved:?})", before.len());
    assert_eq!(frozen, 0, "every window moves within 2 s of the agent's death");
    assert!(killed.elapsed() < Duration::from_secs(3));

    let agent = setup.start_with("info", &[]);
    let readopted = wait_until(Duration::from_secs(15), || all_at(&farm, 4, 6));
    let off = farm.cwnds().iter().filter(|(_, v6, w)| *w != if *v6 { 6 } else { 4 }).count();
    eprintln!("restart figure: {} of 1000 flows back on their rule's window after {readopted:?}", 1000 - off);
    assert!(readopted.is_some(), "{off} flows not re-adopted with their rule");
    drop(farm);
    let stopped = agent.stop();
    assert!(stopped.status.success());
    assert!(stopped.log.contains("adopted_maps=true"), "{}", stopped.log);
}

/// `ctl attach` through the running agent: the switch runs on a thread of its own (the loop keeps
/// serving), its answer comes when it is done, and a user-named path that is not a namespace —
/// a FIFO, which a plain open would block on forever — is refused at once.
#[test]
fn ctl_attach_runs_off_the_loop_and_a_fifo_is_not_a_namespace() {
    if skip_without_root("ctl_attach_runs_off_the_loop_and_a_fifo_is_not_a_namespace") {
        return;
    }
    use ccp_agent::control::client::call;
    use ccp_agent::control::protocol::Request;
    use ccp_agent::datapath::Selection;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = tag("ctlatt");
    let setup = AgentSetup::new(&tag, "[default]\nalgorithm = \"constant\"\n[algorithms.constant]\ncwnd_pkts = 5\n");
    let agent = setup.start();
    let farm = Farm::new(&format!("ccpcat{tag}"), "cubic");
    farm.add(2, 0);
    std::thread::sleep(Duration::from_millis(300));
    assert!(farm.cwnds().iter().all(|(_, _, w)| *w > 5), "cubic grows first: {:?}", farm.cwnds());

    let socket = setup.control_socket();
    let netns = std::path::PathBuf::from(format!("/run/netns/{}", farm.ns));
    let spec = Selection { ports: vec![farm.listen4.port()], netns: vec![netns], ..Selection::default() };
    let r = call(&socket, &Request::Attach { spec }).expect("ctl attach");
    assert!(r.ok, "{r:?}");
    assert!(r.result["switched"].as_array().is_some_and(|s| s.len() >= 2), "{r:?}");
    assert!(
        wait_until(Duration::from_secs(5), || all_at(&farm, 5, 5)).is_some(),
        "attached flows under the agent: {:?}",
        farm.cwnds()
    );

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("not-a-netns");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let t = Instant::now();
    let spec = Selection { all: true, netns: vec![fifo.clone()], ..Selection::default() };
    let r = call(&socket, &Request::Attach { spec }).expect("an answer, not a hang");
    assert!(!r.ok && r.error.as_deref().is_some_and(|e| e.contains("not a network namespace")), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "refused at once: {:?}", t.elapsed());
    let r = call(&socket, &Request::Status { summary: true, offset: None, limit: None }).expect("status after");
    assert!(r.ok);
    drop(farm);
    let stopped = agent.stop();
    assert!(stopped.status.success(), "{}", stopped.log);
}
