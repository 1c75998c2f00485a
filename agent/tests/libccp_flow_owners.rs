//! Whose flows a libccp datapath announces, end to end: the kernel's credentials on each
//! datagram (`SCM_CREDENTIALS`), the unix transport, the adapter and the flow table's admission
//! (`[safety] max_flows_per_uid`). Datapaths of other users are played by this process claiming
//! their uids, which only root may: run as another user, these tests skip.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;

use ccp_agent::datapath::libccp::transport::Transport;
use ccp_agent::datapath::libccp::unix::UnixTransport;
use ccp_agent::datapath::libccp::{AddressOrder, LibccpDatapath};
use ccp_agent::datapath::{Datapath, FlowRef};
use ccp_agent::flows::admission::FlowLimits;
use ccp_agent::flows::FlowTable;
use ccp_wire::{Create, Msg};

fn skip_unless_root(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {test}: claiming or running as another uid needs root");
        return true;
    }
    false
}

/// The address of the socket at `path`.
fn sockaddr_of(path: &Path) -> libc::sockaddr_un {
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, b) in sa.sun_path.iter_mut().zip(path.as_os_str().as_bytes()) {
        *d = *b as libc::c_char;
    }
    sa
}

/// Sends `payload` from the unix datagram socket `fd` to `to`, with the credentials `claim`
/// attached when given (else the kernel attaches the sender's own). Allocates nothing: it runs
/// in a forked child too.
fn send_claiming(fd: i32, to: &libc::sockaddr_un, payload: &[u8], claim: Option<libc::ucred>) -> io::Result<()> {
    let mut control = [0u64; 4];
    let mut iov = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
    // SAFETY: msghdr is plain old data; every pointer set below is valid for the call, and the
    // credentials fit `control` (CMSG_SPACE(12) = 32 bytes).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (to as *const libc::sockaddr_un).cast_mut().cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if let Some(creds) = claim {
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::ucred>() as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_CREDENTIALS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::ucred>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::ucred>(), creds);
        }
        if libc::sendmsg(fd, &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// This process's pid with `uid` (and its group): what a datapath run by `uid` attaches.
fn as_uid(uid: u32) -> libc::ucred {
    // SAFETY: getpid cannot fail.
    libc::ucred { pid: unsafe { libc::getpid() }, uid, gid: uid }
}

fn create(sid: u32) -> Vec<u8> {
    Msg::Create(Create {
        sid,
        init_cwnd: 14480,
        mss: 1448,
        src_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1)),
        src_port: 40000 + sid,
        dst_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 2)),
        dst_port: 5201,
        cong_alg: None,
    })
    .to_bytes()
    .unwrap()
}

/// `[safety] max_flows_per_uid` holds on the libccp unix datapath: one user's datapaths
/// together take at most that many flows (the rest run on their own fallback), while another
/// user's, and root's, are admitted as before.
#[test]
fn one_users_datapaths_take_at_most_max_flows_per_uid_and_other_users_are_unaffected() {
    if skip_unless_root("one_users_datapaths_take_at_most_max_flows_per_uid_and_other_users_are_unaffected") {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("ccp");
    let transport = UnixTransport::bind(&dir, "agent", None).unwrap();
    let agent = sockaddr_of(transport.path());
    let mut dp = LibccpDatapath::new(transport, AddressOrder::Host).unwrap();
    let choose = |name| ccp_algorithms::registry::choose(name, toml::Table::new(), "test").unwrap();
    let policy = ccp_agent::rules::Policy { default: choose("reno"), rules: Vec::new(), fallback: choose("reno") };
    let mut table = FlowTable::new(policy, ccp_contract::Limits::default(), 1_000_000);
    table.set_flow_limits(FlowLimits { max_flows_per_uid: 2, ..FlowLimits::default() });

    // uid 1000 runs two datapaths with two flows each; uid 1001 one with two, root one with three.
    let mut sockets = Vec::new();
    for (name, uid, sids) in [("a", 1000, 1..3), ("b", 1000, 3..5), ("c", 1001, 5..7), ("d", 0, 7..10)] {
        let s = std::os::unix::net::UnixDatagram::bind(dir.join(name)).unwrap();
        for sid in sids {
            send_claiming(s.as_raw_fd(), &agent, &create(sid), Some(as_uid(uid))).unwrap();
        }
        sockets.push(s);
    }
    let now = ccp_agent::clock::Clock::start().now();
    let mut events = Vec::new();
    dp.poll_events(&|f| table.contains(0, f), &mut events, usize::MAX, now);
    for e in events {
        table.handle(0, &mut dp, e, now, None);
    }
    let admitted = |uid: u32| table.iter().filter(|(_, f)| f.info.uid == Some(uid)).count();
    assert_eq!(admitted(1000), 2, "uid 1000 holds max_flows_per_uid flows across both of its datapaths");
    assert_eq!(admitted(1001), 2, "another user is not held to uid 1000's count");
    assert_eq!(admitted(0), 3, "root's flows count towards the total only");
    assert_eq!(table.admission.refusals.max_flows_per_uid, 2);
    // uid 1000's second datapath (peer 1) was refused: its flows are known as refused, not adopted.
    assert!(table.contains(0, FlowRef { peer: 1, sid: 3 }) && table.get(&(0, FlowRef { peer: 1, sid: 3 })).is_none());
}

/// What makes the uid worth counting flows by: a process of an unprivileged user cannot claim
/// another user's uid (the kernel refuses the send), and what it sends without a claim arrives
/// with its own.
#[test]
fn an_unprivileged_sender_cannot_claim_another_users_uid() {
    if skip_unless_root("an_unprivileged_sender_cannot_claim_another_users_uid") {
        return;
    }
    use std::os::unix::process::CommandExt;
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("ccp");
    let mut t = UnixTransport::bind(&dir, "agent", None).unwrap();
    // Let uid 65534 reach the agent's socket, as a configured group would.
    for (p, mode) in [(base.path(), 0o711), (dir.as_path(), 0o711), (t.path(), 0o666)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let to = sockaddr_of(t.path());
    // A child of uid 65534 sends just before exec: claiming root, then (second child) not.
    let send_as_nobody = |claim_root: bool| {
        let mut child = std::process::Command::new("/bin/true");
        child.uid(65534).gid(65534);
        // SAFETY: the closure only makes system calls and writes stack memory.
        unsafe {
            child.pre_exec(move || {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let claim = claim_root.then(|| libc::ucred { pid: libc::getpid(), uid: 0, gid: 65534 });
                send_claiming(fd, &to, b"dp", claim)
            });
        }
        child.status().map(|s| assert!(s.success()))
    };
    let refused = send_as_nobody(true).expect_err("the kernel refuses a claim of uid 0 from uid 65534");
    assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "{refused}");
    send_as_nobody(false).expect("an unclaimed send goes through");
    let mut buf = [0u8; 64];
    let got = t.recv(&mut buf, Instant::now()).unwrap().expect("the second child's datagram, only");
    assert_eq!((&buf[..got.len], got.uid), (&b"dp"[..], Some(65534)));
    assert!(t.recv(&mut buf, Instant::now()).unwrap().is_none());
}
