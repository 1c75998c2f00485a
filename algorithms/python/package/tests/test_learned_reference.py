"""ccp-learned's inference and action mapping checked against independent references.

- Inference: `ccp_agent.learned.infer` (tract, as the agent runs it) against onnx's own
  ReferenceEvaluator on the same observations, to 1e-5.
- Replay: a report sequence recorded from a real kernel flow (the eBPF datapath, 50 Mbit/s,
  20 ms), through `ccp_agent.learned.replay` (the agent's `onnx:` algorithm) and through the
  Python reference below (the documented features, normalisation and Aurora's rule, written
  again from docs/learned.md in numpy, with the ReferenceEvaluator as the model): the same
  commands.
"""

import json
import math
import pathlib
import tomllib

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import ccp_agent.learned

ROOT = pathlib.Path(__file__).resolve().parents[4]
MODELS = ROOT / "algorithms/learned/tests/models"
RECORDING = ROOT / "algorithms/python/tests/data/kernel-reno.jsonl"


def data_flow_reports():
    """The recording's reports of the flow that carried the most data."""
    lines = [json.loads(l) for l in RECORDING.read_text().splitlines()]
    acked = {}
    for l in lines:
        acked[l["flow"]] = acked.get(l["flow"], 0) + l["report"]["acked_bytes"]
    flow = max(acked, key=acked.get)
    return [l["report"] for l in lines if l["flow"] == flow]


class Reference:
    """docs/learned.md's observation and action, in numpy."""

    def __init__(self, manifest):
        obs = manifest["observation"]
        self.history = obs["history"]
        self.features = [(f["name"], f.get("offset", 0.0), f.get("scale", 1.0), f.get("clip", 10.0)) for f in obs["features"]]
        self.values = np.zeros((self.history, len(self.features)), dtype=np.float32)
        self.min_rtt = None
        self.srtt = 0
        self.last_rtt = 0
        self.prev_mean = None
        self.gradient = 0.0
        action = manifest["action"]
        assert action["kind"] == "window_multiplier"
        self.step = action.get("step", 0.025)
        self.clip = action.get("clip", 1.0)
        self.min_pkts = action.get("min_cwnd_pkts", 2.0)
        self.max_pkts = action.get("max_cwnd_pkts", 1e6)
        self.cwnd = None
        self.mss = None

    def raw(self, name, r):
        us = max(r["interval_us"], 1)
        recv = r.get("recv_rate_bytes_per_s")
        delivery = recv * 8.0 if recv is not None else (r["acked_bytes"] + r["sacked_bytes"]) * 8.0 / (us * 1e-6)
        send = r.get("send_rate_bytes_per_s")
        send = send * 8.0 if send is not None else delivery
        delivered = r["acked_pkts"] + r["sacked_pkts"]
        mss = max(r["mss_bytes"], 1)
        rtt = r.get("rtt")
        if name == "delivery_rate_mbps":
            return delivery / 1e6
        if name == "send_rate_mbps":
            return send / 1e6
        if name == "send_recv_ratio":
            return send / delivery if delivery > 0 and send > 0 else 1.0
        if name == "min_rtt_ms":
            return (self.min_rtt or 0) / 1e3
        if name == "srtt_ms":
            return self.srtt / 1e3
        if name == "last_rtt_ms":
            return self.last_rtt / 1e3
        if name == "rtt_ratio":
            if rtt is not None and self.min_rtt:
                return rtt["mean_us"] / self.min_rtt
            if self.prev_mean is not None and self.min_rtt:
                return self.prev_mean[0] / self.min_rtt
            return 1.0
        if name == "rtt_gradient":
            return self.gradient
        if name == "loss_fraction":
            lost = r["lost_pkts"]
            return lost / (lost + delivered) if lost + delivered > 0 else 0.0
        if name == "ce_fraction":
            return min(r["ce_pkts"] / delivered, 1.0) if delivered > 0 else 0.0
        if name == "cwnd_pkts":
            return r["cwnd_bytes"] / mss
        if name == "inflight_pkts":
            return r["inflight_bytes"] / mss
        raise KeyError(name)

    def push(self, r):
        rtt = r.get("rtt")
        if rtt is not None:
            if rtt["min_us"] > 0:
                self.min_rtt = rtt["min_us"] if self.min_rtt is None else min(self.min_rtt, rtt["min_us"])
            self.srtt, self.last_rtt = rtt["srtt_us"], rtt["last_us"]
            mean = float(rtt["mean_us"])
            if self.prev_mean is not None and r["now_us"] > self.prev_mean[1]:
                self.gradient = (mean - self.prev_mean[0]) / (r["now_us"] - self.prev_mean[1])
            else:
                self.gradient = 0.0
            self.prev_mean = (mean, r["now_us"])
        row = []
        for name, offset, scale, clip in self.features:
            x = self.raw(name, r)
            row.append(min(max((x - offset) / scale, -clip), clip) if math.isfinite(x) else 0.0)
        self.values = np.roll(self.values, -1, axis=0)
        self.values[-1] = np.asarray(row, dtype=np.float32)

    def init(self, mss, cwnd):
        self.mss = max(mss, 1)
        self.cwnd = min(max(float(cwnd), self.min_pkts * self.mss), self.max_pkts * self.mss)

    def apply(self, r, a):
        self.mss = max(r["mss_bytes"], 1)
        a = min(max(float(a), -self.clip), self.clip)
        nxt = self.cwnd * (1 + self.step * a) if a >= 0 else self.cwnd / (1 - self.step * a)
        if nxt <= self.cwnd or r.get("cwnd_limited", True):
            self.cwnd = min(max(nxt, self.min_pkts * self.mss), self.max_pkts * self.mss)
        return self.cwnd


def manifest(name):
    return tomllib.loads((MODELS / f"{name}.toml").read_text())


@pytest.mark.parametrize("name", ["mlp", "gru"])
def test_inference_matches_onnx_reference_evaluator_on_recorded_observations(name):
    m = manifest(name)
    ref = Reference(m)
    evaluator = ReferenceEvaluator(str(MODELS / f"{name}.onnx"))
    shape = (1, m["observation"]["history"], len(m["observation"]["features"]))
    if m["observation"].get("layout", "flat") == "flat":
        shape = (1, shape[1] * shape[2])
    rng = np.random.default_rng(7)
    observations = []
    for r in data_flow_reports():
        ref.push(r)
        observations.append(ref.values.reshape(shape).copy())
    observations += [rng.uniform(-3, 3, shape).astype(np.float32) for _ in range(50)]
    worst = 0.0
    for obs in observations:
        ours = ccp_agent.learned.infer(str(MODELS / f"{name}.onnx"), obs.ravel().tolist())
        theirs = float(evaluator.run(None, {"observation": obs})[0].ravel()[0])
        worst = max(worst, abs(ours - theirs))
    assert worst <= 1e-5, f"{name}: largest difference {worst:g} over {len(observations)} observations"


def test_a_recorded_kernel_flow_replays_to_the_python_references_commands():
    reports = data_flow_reports()
    assert len(reports) > 100
    path = MODELS / "mlp.onnx"
    m = manifest("mlp")
    ref = Reference(m)
    evaluator = ReferenceEvaluator(str(path))
    recording = "\n".join(json.dumps({"flow": 1, "report": r}) for r in reports)
    ours = ccp_agent.learned.replay(str(path), recording)
    assert len(ours) == len(reports)
    ref.init(reports[0]["mss_bytes"], reports[0]["cwnd_bytes"])
    for i, (r, got) in enumerate(zip(reports, ours)):
        ref.push(r)
        a = float(evaluator.run(None, {"observation": ref.values.reshape(1, -1)})[0].ravel()[0])
        want = ref.apply(r, a)
        assert abs(got["output"] - a) <= 1e-5, f"report {i}: output {got['output']} vs {a}"
        assert math.isclose(got["cwnd_bytes"], want, rel_tol=1e-5), f"report {i}: cwnd {got['cwnd_bytes']} vs {want}"
        assert got["pacing_bytes_per_s"] is None
