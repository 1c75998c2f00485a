"""The training example (algorithms/learned/examples/train.py), in a few seconds: two iterations
on a tiny population (twice: the same seed gives the same weights), then the exported model must
answer what the trainer's own forward pass does, as ccp-agent runs it; and the shipped trained
policy must load and run there too."""

import importlib.util
import pathlib

import numpy as np

from ccp_agent import learned
from ccp_agent.env import CcEnv, Links

EXAMPLES = pathlib.Path(__file__).resolve().parents[4] / "algorithms/learned/examples"


def load_train():
    spec = importlib.util.spec_from_file_location("ccp_train_example", EXAMPLES / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def observations(n=20):
    env = CcEnv(scenario=Links(rate_mbps=30.0, rtt_ms=20.0), episode_s=2.0)
    obs, _ = env.reset(seed=0)
    seen = [obs]
    rng = np.random.default_rng(0)
    for _ in range(n):
        obs, *_ = env.step(rng.uniform(-1, 1, size=1).astype(np.float32))
        seen.append(obs)
    env.close()
    return seen + [rng.uniform(-10, 10, size=30).astype(np.float32)]


def test_a_short_training_exports_a_model_the_agent_runs_as_trained(tmp_path):
    train = load_train()
    mlp, theta, history = train.train(seed=3, iterations=2, population=4, episodes=1, episode_s=1.0, log=lambda _: None)
    assert len(history) == 2 and all(np.isfinite(h["best"]) for h in history)
    again = train.train(seed=3, iterations=2, population=4, episodes=1, episode_s=1.0, log=lambda _: None)[1]
    assert np.array_equal(theta, again), "the same seed, the same weights"
    model, manifest = train.export(mlp, theta, tmp_path, header="# test\n")
    assert manifest.read_text().startswith("# test\n")
    for obs in observations():
        assert abs(learned.infer(model, obs) - float(mlp.forward(theta, obs)[0])) <= 1e-5


def test_the_shipped_policy_runs_as_trained():
    train = load_train()
    model = EXAMPLES / "policy.onnx"
    import onnx
    from onnx import numpy_helper

    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(model)).graph.initializer}
    net = [weights["w0"], weights["b0"], weights["w1"], weights["b1"]]
    mlp = train.Mlp(30)
    for obs in observations(5):
        assert abs(learned.infer(model, obs) - float(mlp.forward(net, obs)[0])) <= 1e-5
