"""Turns ccp-test-datapath's JSON-lines trace into a per-second table of throughput, window
and RTT per flow, and a closing line with utilisation and per-flow averages.

usage: ccp-test-datapath ... | python3 scripts/demo_table.py LINK_MBPS NUM_FLOWS
"""
import json
import sys

MSS = 1448


def main():
    link_mbps = float(sys.argv[1])
    flows = list(range(1, int(sys.argv[2]) + 1))
    delivered = {}  # (sid, second) -> bytes delivered in that second
    cumulative = {}  # sid -> delivered_bytes so far (the trace's counter is cumulative)
    latest = {}  # sid -> (cwnd packets, rtt ms)
    total = {sid: 0 for sid in flows}
    second = 1

    print(f"{'t(s)':>5} " + " ".join(f"{'flow ' + str(s):>25}" for s in flows))
    print(f"{'':>5} " + " ".join(f"{'Mbit/s  cwnd(pkt) rtt(ms)':>25}" for _ in flows))

    def flush(upto_us):
        nonlocal second
        while second * 1_000_000 <= upto_us:
            cells = []
            for sid in flows:
                b = delivered.pop((sid, second), 0)
                total[sid] += b
                if sid in latest:
                    cwnd, rtt = latest[sid]
                    cells.append(f"{b * 8 / 1e6:>8.1f} {cwnd:>9} {rtt:>7.1f}")
                else:
                    cells.append(f"{'-':>25}")
            print(f"{second:>5} " + " ".join(cells), flush=True)
            second += 1

    for line in sys.stdin:
        e = json.loads(line)
        if e["ev"] != "stats":
            continue
        flush(e["t_us"])
        s = (e["t_us"] - 1) // 1_000_000 + 1
        new = e["delivered_bytes"] - cumulative.get(e["sid"], 0)
        cumulative[e["sid"]] = e["delivered_bytes"]
        delivered[(e["sid"], s)] = delivered.get((e["sid"], s), 0) + new
        latest[e["sid"]] = (e["cwnd_bytes"] // MSS, e["rtt_us"] / 1000)
    flush(second * 1_000_000)

    span = max(second - 1, 1)
    mbps = [total[s] * 8 / 1e6 / span for s in flows]
    print(f"\nlink utilisation {sum(mbps) / link_mbps * 100:.1f} % over {span} s; "
          f"per-flow average Mbit/s: " + ", ".join(f"{m:.1f}" for m in mbps))


if __name__ == "__main__":
    main()
