"""ccp_agent.learned: one inference and a replay through a learned policy, on ccp-learned's test
MLP (a smoke test; the comparisons with onnx's reference evaluator are ccp-learned's)."""

import math
import pathlib

import numpy as np
import pytest

from ccp_agent import learned

REPO = pathlib.Path(__file__).resolve().parents[4]
MLP = REPO / "algorithms/learned/tests/models/mlp.onnx"
RECORDED = REPO / "algorithms/python/tests/data/sim-reno.jsonl"


def test_infer_runs_the_model_on_an_observation():
    zeros = learned.infer(MLP, [0.0] * 60)
    assert math.isfinite(zeros)
    ramp = learned.infer(str(MLP), np.linspace(-1, 1, 60))
    assert math.isfinite(ramp) and ramp != zeros
    assert learned.infer(MLP, np.linspace(-1, 1, 60).tolist()) == ramp, "the same input, the same answer"
    with pytest.raises(ValueError, match="60"):
        learned.infer(MLP, [0.0] * 59)
    with pytest.raises(ValueError, match="nowhere.onnx"):
        learned.infer("nowhere.onnx", [0.0])


def test_replay_gives_each_flow_its_own_policy_instance():
    steps = learned.replay(MLP, RECORDED)
    text = RECORDED.read_text()
    assert len(steps) == len(text.splitlines())
    flows = {int(line.split(",", 1)[0].split(":")[1]) for line in text.splitlines()}
    assert {s["flow"] for s in steps} == flows and len(flows) > 1
    assert all(s["error"] is None and s["pacing_bytes_per_s"] is None for s in steps)
    assert all(s["cwnd_bytes"] > 0 and math.isfinite(s["output"]) for s in steps)
    # A flow's steps do not depend on the other flow's reports.
    flow1 = "\n".join(line for line in text.splitlines() if line.startswith('{"flow":1'))
    alone = learned.replay(MLP, flow1)
    assert [s["cwnd_bytes"] for s in alone] == [s["cwnd_bytes"] for s in steps if s["flow"] == 1]
    # Bare reports are flow 0's (absent fields take the contract's defaults).
    bare = learned.replay(MLP, '{"now_us":5000,"interval_us":5000,"mss_bytes":1460,"cwnd_bytes":14600}\n')
    assert bare[0]["flow"] == 0 and bare[0]["error"] is None
    with pytest.raises(ValueError, match="line 2"):
        learned.replay(MLP, '{"now_us":5000}\n{"now_s":5}\n')
