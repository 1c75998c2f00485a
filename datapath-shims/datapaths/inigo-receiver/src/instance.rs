//! Enabling, replacing, reading and disabling the receiver on one device of one network namespace.
//!
//! An instance is a directory `/sys/fs/bpf/ccp-inigo-receiver/<netns>/<device>` (`<netns>` is the
//! `ip netns` name, or `netns-<inode>` for a namespace given by another path) holding:
//!
//! | pin | what |
//! |---|---|
//! | `settings` | the settings array (also records the namespace, ifindex and map size) |
//! | `conns` | per-connection state, LRU hash keyed by the 4-tuple |
//! | `counters` | per-CPU event counters |
//! | `link-ingress` | the TCX ingress link (always) |
//! | `link-egress` | the TCX egress link (window mode only) |
//!
//! TCX links hold the programs: there is no qdisc or tc filter to create or remove, and the
//! programs keep running after the command exits because the links are pinned. `disable` detaches
//! both links and removes the pins and the directories (the kernel frees programs and maps with
//! their last reference). A file lock on the base directory serialises commands.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use ccp_ebpf::netns::Netns;
use libbpf_rs::{libbpf_sys, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, OpenObject};
use serde::Serialize;

use crate::counters::Counters;
use crate::layout::{Conn, Key, Pod, RawSettings, LAYOUT, MAGIC, NUM_COUNTERS};
use crate::settings::{Capacity, Mode, Settings};
use crate::{bpf_err, Error, OBJECT};

/// Where instances live (a bpf filesystem; mounted at /sys/fs/bpf on first use if need be).
pub const PIN_BASE: &str = "/sys/fs/bpf/ccp-inigo-receiver";

const MAPS: [&str; 3] = ["settings", "conns", "counters"];
const LINK_INGRESS: &str = "link-ingress";
const LINK_EGRESS: &str = "link-egress";
const PROG_INGRESS: &str = "inigo_ingress";
const PROG_EGRESS: &str = "inigo_egress";
/// ARPHRD_LOOPBACK: lo carries an Ethernet header.
const ARPHRD_LOOPBACK: u16 = 772;
/// ARPHRD_RAWIP.
const ARPHRD_RAWIP: u16 = 519;

/// A device in a network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The namespace: /run/netns/NAME for `ip netns` NAME, or any nsfs path (/proc/PID/ns/net).
    pub netns: PathBuf,
    pub dev: String,
}

/// What `enable` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnableOutcome {
    /// Loaded, attached and pinned.
    Created,
    /// Already enabled with exactly these settings: nothing changed.
    Unchanged,
    /// Already enabled: the settings were replaced in place (the programs kept running;
    /// per-connection state restarts). Each change is "name old -> new".
    Replaced(Vec<String>),
    /// Pins were left by an instance whose namespace or device is gone (or was recreated); they
    /// were removed and the receiver enabled afresh.
    ReplacedStale(String),
}

#[derive(Debug, Clone)]
pub struct EnableReport {
    pub outcome: EnableOutcome,
    pub pin_dir: PathBuf,
    pub ifindex: u32,
}

#[derive(Debug, Clone, Default)]
pub struct DisableReport {
    /// The pins removed (links first).
    pub removed: Vec<PathBuf>,
    /// Set when nothing was enabled there (disable is then a no-op).
    pub not_enabled: bool,
    /// Set when the namespace is gone and its instance's pins were removed by name.
    pub note: Option<String>,
}

/// One instance's settings, links and counters.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub netns: PathBuf,
    pub dev: String,
    pub pin_dir: PathBuf,
    pub ifindex: u32,
    pub settings: Settings,
    pub capacity: Capacity,
    /// Whether the ingress link is attached to the device.
    pub ingress_attached: bool,
    /// Window mode: whether the egress link is attached (None: marking mode has none).
    pub egress_attached: Option<bool>,
    /// Connections with state now.
    pub connections: usize,
    pub counters: Counters,
}

fn require_root() -> Result<(), Error> {
    if crate::is_root() {
        Ok(())
    } else {
        Err(Error::NotRoot)
    }
}

fn open_netns(path: &Path) -> Result<Netns, Error> {
    Netns::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::NamespaceMissing(path.to_path_buf()),
        _ => Error::Io(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    })
}

/// The directory name of a namespace: its `ip netns` name, else `netns-<inode>`.
fn label(path: &Path, ino: Option<u64>) -> Option<String> {
    if path.parent() == Some(Path::new("/run/netns")) {
        return path.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    ino.map(|i| format!("netns-{i}"))
}

fn check_dev_name(dev: &str) -> Result<(), Error> {
    if dev.is_empty() || dev.len() >= libc::IFNAMSIZ || dev.contains(['/', '\0']) || dev == "." || dev == ".." {
        return Err(Error::Settings(format!("dev: {dev:?} is not a device name")));
    }
    Ok(())
}

/// ifindex and link-layer header length of a device, looked up inside `netns`.
struct DevInfo {
    ifindex: u32,
    l2_len: u32,
}

fn device(netns: &Netns, dev: &str) -> Result<DevInfo, Error> {
    let name = dev.to_string();
    let r = netns.run(move || -> io::Result<(i32, u16)> {
        // SAFETY: plain socket(2); the fd is owned right away.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd we own.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ifreq is plain old data.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
            *d = *s as libc::c_char;
        }
        // SAFETY: valid fd and ifreq; the kernel fills the union's ifindex.
        if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFINDEX, &mut req) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: SIOCGIFINDEX wrote ifru_ifindex.
        let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };
        // SAFETY: as above; SIOCGIFHWADDR writes ifru_hwaddr (sa_family = the ARPHRD type).
        if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: SIOCGIFHWADDR wrote ifru_hwaddr.
        let ty = unsafe { req.ifr_ifru.ifru_hwaddr.sa_family };
        Ok((ifindex, ty))
    })?;
    let (ifindex, ty) = r.map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV) => Error::DeviceMissing { dev: dev.to_string(), netns: netns.path.clone() },
        _ => Error::Io(e),
    })?;
    let l2_len = match ty {
        libc::ARPHRD_ETHER | ARPHRD_LOOPBACK => 14,
        libc::ARPHRD_NONE | ARPHRD_RAWIP => 0,
        other => {
            return Err(Error::UnsupportedDevice {
                dev: dev.to_string(),
                why: format!("link type {other} is neither Ethernet nor raw IP (TUN)"),
            })
        }
    };
    Ok(DevInfo { ifindex: ifindex as u32, l2_len })
}

/// An exclusive lock on the base directory, held while a command reads or changes instances.
struct Lock {
    _dir: File,
}

impl Lock {
    fn take() -> Result<Lock, Error> {
        let base = Path::new(PIN_BASE);
        loop {
            ccp_ebpf::bpffs::ensure_dir(base)?;
            let dir = match File::open(base) {
                Ok(d) => d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // removed meanwhile
                Err(e) => return Err(e.into()),
            };
            // SAFETY: flock on an fd we own.
            if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(io::Error::last_os_error().into());
            }
            // The previous holder may have removed the (then empty) directory: lock the live one.
            let held = dir.metadata()?;
            match std::fs::metadata(base) {
                Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => return Ok(Lock { _dir: dir }),
                _ => continue,
            }
        }
    }
}

fn cpath(p: &Path) -> Result<CString, Error> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Error::Settings(format!("path {} has a NUL byte", p.display())))
}

/// Opens a pinned object (map or link) by path.
fn obj_get(p: &Path) -> Result<OwnedFd, Error> {
    let c = cpath(p)?;
    // SAFETY: a valid C string; a non-negative return is a new fd we own.
    let fd = unsafe { libbpf_sys::bpf_obj_get(c.as_ptr()) };
    if fd < 0 {
        return Err(Error::Io(io::Error::from_raw_os_error(-fd)));
    }
    // SAFETY: as above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The ifindex a pinned TCX link is attached to (0 once its device is gone).
fn link_ifindex(p: &Path) -> Option<u32> {
    let fd = obj_get(p).ok()?;
    match libbpf_rs::query::LinkInfo::from_fd(fd.as_fd()).ok()?.info {
        libbpf_rs::query::LinkTypeInfo::Tcx(t) => Some(t.ifindex),
        _ => None,
    }
}

fn read_settings(dir: &Path) -> Result<RawSettings, Error> {
    let map = MapHandle::from_pinned_path(dir.join("settings")).map_err(bpf_err("opening the pinned settings"))?;
    let v = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(bpf_err("reading the settings"))?
        .ok_or_else(|| Error::Bpf("the settings map is empty".into()))?;
    RawSettings::from_bytes(&v).ok_or_else(|| Error::Bpf("the settings map holds another layout".into()))
}

fn write_settings(dir: &Path, raw: &RawSettings) -> Result<(), Error> {
    let map = MapHandle::from_pinned_path(dir.join("settings")).map_err(bpf_err("opening the pinned settings"))?;
    map.update(&0u32.to_ne_bytes(), raw.as_bytes(), MapFlags::ANY).map_err(bpf_err("writing the settings"))
}

/// Where the instance for (`netns`, `dev`) lives, if there is one: its own directory, or another
/// label's directory that records the same namespace (the namespace reached by another path).
fn find(netns: &Netns, dev: &str) -> Option<PathBuf> {
    let base = Path::new(PIN_BASE);
    if let Some(l) = label(&netns.path, Some(netns.ino)) {
        let dir = base.join(l).join(dev);
        if dir.exists() {
            return Some(dir);
        }
    }
    for e in std::fs::read_dir(base).ok()?.flatten() {
        let dir = e.path().join(dev);
        if let Ok(raw) = read_settings(&dir) {
            if raw.netns_ino == netns.ino && raw.netns_dev == netns.dev {
                return Some(dir);
            }
        }
    }
    None
}

/// Loads the object. `test_hooks` compiles in the injected clock and socket (tests only);
/// `reuse` makes it use an instance's pinned maps instead of new ones.
pub(crate) fn open_object(max_conns: u32, test_hooks: bool, reuse: Option<&Path>) -> Result<OpenObject, Error> {
    let mut open = ObjectBuilder::default().open_memory(OBJECT).map_err(bpf_err("opening the receiver's BPF object"))?;
    for mut map in open.maps_mut() {
        let name = map.name().to_string_lossy().into_owned();
        if name == "conns" {
            map.set_max_entries(max_conns).map_err(bpf_err("sizing the connection map"))?;
        }
        if name.ends_with(".rodata") {
            let v = map.initial_value_mut().ok_or_else(|| Error::Bpf("the object has no read-only data".into()))?;
            if v.len() != 4 {
                return Err(Error::Bpf("unexpected read-only data in the object".into()));
            }
            v.copy_from_slice(&u32::from(test_hooks).to_ne_bytes());
        }
        if let Some(dir) = reuse {
            if MAPS.contains(&name.as_str()) {
                map.reuse_pinned_map(dir.join(&name)).map_err(bpf_err(format!("reusing the pinned {name} map")))?;
            }
        }
    }
    Ok(open)
}

fn load(open: OpenObject) -> Result<Object, Error> {
    open.load().map_err(bpf_err("loading the receiver's programs (does this kernel have TCX and BTF?)"))
}

/// Attaches `prog` of `object` to the device's TCX hook inside `netns` and pins the link.
fn attach(object: &Object, prog: &str, netns: &Netns, ifindex: u32, egress: bool, pin: &Path) -> Result<(), Error> {
    let p = object.progs().find(|p| p.name() == prog).ok_or_else(|| Error::Bpf(format!("no program {prog}")))?;
    let prog_fd = p.as_fd().as_raw_fd();
    let ty = if egress { libbpf_sys::BPF_TCX_EGRESS } else { libbpf_sys::BPF_TCX_INGRESS };
    // The ifindex is resolved in the calling thread's namespace.
    let fd = netns.run(move || {
        // SAFETY: a loaded program's fd (alive for the call) and no options.
        unsafe { libbpf_sys::bpf_link_create(prog_fd, ifindex as i32, ty, std::ptr::null()) }
    })?;
    if fd < 0 {
        let e = io::Error::from_raw_os_error(-fd);
        let dir = if egress { "egress" } else { "ingress" };
        return Err(Error::Bpf(format!("attaching {prog} to TCX {dir} of ifindex {ifindex}: {e}")));
    }
    // SAFETY: a new link fd we own.
    let link = unsafe { OwnedFd::from_raw_fd(fd) };
    let c = cpath(pin)?;
    // SAFETY: a valid fd and C string.
    let r = unsafe { libbpf_sys::bpf_obj_pin(link.as_raw_fd(), c.as_ptr()) };
    if r < 0 {
        // Dropping the only fd detaches the link.
        return Err(Error::Bpf(format!("pinning {}: {}", pin.display(), io::Error::from_raw_os_error(-r))));
    }
    Ok(())
}

/// Detaches a pinned link (even if some other process still holds it) and removes its pin.
fn remove_link(pin: &Path, removed: &mut Vec<PathBuf>) -> Result<(), Error> {
    if std::fs::symlink_metadata(pin).is_err() {
        return Ok(());
    }
    if let Ok(fd) = obj_get(pin) {
        // SAFETY: a link fd we own. A link whose device is gone is already detached (error ignored).
        let _ = unsafe { libbpf_sys::bpf_link_detach(fd.as_raw_fd()) };
    }
    std::fs::remove_file(pin)?;
    removed.push(pin.to_path_buf());
    Ok(())
}

/// Removes an instance: links, maps, its directory, and the parents it leaves empty.
fn teardown(dir: &Path, removed: &mut Vec<PathBuf>) -> Result<(), Error> {
    remove_link(&dir.join(LINK_INGRESS), removed)?;
    remove_link(&dir.join(LINK_EGRESS), removed)?;
    for m in MAPS {
        let p = dir.join(m);
        if std::fs::symlink_metadata(&p).is_ok() {
            std::fs::remove_file(&p)?;
            removed.push(p);
        }
    }
    remove_empty_dirs(dir);
    Ok(())
}

/// Removes `dir`, then its parents up to and including PIN_BASE, while they are empty.
fn remove_empty_dirs(dir: &Path) {
    let base = Path::new(PIN_BASE);
    let mut d = Some(dir);
    while let Some(cur) = d {
        if !cur.starts_with(base) || std::fs::remove_dir(cur).is_err() {
            return;
        }
        if cur == base {
            return;
        }
        d = cur.parent();
    }
}

/// Loads, pins and attaches a new instance in `dir`; on failure removes what it made.
fn create(dir: &Path, netns: &Netns, dev: &DevInfo, settings: &Settings, cap: Capacity) -> Result<(), Error> {
    let made_parent = !dir.parent().is_some_and(Path::exists);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let r = (|| -> Result<(), Error> {
        let mut object = load(open_object(cap.max_conns, false, None)?)?;
        for mut map in object.maps_mut() {
            let name = map.name().to_string_lossy().into_owned();
            if MAPS.contains(&name.as_str()) {
                map.pin(dir.join(&name)).map_err(bpf_err(format!("pinning the {name} map")))?;
            }
        }
        let mut raw = RawSettings {
            layout: LAYOUT,
            l2_len: dev.l2_len,
            ifindex: dev.ifindex,
            max_conns: cap.max_conns,
            netns_dev: netns.dev,
            netns_ino: netns.ino,
            generation: 1,
            ..RawSettings::default()
        };
        settings.to_raw(&mut raw);
        raw.magic = MAGIC;
        write_settings(dir, &raw)?;
        attach(&object, PROG_INGRESS, netns, dev.ifindex, false, &dir.join(LINK_INGRESS))?;
        if settings.mode == Mode::Window {
            attach(&object, PROG_EGRESS, netns, dev.ifindex, true, &dir.join(LINK_EGRESS))?;
        }
        Ok(())
    })();
    if let Err(e) = r {
        let _ = teardown(dir, &mut Vec::new());
        if made_parent {
            remove_empty_dirs(dir.parent().unwrap_or(dir));
        }
        return Err(e);
    }
    Ok(())
}

/// Makes the egress link match the mode: attached (from a new load sharing the pinned maps) in
/// window mode, removed in marking mode.
fn sync_egress(dir: &Path, netns: &Netns, ifindex: u32, mode: Mode, max_conns: u32) -> Result<(), Error> {
    let pin = dir.join(LINK_EGRESS);
    let present = std::fs::symlink_metadata(&pin).is_ok();
    match (mode, present) {
        (Mode::Window, false) => {
            let object = load(open_object(max_conns, false, Some(dir))?)?;
            attach(&object, PROG_EGRESS, netns, ifindex, true, &pin)
        }
        (Mode::Mark, true) => remove_link(&pin, &mut Vec::new()),
        _ => Ok(()),
    }
}

/// Enables the receiver on `target` with `settings`, or replaces the settings of the instance
/// already there. `capacity` only applies to a new instance (an existing one with another
/// capacity is refused with [`Error::AlreadyEnabled`]).
pub fn enable(target: &Target, settings: &Settings, capacity: Capacity) -> Result<EnableReport, Error> {
    require_root()?;
    settings.validate()?;
    if capacity.max_conns == 0 || capacity.max_conns > 1 << 22 {
        return Err(Error::Settings("max-conns: must be 1..=4194304".into()));
    }
    check_dev_name(&target.dev)?;
    let netns = open_netns(&target.netns)?;
    let dev = device(&netns, &target.dev)?;
    let _lock = Lock::take()?;
    let label = label(&netns.path, Some(netns.ino)).unwrap_or_else(|| format!("netns-{}", netns.ino));
    let fresh_dir = Path::new(PIN_BASE).join(label).join(&target.dev);

    let mut stale = None;
    if let Some(dir) = find(&netns, &target.dev) {
        let raw = read_settings(&dir);
        let alive = |raw: &RawSettings| {
            raw.netns_ino == netns.ino
                && raw.netns_dev == netns.dev
                && raw.ifindex == dev.ifindex
                && link_ifindex(&dir.join(LINK_INGRESS)) == Some(dev.ifindex)
        };
        match raw {
            Ok(raw) if raw.layout != LAYOUT => {
                return Err(Error::AlreadyEnabled {
                    dev: target.dev.clone(),
                    netns: target.netns.clone(),
                    what: format!("by another version of this program (layout {} at {})", raw.layout, dir.display()),
                })
            }
            Ok(raw) if alive(&raw) => {
                if raw.max_conns != capacity.max_conns {
                    return Err(Error::AlreadyEnabled {
                        dev: target.dev.clone(),
                        netns: target.netns.clone(),
                        what: format!("max-conns {} (asked for {})", raw.max_conns, capacity.max_conns),
                    });
                }
                let old = Settings::from_raw(&raw);
                let changes = settings.changes_from(&old);
                if settings.mode == Mode::Window {
                    sync_egress(&dir, &netns, dev.ifindex, Mode::Window, raw.max_conns)?;
                }
                if !changes.is_empty() {
                    let mut new = raw;
                    settings.to_raw(&mut new);
                    new.generation = raw.generation.wrapping_add(1);
                    write_settings(&dir, &new)?;
                }
                if settings.mode == Mode::Mark {
                    sync_egress(&dir, &netns, dev.ifindex, Mode::Mark, raw.max_conns)?;
                }
                let outcome = if changes.is_empty() { EnableOutcome::Unchanged } else { EnableOutcome::Replaced(changes) };
                return Ok(EnableReport { outcome, pin_dir: dir, ifindex: dev.ifindex });
            }
            Ok(_) => {
                stale = Some(format!("{} belonged to a device or namespace that no longer exists", dir.display()));
                teardown(&dir, &mut Vec::new())?;
            }
            Err(e) => {
                stale = Some(format!("{} held an incomplete instance ({e})", dir.display()));
                teardown(&dir, &mut Vec::new())?;
            }
        }
    }
    create(&fresh_dir, &netns, &dev, settings, capacity)?;
    let outcome = match stale {
        Some(why) => EnableOutcome::ReplacedStale(why),
        None => EnableOutcome::Created,
    };
    Ok(EnableReport { outcome, pin_dir: fresh_dir, ifindex: dev.ifindex })
}

/// Disables the receiver on `target`: detaches its links and removes every pin and directory it
/// made. Not enabled: nothing to do (not an error). A namespace that no longer exists is
/// cleaned up by its `ip netns` name.
pub fn disable(target: &Target) -> Result<DisableReport, Error> {
    require_root()?;
    check_dev_name(&target.dev)?;
    let mut report = DisableReport::default();
    let netns = match open_netns(&target.netns) {
        Ok(ns) => ns,
        Err(Error::NamespaceMissing(p)) => {
            let Some(l) = label(&p, None) else { return Err(Error::NamespaceMissing(p)) };
            let _lock = Lock::take()?;
            let dir = Path::new(PIN_BASE).join(l).join(&target.dev);
            if !dir.exists() {
                remove_empty_dirs(Path::new(PIN_BASE));
                return Err(Error::NamespaceMissing(p));
            }
            teardown(&dir, &mut report.removed)?;
            report.note = Some(format!("namespace {} is gone; removed the pins it left", p.display()));
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let _lock = Lock::take()?;
    match find(&netns, &target.dev) {
        Some(dir) => teardown(&dir, &mut report.removed)?,
        None => {
            report.not_enabled = true;
            remove_empty_dirs(Path::new(PIN_BASE));
        }
    }
    Ok(report)
}

/// Settings, links and counters of the instance on `target`.
pub fn status(target: &Target) -> Result<Status, Error> {
    require_root()?;
    check_dev_name(&target.dev)?;
    let netns = open_netns(&target.netns)?;
    let not_enabled = || Error::NotEnabled { dev: target.dev.clone(), netns: target.netns.clone() };
    let dir = find(&netns, &target.dev).ok_or_else(not_enabled)?;
    let raw = read_settings(&dir)?;
    if raw.layout != LAYOUT {
        return Err(Error::Bpf(format!("{} was pinned by another version (layout {})", dir.display(), raw.layout)));
    }
    let counters = read_counters(&dir.join("counters"))?;
    let conns = MapHandle::from_pinned_path(dir.join("conns")).map_err(bpf_err("opening the pinned connection map"))?;
    let settings = Settings::from_raw(&raw);
    let attached = |name: &str| link_ifindex(&dir.join(name)).is_some_and(|i| i == raw.ifindex && i != 0);
    Ok(Status {
        netns: target.netns.clone(),
        dev: target.dev.clone(),
        ifindex: raw.ifindex,
        ingress_attached: attached(LINK_INGRESS),
        egress_attached: (settings.mode == Mode::Window).then(|| attached(LINK_EGRESS)),
        settings,
        capacity: Capacity { max_conns: raw.max_conns },
        connections: conns.keys().count(),
        counters,
        pin_dir: dir,
    })
}

/// One connection's receiver state, for `status`.
#[derive(Debug, Clone, Serialize)]
pub struct ConnStatus {
    pub local: std::net::SocketAddr,
    pub remote: std::net::SocketAddr,
    /// RTT_min, µs (the socket's receive RTT estimate >> 3, min-filtered).
    pub rtt_min_us: u32,
    /// The last raw `rcv_rtt_est.rtt_us` (×8).
    pub rtt_raw: u32,
    /// What D_total was last compared with (late above it): RTT_min · pct / 100, plus `tick_us`
    /// when tick slack is on and the peer has no µs timestamps (`tick_us` > 1).
    pub threshold_us: u32,
    /// µs per TSval tick of the peer: 1 with µs timestamps, else `--ts-tick-us`.
    pub tick_us: u32,
    /// D_total, µs.
    pub rfd_total_us: i64,
    pub late_segments: u64,
    /// α_RFD, 0..1024 (window mode).
    pub alpha: u32,
    /// The window cap, bytes (window mode; 0 = unset).
    pub rcv_cwnd: u32,
    /// Whether this state belongs to the current settings (older state restarts at its next segment).
    pub current: bool,
}

impl ConnStatus {
    fn new(key: &Key, c: &Conn, generation: u64) -> ConnStatus {
        let addr = |w: &[u32; 4], port: u16| -> std::net::SocketAddr {
            let ip: std::net::IpAddr = if key.family == 4 {
                std::net::Ipv4Addr::from(w[0].to_ne_bytes()).into()
            } else {
                let mut o = [0u8; 16];
                for (i, x) in w.iter().enumerate() {
                    o[i * 4..i * 4 + 4].copy_from_slice(&x.to_ne_bytes());
                }
                std::net::Ipv6Addr::from(o).into()
            };
            (ip, u16::from_be(port)).into()
        };
        ConnStatus {
            local: addr(&key.local, key.lport),
            remote: addr(&key.remote, key.rport),
            rtt_min_us: c.rtt_min_us,
            rtt_raw: c.rtt_raw,
            threshold_us: c.thresh_us,
            tick_us: c.tick_us,
            rfd_total_us: c.rfd_total_us,
            late_segments: c.segs_late,
            alpha: c.alpha,
            rcv_cwnd: c.rcv_cwnd,
            current: c.generation == generation,
        }
    }
}

/// The per-connection state of the instance on `target`, at most `limit` entries.
pub fn connections(target: &Target, limit: usize) -> Result<Vec<ConnStatus>, Error> {
    require_root()?;
    check_dev_name(&target.dev)?;
    let netns = open_netns(&target.netns)?;
    let dir =
        find(&netns, &target.dev).ok_or_else(|| Error::NotEnabled { dev: target.dev.clone(), netns: target.netns.clone() })?;
    let raw = read_settings(&dir)?;
    let map = MapHandle::from_pinned_path(dir.join("conns")).map_err(bpf_err("opening the pinned connection map"))?;
    let mut out = Vec::new();
    for k in map.keys().take(limit) {
        let (Some(key), Ok(Some(v))) = (Key::from_bytes(&k), map.lookup(&k, MapFlags::ANY)) else { continue };
        if let Some(c) = Conn::from_bytes(&v) {
            out.push(ConnStatus::new(&key, &c, raw.generation));
        }
    }
    Ok(out)
}

/// Sums a per-CPU counters map.
pub(crate) fn counters_from<M: MapCore>(map: &M) -> Result<Counters, Error> {
    let mut c = Counters::default();
    for (i, slot) in c.values.iter_mut().enumerate().take(NUM_COUNTERS) {
        let per_cpu = map
            .lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf_err("reading the counters"))?
            .unwrap_or_default();
        *slot = per_cpu.iter().filter_map(|v| v.get(..8)?.try_into().ok().map(u64::from_ne_bytes)).sum();
    }
    Ok(c)
}

fn read_counters(pin: &Path) -> Result<Counters, Error> {
    let map = MapHandle::from_pinned_path(pin).map_err(bpf_err("opening the pinned counters"))?;
    counters_from(&map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_labelled_by_name_or_inode() {
        assert_eq!(label(Path::new("/run/netns/rcv"), Some(7)).as_deref(), Some("rcv"));
        assert_eq!(label(Path::new("/proc/1/ns/net"), Some(4026531840)).as_deref(), Some("netns-4026531840"));
        assert_eq!(label(Path::new("/proc/1/ns/net"), None), None);
    }

    #[test]
    fn device_names_that_could_escape_the_pin_directory_are_refused() {
        for bad in ["", ".", "..", "a/b", "0123456789abcdef"] {
            assert!(check_dev_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_dev_name("veth-rcv0").is_ok());
    }
}
