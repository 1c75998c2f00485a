"""TCP Reno in Python: a line-for-line port of ccp-agent's native ``reno``.

Slow start grows the window by the bytes acknowledged (doubling per RTT) until ssthresh;
congestion avoidance adds one MSS per window of acknowledged data. A loss halves the window once
per congestion event (NewReno's recovery point: the event lasts until the data in flight at the
cut is acknowledged, at least one smoothed RTT, at most three); a timeout collapses it to the
floor and slow start begins again. ECN-Echo counts as a loss without a retransmission
(RFC 3168 §6.1.2). Reports aggregate many ACKs, so growth applies to each report's total.

It gives exactly the native algorithm's actions on the same reports (algorithms/python/tests),
which makes it a template to start your own controller from.

    ccp-agent run --algorithm py:algorithms/python/examples/reno.py:Reno
"""

import math

from ccp_agent import MIN_CWND_PKTS, Action, Algorithm, Param


def delivered_bytes(report):
    """Bytes the report delivered, each segment once (acked + SACKed, Linux's acked_sacked), as
    the native Report::delivered_bytes counts them: the cumulative ACK alone holds still behind a
    hole and then jumps by everything SACKed. Bytes when the datapath counts no packets."""
    pkts = report.acked_pkts + report.sacked_pkts
    return float(pkts * max(report.mss_bytes, 1)) if pkts > 0 else float(report.acked_bytes)


# Longest a congestion event lasts, in smoothed RTTs.
RECOVERY_CAP_SRTTS = 3


class Reno(Algorithm):
    """TCP Reno/NewReno in Python: slow start, additive increase, halving on loss"""

    reference = "RFC 5681 (TCP Congestion Control); port of algorithms/src/reno.rs"
    params = [
        Param("init_cwnd_pkts", 10.0, unit="packets", min=MIN_CWND_PKTS, max=1000.0,
              doc="initial window for new flows (RFC 6928: 10); the datapath's own window wins"),
        Param("beta", 0.5, min=0.01, max=0.99, doc="multiplicative decrease on loss (RFC 5681: 1/2)"),
        Param("ecn", True, doc="respond to ECN-Echo as to a loss, once per congestion event"),
        Param("recovery_by_data", True,
              doc="a congestion event lasts until the data outstanding at the cut is acknowledged"),
    ]

    def init(self, flow):
        self.mss = flow.mss()
        self.ssthresh_bytes = math.inf
        self.recovery_until_us = 0
        self.recovery_left_bytes = 0.0
        self.reduced_at_us = 0
        self.outstanding_bytes = 0
        self.srtt_us = 0
        seed = flow.seed
        if seed is not None:
            # Taken over from another algorithm: no slow start from here.
            self.cwnd_bytes = max(float(seed.cwnd_bytes), self.min_cwnd())
            self.ssthresh_bytes = self.cwnd_bytes
            self.srtt_us = seed.srtt_us or 0
        else:
            datapath_init = float(flow.init_cwnd_bytes)
            self.cwnd_bytes = datapath_init if datapath_init > 0.0 else self.init_cwnd_pkts * self.mss
            self.cwnd_bytes = max(self.cwnd_bytes, self.min_cwnd())
        return Action(self.cwnd_bytes)

    def on_report(self, report):
        self.observe(report)
        now_us = report.now_us
        lost, timeouts = report.lost_pkts, report.timeouts
        if self.ecn and (report.ce_bytes > 0 or report.ece_acks > 0) and lost == 0 and timeouts == 0:
            if self.loss_is_new_event(now_us):
                self.reduce(now_us)
        elif timeouts > 0:
            self.timeout(now_us, report.inflight_bytes)
        elif lost > 0:
            if self.loss_is_new_event(now_us):
                self.reduce(now_us)
        elif now_us >= self.recovery_until_us and report.cwnd_limited and not report.app_limited:
            # Only a window the flow fills may grow (Linux's tcp_is_cwnd_limited).
            self.grow(delivered_bytes(report))
        return Action(self.cwnd_bytes)

    def state(self):
        return {"cwnd_bytes": self.cwnd_bytes, "ssthresh_bytes": self.ssthresh_bytes}

    def min_cwnd(self):
        return MIN_CWND_PKTS * self.mss

    def observe(self, report):
        if report.mss_bytes > 0:
            self.mss = float(report.mss_bytes)
            if self.cwnd_bytes < MIN_CWND_PKTS * self.mss:
                self.cwnd_bytes = MIN_CWND_PKTS * self.mss
        rtt = report.rtt
        if rtt is not None:
            self.srtt_us = max(rtt.srtt_us, 1)
        self.recovery_left_bytes = max(self.recovery_left_bytes - float(report.acked_bytes), 0.0)
        # Sent and not cumulatively acknowledged; the flight (never larger) where not reported.
        self.outstanding_bytes = max(report.unacked_bytes, report.inflight_bytes)

    def in_recovery(self, now_us):
        return now_us < self.recovery_until_us

    def loss_is_new_event(self, now_us):
        if self.in_recovery(now_us):
            return False
        cap_us = self.reduced_at_us + self.srtt_us * RECOVERY_CAP_SRTTS
        return not self.recovery_by_data or self.recovery_left_bytes <= 0.0 or now_us >= cap_us

    def reduce(self, now_us):
        self.ssthresh_bytes = max(self.cwnd_bytes * self.beta, self.min_cwnd())
        self.cwnd_bytes = self.ssthresh_bytes
        self.recovery_until_us = now_us + self.srtt_us
        self.reduced_at_us = now_us
        # The span up to snd_nxt (Linux's recovery point).
        self.recovery_left_bytes = float(self.outstanding_bytes)

    def timeout(self, now_us, inflight_bytes):
        flight = max(float(inflight_bytes), self.cwnd_bytes)
        self.ssthresh_bytes = max(flight * self.beta, self.min_cwnd())
        self.cwnd_bytes = self.min_cwnd()
        self.recovery_until_us = now_us + self.srtt_us
        self.recovery_left_bytes = 0.0

    def grow(self, acked):
        if self.cwnd_bytes < self.ssthresh_bytes:
            # Slow start up to ssthresh; the rest of the report's bytes go to avoidance.
            step = min(acked, self.ssthresh_bytes - self.cwnd_bytes)
            self.cwnd_bytes += step
            acked -= step
        if acked > 0.0:
            # One MSS per window acknowledged, integrated over the report's bytes.
            w0 = self.cwnd_bytes
            self.cwnd_bytes = math.sqrt(w0 * w0 + 2.0 * self.mss * acked)
