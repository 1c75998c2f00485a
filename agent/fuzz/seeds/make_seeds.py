#!/usr/bin/env python3
"""Writes the binary and JSON-line seeds of the agent's fuzz targets (the TOML seeds under
seeds/config are written by hand, and seeds named regress_* are inputs that once crashed a
target, kept as they were found). Run from anywhere: python3 agent/fuzz/seeds/make_seeds.py

Layouts: control requests as `ccp-agent ctl` serialises them (serde_json, one line each);
ring-buffer records as the repr(C) structs of datapath-shims/datapaths/ebpf/src/bpf/ccp.h
(little-endian, x86-64); netlink datagrams as ccp-kernel sends them (a 16-byte nlmsghdr, then a
libccp message); CNMs as ccp_cnm_wire encodes them (big-endian).
"""

import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


def line(obj):
    return json.dumps(obj, separators=(",", ":")) + "\n"


# --- control: JSON lines -------------------------------------------------------------------
SELECTION = {"all": False, "ports": [], "addrs": [], "netns": [], "all_netns": False, "cgroups": [], "set_default": False}
REQUESTS = {
    "status": {"cmd": "status"},
    "status_summary": {"cmd": "status", "summary": True},
    "algorithms": {"cmd": "algorithms"},
    "swap_flow": {"cmd": "swap", "target": {"flow": 7}, "algorithm": "cubic", "params": {"beta": 0.8}},
    "swap_all": {"cmd": "swap", "target": "all", "algorithm": "reno", "params": {}},
    "swap_match": {
        "cmd": "swap",
        "target": {"match": {"dst_port": 5201, "addr": "10.0.0.0/8", "algorithm": "reno"}},
        "algorithm": "dctcp",
        "params": {"g": 0.125, "window": "srtt", "rtt_fair": True},
    },
    "default": {"cmd": "default", "algorithm": "bbr", "params": {"seed": 3, "cwnd_gain": 2.0}},
    "reload": {"cmd": "reload", "apply_existing": True},
    "attach": {"cmd": "attach", "spec": dict(SELECTION, ports=[5201], addrs=["10.77.0.0/24"], netns=["/run/netns/lab"])},
    "detach": {"cmd": "detach", "spec": dict(SELECTION, all=True, cgroups=["/sys/fs/cgroup/my.slice"])},
}
for name, req in REQUESTS.items():
    write("control", name, line(req))
write("control", "session", "".join(line(r) for r in REQUESTS.values()) + "\n  \n{\"cmd\":\"reboot\"}\n")

# --- ringbuf: one sample each ----------------------------------------------------------------
VERSION = 1
AF_INET, AF_INET6 = 2, 10


def hdr(kind, size, fid=42, ts=1_000_000_123):
    return struct.pack("<BBHIQ", VERSION, kind, size, fid, ts)


def create(family, saddr, daddr, prev_cc=b"", flags=3, cookie=0x1234, min_rtt=20_000):
    body = struct.pack("<QQQ", cookie, 4026531840, 7)
    body += saddr.ljust(16, b"\0") + daddr.ljust(16, b"\0")
    body += struct.pack("<HHHHIIIIII", family, 40000, 5201, flags, 1448, 10, 0x7FFFFFFF, 25_000, min_rtt, 1000)
    body += prev_cc.ljust(16, b"\0")
    rec = hdr(1, 120) + body
    assert len(rec) == 120
    return rec


def report(urgent=0, flags=4, fastest=None):
    """A report; without `fastest` (packets, us) as an instance built before rate_max_* wrote it."""
    size = 144 if fastest is None else 152
    rec = hdr(2, size) + struct.pack("<QQQQ", 999_000_000, 144_800, 2_000_000, 1_250_000)
    rec += struct.pack("<21I", 100, 2, 1, 3, 1, 100, 19_000, 25_000, 20_000, 100, 0, 20_500, 100, 10_000, 10_000, 40, 60_000, 80, 70, 1448, 5)
    rec += struct.pack("<HBBB7x", 0, urgent, flags, 0)
    if fastest is not None:
        rec += struct.pack("<II", *fastest)
    assert len(rec) == size
    return rec


def close():
    return hdr(3, 32) + struct.pack("<QII", 1_448_000, 12, 0)


def ack(flags=0, rtt=20_000):
    rec = hdr(4, 80) + struct.pack("<Q", 1448) + struct.pack("<12I", 1, 0, 0, 0, rtt, 10, 10_000, 10_000, 20, 30_000, 40, 1448)
    rec += struct.pack("<B7x", flags)
    assert len(rec) == 80
    return rec


write("ringbuf", "create_v4", create(AF_INET, bytes([10, 77, 0, 1]), bytes([10, 77, 0, 2])))
write("ringbuf", "create_v6_attached", create(AF_INET6, bytes(15) + b"\1", bytes([0x20, 0x01, 0x0D, 0xB8]) + bytes(11) + b"\2", b"cubic", 1, 0, 0xFFFFFFFF))
write("ringbuf", "report", report())
write("ringbuf", "report_urgent_loss", report(urgent=2, flags=3))
write("ringbuf", "report_fastest_sample", report(fastest=(120, 9_000)))
write("ringbuf", "close", close())
write("ringbuf", "ack", ack())
write("ringbuf", "ack_timeout", ack(flags=3, rtt=0))

# --- netlink: option byte, then [sender u8][len u16 LE][datagram] ----------------------------
def msg(kind, sid, body):
    return struct.pack("<HHI", kind, 8 + len(body), sid) + body


def ready(datapath_id=0xAA):
    return msg(5, 0, struct.pack("<I", datapath_id))


def libccp_create(sid, cong_alg=b""):
    # init_cwnd, mss, src_ip, src_port, dst_ip, dst_port, then congAlg[64].
    return msg(0, sid, struct.pack("<6I", 14480, 1448, 0x0A4D0001, 40000, 0x0A4D0002, 5201) + cong_alg.ljust(64, b"\0"))


FOLD_FIELDS = 25  # the standard fold's Report fields (agent/src/datapath/libccp/fold.rs), in order


def measure(sid, uid=1, fields=None):
    if fields is None:
        # acked_bytes, acked_pkts, sacked_bytes, sacked_pkts, lost_pkts, timeouts, ecn_bytes,
        # ecn_pkts, ece_acks, rtt_min, rtt_max, rtt_last, rtt_sum, rtt_samples, rtt_over,
        # send_rate, recv_rate, max_delivery_rate, inflight, pending, cwnd, rate, now_us, urgent,
        # cwnd_limited
        fields = [14480, 10, 0, 0, 0, 0, 0, 0, 0, 19000, 25000, 20000, 200000, 10, 0,
                  1_000_000, 900_000, 950_000, 14480, 28960, 14480, 0, 123_456_789, 0, 1]
        assert len(fields) == FOLD_FIELDS
    return msg(1, sid, struct.pack("<II", uid, len(fields)) + b"".join(struct.pack("<Q", f) for f in fields))


def frame(payload, nlmsg_len=None):
    n = 16 + len(payload) if nlmsg_len is None else nlmsg_len
    return struct.pack("<IHHII", n, 3, 0, 0, 0) + payload


def datagrams(opts, items):
    out = bytes([opts])
    for sender, dg in items:
        out += struct.pack("<BH", sender, len(dg)) + dg
    return out


lifecycle = [
    (0, frame(ready())),
    (0, frame(libccp_create(1, b"reno"))),
    (0, frame(measure(1))),
    (0, frame(measure(1, fields=[0] * (FOLD_FIELDS - 3) + [123_466_789, 1, 0]))),
    (0, frame(measure(1, uid=0, fields=[]))),
]
write("netlink", "lifecycle", datagrams(0b00010, lifecycle))
write("netlink", "lifecycle_budget1", datagrams(0b00000, lifecycle))
write("netlink", "adopt_and_foreign", datagrams(0b11110, [
    (0, frame(measure(9))),
    (0, frame(measure(10, uid=5, fields=[1, 2]))),
    (0, frame(measure(11, uid=7, fields=[]))),
    (0, frame(libccp_create(12) + measure(12))),  # two messages in one datagram
]))
write("netlink", "user_peer", datagrams(0b00001, [(7, frame(libccp_create(3))), (7, frame(measure(3)))]))
write("netlink", "refused_and_malformed", datagrams(0b00100, [
    (7, frame(libccp_create(3))),
    (0, frame(libccp_create(4), nlmsg_len=9)),
    (0, frame(libccp_create(4))[:20]),
    (0, frame(b"\x01\x00\xff\x00" + bytes(12))),
]))

# --- cnm: [pick][source address bytes, picks 2 and 3][datagram] ------------------------------
def cnm(sample, qfb=17, version=1, sample_len=None):
    n = len(sample) if sample_len is None else sample_len
    return b"QCNM" + struct.pack(">BBBBiiiIQ", version, qfb, 1, n, 25_123, -300, 12_000, 1, 123_456_789) + sample


def ipv4(proto, src=(10, 77, 0, 1), dst=(10, 77, 0, 2), ports=(40000, 5201), extra=36):
    h = bytes([0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, proto, 0, 0]) + bytes(src) + bytes(dst)
    return h + struct.pack(">HH", *ports) + bytes(extra)


def ipv6(proto):
    return bytes([0x60, 0, 0, 0, 0, 20, proto, 64]) + bytes(15) + b"\1" + bytes(15) + b"\2" + struct.pack(">HH", 40000, 5201) + bytes(20)


write("cnm", "tcp_v4", b"\0" + cnm(ipv4(6)))
write("cnm", "tcp_v4_mapped_sender", b"\1" + cnm(ipv4(6)))
write("cnm", "udp_v4", b"\0" + cnm(ipv4(17)))
write("cnm", "tcp_v6", b"\0" + cnm(ipv6(6)))
write("cnm", "short_sample", b"\0" + cnm(ipv4(6, extra=0)[:22]))
write("cnm", "other_v4_sender", b"\2" + bytes([192, 168, 1, 1]) + cnm(ipv4(6)))
write("cnm", "forged_v4_sender", b"\2" + bytes([10, 0, 0, 9]) + cnm(ipv4(6)))
write("cnm", "v6_sender", b"\3" + bytes([0x20, 0x01, 0x0D, 0xB8]) + bytes(11) + b"\7" + cnm(ipv4(6)))
write("cnm", "truncated", b"\0" + cnm(ipv4(6)) + bytes(200))

# --- python_action: an option byte, then the values of init, on_report and state, each a tree ---
# (Builder::value). Options: bit 0 inline, bit 1 the report begun ahead.
NONE = b"\0"
THREAD, INLINE, AHEAD = b"\0", b"\1", b"\2"
FIELD_INDEX = {name: i for i, name in enumerate(
    ["cwnd_bytes", "pacing_rate_bytes_per_s", "pacing_off", "report_every_us", "report_per_rtt", "rtt_threshold_us",
     "report_acked_pkts", "ack_aggregation_bw_bytes_per_s"])}


def py_bool(b):
    return bytes([1, int(b)])


def py_int(n):
    return bytes([3]) + struct.pack("<q", n)


def py_boundary(i):
    return bytes([4, i])


def py_big(negative, exponent, offset=0):
    return bytes([5, int(negative)]) + struct.pack("<Hb", exponent, offset)


def py_float(x):
    return bytes([7]) + struct.pack("<d", x)


def py_str(s):
    s = s.encode()
    return bytes([9, len(s)]) + s


def py_list(*items):
    return bytes([11, len(items)]) + b"".join(items)


def py_dict(**items):
    return bytes([13, len(items)]) + b"".join(bytes([1]) + py_str(k)[1:] + v for k, v in items.items())


def py_action(positional=None, **fields):
    given = sum(1 << FIELD_INDEX[k] for k in fields) | (0x80 if positional is not None else 0)
    out = bytes([14, given, 0]) + (positional or b"")
    return out + b"".join(fields[k] for k in sorted(fields, key=FIELD_INDEX.get))


def py_changed(*ops):
    return bytes([15, len(ops)]) + b"".join(bytes([FIELD_INDEX[k]]) + v for k, v in ops)


def py_float_like(v):
    return bytes([17, 0]) + v


def py_index_like(v):
    return bytes([17, 1]) + v


write("python_action", "reno", AHEAD + py_action(py_float(14480.0))
      + py_action(cwnd_bytes=py_float(28960.0), report_per_rtt=py_float(1.0))
      + py_dict(cwnd=py_float(28960.0), ssthresh=py_int(1 << 40)))
write("python_action", "pacing", INLINE + py_action(pacing_rate_bytes_per_s=py_float(1.25e6), rtt_threshold_us=py_int(30_000),
                                           report_acked_pkts=py_int(8))
      + py_action(pacing_off=py_bool(True), report_every_us=py_int(10_000)) + NONE)
write("python_action", "contradictions", THREAD + py_changed(("pacing_rate_bytes_per_s", py_float(1.0)), ("pacing_off", py_bool(True)))
      + py_action(report_every_us=py_int(1), report_per_rtt=py_float(1.0)) + py_dict(x=py_str("1.0")))
write("python_action", "wrong_types", AHEAD + py_list(py_float(1.0), py_float(2.0)) + py_str("Action(1)") + py_list())
write("python_action", "odd_numbers", INLINE + py_action(py_big(False, 1100))
      + py_changed(("cwnd_bytes", py_float(float("nan"))), ("report_every_us", py_boundary(11)),
                   ("report_acked_pkts", py_boundary(6)), ("rtt_threshold_us", py_int(-1)))
      + py_dict(nan=py_float(float("nan")), inf=py_float(float("inf"))))
write("python_action", "number_likes", THREAD + py_action(py_float_like(py_float(3.5)), report_every_us=py_index_like(py_int(7)))
      + py_changed(("report_per_rtt", py_index_like(py_int(2))), ("rtt_threshold_us", py_float_like(py_float(1.0))))
      + bytes([17, 2]))
write("python_action", "api_objects", INLINE + bytes([16, 0, 7]) + py_str("loss") + bytes([16, 1, 0]) + py_int(0)
      + bytes([16, 3, 0b0111]) + py_str("gain") + py_float(2.0) + py_float(1.0) + py_float(4.0))
