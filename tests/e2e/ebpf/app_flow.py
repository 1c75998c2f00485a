#!/usr/bin/env python3
"""A TCP flow whose application, not its window, sets the pace; for tests/e2e/ebpf/windows.rs.

  app_flow.py sink --addr A --port P [--rcvbuf BYTES]
      accepts one connection and reads it to the end (a receive buffer of BYTES when given:
      a receiver whose window, not the sender's, limits the flow).
  app_flow.py send --addr A --port P --cc NAME [--rate-mbps R --rate-s S] [--bulk-s B]
      connects with congestion control NAME, sends 1448-byte writes at R Mbit/s for S seconds,
      then as fast as it can for B seconds. Every 5 ms it prints one JSON line of the kernel's
      view of the socket (TCP_INFO): {"t": s, "phase": "rate"|"bulk", "cwnd": packets,
      "unacked": packets out, "mss": bytes, "acked": bytes acked so far}.

Runs inside a network namespace (`ip netns exec`); exits non-zero with a message on any error.
"""
import argparse
import json
import socket
import struct
import sys
import threading
import time

TCP_INFO = 11
TCP_CONGESTION = 13
WRITE = b"x" * 1448


def tcp_info(sock):
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, 256)
    # struct tcp_info: 8 one-byte fields, then u32s: rto, ato, snd_mss, rcv_mss, unacked, sacked,
    # lost, retrans, fackets, 4 timestamps, pmtu, rcv_ssthresh, rtt, rttvar, snd_ssthresh,
    # snd_cwnd: snd_mss at offset 16, unacked at 24, snd_cwnd at 80; tcpi_bytes_acked is the u64
    # at offset 120.
    (snd_mss,) = struct.unpack_from("=I", raw, 16)
    (unacked,) = struct.unpack_from("=I", raw, 24)
    (cwnd,) = struct.unpack_from("=I", raw, 80)
    (acked,) = struct.unpack_from("=Q", raw, 120)
    return {"cwnd": cwnd, "unacked": unacked, "mss": snd_mss, "acked": acked}


def sink(args):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.rcvbuf:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
    srv.bind((args.addr, args.port))
    srv.listen(1)
    print(json.dumps({"listening": True}), flush=True)
    conn, _ = srv.accept()
    while conn.recv(1 << 16):
        pass


def send(args):
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, args.cc.encode())
    sock.connect((args.addr, args.port))
    t0 = time.monotonic()
    phase = ["rate" if args.rate_s > 0 else "bulk"]
    done = threading.Event()

    def sample():
        while not done.is_set():
            line = tcp_info(sock)
            line.update(t=round(time.monotonic() - t0, 4), phase=phase[0])
            print(json.dumps(line), flush=True)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    gap = len(WRITE) * 8 / (args.rate_mbps * 1e6) if args.rate_mbps > 0 else 0
    next_at = time.monotonic()
    while time.monotonic() - t0 < args.rate_s:
        sock.sendall(WRITE)
        next_at += gap
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    phase[0] = "bulk"
    block = WRITE * 64
    end = time.monotonic() + args.bulk_s
    while time.monotonic() < end:
        sock.sendall(block)
    done.set()
    sampler.join()
    sock.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["sink", "send"])
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rcvbuf", type=int, default=0)
    p.add_argument("--cc", default="")
    p.add_argument("--rate-mbps", type=float, default=0.0)
    p.add_argument("--rate-s", type=float, default=0.0)
    p.add_argument("--bulk-s", type=float, default=0.0)
    args = p.parse_args()
    try:
        sink(args) if args.role == "sink" else send(args)
    except OSError as e:
        print(f"app_flow.py {args.role}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
