"""TCP Vegas in Python: delay-based congestion avoidance, a port of ccp-agent's native ``vegas``.

Once per round trip Vegas compares the throughput it expects with an empty queue, cwnd/BaseRTT,
with what it gets, cwnd/RTT; their difference times BaseRTT is the number of its own packets in
the bottleneck queue, ``diff = cwnd * (RTT - BaseRTT) / RTT``. In congestion avoidance the
window grows one packet a round while diff < alpha, shrinks one while diff > beta, and holds in
between. Slow start ends once diff > gamma, at the window that queues at most one packet.
BaseRTT is the least RTT ever seen; a round's RTT is its least sample; a round is one smoothed
RTT of report time, and one with fewer than three samples grows as Reno. Losses and timeouts
are Reno's (Brakmo, O'Malley, Peterson, SIGCOMM 1994; Linux tcp_vegas.c constants).

It builds on reno.py next to it (a Python algorithm may import modules from its own folder).

    ccp-agent run --algorithm py:algorithms/python/examples/vegas.py:Vegas
"""

from ccp_agent import Action, Param
from reno import Reno, delivered_bytes

# A round with fewer RTT samples is not trusted (Linux: cntRTT <= 2).
MIN_ROUND_SAMPLES = 3


class Vegas(Reno):
    """TCP Vegas in Python: keep between alpha and beta packets queued, adjusting once per RTT"""

    reference = "Brakmo, O'Malley, Peterson, TCP Vegas, SIGCOMM 1994; port of algorithms/src/vegas.rs"
    params = [
        Param("alpha_pkts", 2.0, unit="packets", min=0.0, max=1000.0,
              doc="grow the window while fewer packets than this are queued (Linux: 2)"),
        Param("beta_pkts", 4.0, unit="packets", min=0.0, max=1000.0,
              doc="shrink the window while more packets than this are queued (Linux: 4)"),
        Param("gamma_pkts", 1.0, unit="packets", min=0.0, max=1000.0,
              doc="leave slow start once more packets than this are queued (Linux: 1)"),
        Reno.params[0],  # init_cwnd_pkts
    ]
    # Reno's loss response, as Linux's tcp_vegas keeps it.
    beta = 0.5
    recovery_by_data = True

    def init(self, flow):
        action = super().init(flow)
        self.base_rtt_us = 0
        if flow.seed is not None:
            self.base_rtt_us = flow.seed.min_rtt_us or flow.seed.srtt_us or 0
        self.round_end_us = None
        self.round_min_rtt_us = None
        self.round_samples = 0
        self.last_diff = 0.0
        return action

    def on_report(self, report):
        now = report.now_us
        self.observe(report)
        rtt = report.rtt
        if rtt is not None:
            sample = rtt.min_us if rtt.min_us > 0 else rtt.last_us
            if sample > 0:
                self.base_rtt_us = sample if self.base_rtt_us == 0 else min(self.base_rtt_us, sample)
                self.round_min_rtt_us = sample if self.round_min_rtt_us is None else min(self.round_min_rtt_us, sample)
                self.round_samples += max(rtt.samples, 1)
        if self.round_end_us is None:
            self.new_round(now)

        if report.timeouts > 0:
            self.timeout(now, report.inflight_bytes)
            self.new_round(now)
        elif report.lost_pkts > 0:
            if self.loss_is_new_event(now):
                self.reduce(now)
        elif not self.in_recovery(now) and report.cwnd_limited and not report.app_limited:
            delivered = delivered_bytes(report)
            if now >= self.round_end_us:
                self.end_round(delivered)
                self.new_round(now)
            elif self.cwnd_bytes < self.ssthresh_bytes:
                self.slow_start(delivered)
        if now >= self.round_end_us:
            # A round that ended in recovery or while app-limited is not evaluated.
            self.new_round(now)
        return Action(self.cwnd_bytes)

    def state(self):
        return {**super().state(), "base_rtt_us": float(self.base_rtt_us), "diff_pkts": self.last_diff}

    def new_round(self, now_us):
        self.round_end_us = now_us + max(self.srtt_us, 1)
        self.round_min_rtt_us = None
        self.round_samples = 0

    def slow_start(self, acked_bytes):
        self.cwnd_bytes += min(float(acked_bytes), self.ssthresh_bytes - self.cwnd_bytes)

    def end_round(self, acked_bytes):
        mss = self.mss
        if self.round_samples < MIN_ROUND_SAMPLES or self.base_rtt_us == 0 or self.round_min_rtt_us is None:
            self.grow(float(acked_bytes))
            return
        rtt = float(max(self.round_min_rtt_us, self.base_rtt_us))
        base = float(self.base_rtt_us)
        cwnd = self.cwnd_bytes / mss
        diff = cwnd * (rtt - base) / rtt
        self.last_diff = diff
        if self.cwnd_bytes < self.ssthresh_bytes:
            if diff > self.gamma_pkts:
                target = cwnd * base / rtt
                self.cwnd_bytes = max(min(cwnd, target + 1.0) * mss, self.min_cwnd())
                self.ssthresh_bytes = max(self.cwnd_bytes - mss, self.min_cwnd())
            else:
                self.slow_start(acked_bytes)
        elif diff > self.beta_pkts:
            self.cwnd_bytes = max(self.cwnd_bytes - mss, self.min_cwnd())
            self.ssthresh_bytes = min(self.ssthresh_bytes, max(self.cwnd_bytes - mss, self.min_cwnd()))
        elif diff < self.alpha_pkts:
            self.cwnd_bytes += mss
