"""The ccp_agent wheel: the API an algorithm is written against, and the shipped examples
driven through it the way ccp-agent drives them (run by scripts/python-package.sh)."""

import math
import pathlib
import sys

import pytest

import ccp_agent
from ccp_agent import Action, Algorithm, FlowStart, Param, Report, RttStats

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

from reno import Reno  # noqa: E402
from vegas import Vegas  # noqa: E402


def test_report_fields_and_units():
    r = Report(now_us=5, mss_bytes=1448, acked_bytes=2896, rtt=RttStats(srtt_us=20_000), urgent="loss")
    assert (r.now_us, r.acked_bytes, r.rtt.srtt_us, r.urgent) == (5, 2896, 20_000, "loss")
    assert r.lost_pkts == 0 and r.send_rate_bytes_per_s is None and r.feedback is None
    assert r.mss() == 1448.0 and not r.has_loss()
    assert Report().mss() == 1.0, "never below 1"
    with pytest.raises(TypeError, match='no field "ackd_bytes"'):
        Report(ackd_bytes=1)
    with pytest.raises(ValueError, match="not one of"):
        Report(urgent="panic")
    with pytest.raises(TypeError, match="acked_bytes"):
        Report(acked_bytes="many")
    with pytest.raises(AttributeError):
        r.now_us = 6  # reports are read-only snapshots


def test_action_contradictions_are_refused_at_construction():
    a = Action(20_000.0, report_per_rtt=1.0)
    assert a.cwnd_bytes == 20_000.0 and a.report_every_us is None
    assert a == Action(20_000.0, report_per_rtt=1.0) and a != Action(1.0)
    with pytest.raises(ValueError, match="both report_every_us and report_per_rtt"):
        Action(report_every_us=1000, report_per_rtt=1.0)
    with pytest.raises(ValueError, match="both pacing_rate_bytes_per_s and pacing_off"):
        Action(pacing_rate_bytes_per_s=1e6, pacing_off=True)
    assert math.isnan(Action(float("nan")).cwnd_bytes), "values are the agent's to judge"


def test_params_declare_kinds_and_ranges():
    assert Param("x", 1.0, min=0.0, max=2.0).default == 1.0
    Param("n", 3, min=1, max=10)
    Param("on", True)
    Param("mode", "a", choices=["a", "b"])
    for bad, match in [
        (lambda: Param("x", 3.0, min=0.0, max=2.0), "outside"),
        (lambda: Param("x", 1.0, min=2.0, max=1.0), "above max"),
        (lambda: Param("mode", "c", choices=["a"]), "not one of its choices"),
        (lambda: Param("mode", "a"), "needs choices"),
        (lambda: Param("on", True, min=0), "takes no min"),
        (lambda: Param("bad name", 1.0), "letters, digits"),
        (lambda: Param("x", [1]), "must be a float, int, bool or str"),
    ]:
        with pytest.raises(ValueError, match=match):
            bad()


def test_the_base_class_sets_parameters_as_attributes():
    class A(Algorithm):
        params = [Param("gain", 2.0)]

        def on_report(self, report):
            return Action(self.gain * report.acked_bytes)

    a = A(gain=3.0)
    assert a.init(FlowStart()) is None and a.state() == {}
    assert a.on_report(Report(acked_bytes=10)).cwnd_bytes == 30.0
    with pytest.raises(NotImplementedError):
        Algorithm().on_report(Report())


def reports(n):
    t = 0
    for i in range(n):
        t += 10_000
        lost = 2 if i % 50 == 49 else 0
        yield Report(now_us=t, interval_us=10_000, mss_bytes=1448, acked_bytes=0 if lost else 14_480,
                     lost_pkts=lost, inflight_bytes=60_000,
                     rtt=RttStats(min_us=20_000, srtt_us=20_000 + (i % 7) * 1000, last_us=21_000, samples=4))


def test_reno_slow_starts_then_halves_once_per_event():
    r = Reno(init_cwnd_pkts=10.0, beta=0.5, ecn=True, recovery_by_data=True)
    assert r.init(FlowStart(mss_bytes=1448, init_cwnd_bytes=14_480)).cwnd_bytes == 14_480.0
    windows = [r.on_report(rep).cwnd_bytes for rep in reports(100)]
    assert windows[0] == 28_960.0, "slow start adds what was acknowledged"
    assert windows[49] == pytest.approx(0.5 * windows[48]), "a loss halves the window"
    assert windows[50] == windows[49], "in recovery the window holds"
    assert r.state()["ssthresh_bytes"] == windows[-1], "the last report was a loss: ssthresh is the cut window"


def test_vegas_holds_its_queue_between_alpha_and_beta():
    v = Vegas(alpha_pkts=2.0, beta_pkts=4.0, gamma_pkts=1.0, init_cwnd_pkts=10.0)
    v.init(FlowStart(mss_bytes=1448, init_cwnd_bytes=14_480))
    for rep in reports(40):
        v.on_report(rep)
    assert set(v.state()) == {"cwnd_bytes", "ssthresh_bytes", "base_rtt_us", "diff_pkts"}
    assert v.state()["base_rtt_us"] == 20_000.0
