"""Trains a small learned congestion controller in ccp_agent.env.CcEnv and exports it for ccp-agent.

    python train.py --out .          # writes policy.onnx and policy.toml here (~2 min on 2 cores)

The policy is an MLP (the default manifest's 30 inputs — Aurora's RTT gradient, RTT ratio and
send ratio over the last 10 reports — 16 tanh units, one tanh output: the window multiplier's
action in [-1, 1]). It is trained by the cross-entropy method, numpy only: each iteration draws a
population of weight vectors from a diagonal Gaussian, scores each by its mean reward per step
over the same few episodes (links drawn from the environment's default distribution: 20–50
Mbit/s, 20–100 ms, 0.5–4 BDP of buffer; one competing Cubic or Reno flow at times; common random
numbers, so candidates are compared on the same links), and refits the Gaussian to the best
fifth. The trained mean is exported to ONNX with onnx's helpers (opset 17: input "observation"
float32 [1, 30], output "action" float32 [1, 1]) beside its manifest, and run in ccp-agent as
``onnx:policy.onnx``.

Everything is seeded (``--seed``): the same command gives the same weights. Before and after
training the policy is scored on held-out seeds (links the training never saw).
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

from ccp_agent.env import DEFAULT_MANIFEST, CcEnv, Links

HIDDEN = 16
#: Episodes' links: the default distribution, with a competing flow in some of them.
LINKS = Links(cross_flows=(0, 1), cross_kind="mix")
#: Seeds of the held-out evaluation episodes (training draws its own from --seed).
HELD_OUT = range(1_000_000, 1_000_016)


class Mlp:
    """observation → tanh(x·W0 + b0) → tanh(h·W1 + b1): the action. Weights in one flat vector."""

    def __init__(self, inputs: int, hidden: int = HIDDEN):
        self.shapes = [(inputs, hidden), (hidden,), (hidden, 1), (1,)]
        self.size = sum(int(np.prod(s)) for s in self.shapes)

    def unpack(self, theta: np.ndarray) -> list[np.ndarray]:
        out, i = [], 0
        for s in self.shapes:
            n = int(np.prod(s))
            out.append(theta[i:i + n].reshape(s).astype(np.float32))
            i += n
        return out

    def forward(self, theta_or_weights, observation: np.ndarray) -> np.ndarray:
        w0, b0, w1, b1 = theta_or_weights if isinstance(theta_or_weights, list) else self.unpack(theta_or_weights)
        x = np.asarray(observation, dtype=np.float32).reshape(1, -1)
        return np.tanh(np.tanh(x @ w0 + b0) @ w1 + b1).reshape(1)


def episode_return(env: CcEnv, mlp: Mlp, theta: np.ndarray, seed: int) -> float:
    """Mean reward per step of one episode."""
    weights = mlp.unpack(theta)
    obs, _ = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done:
        obs, r, terminated, truncated, _ = env.step(mlp.forward(weights, obs))
        total += r
        steps += 1
        done = terminated or truncated
    return total / max(steps, 1)


def score(env: CcEnv, mlp: Mlp, theta: np.ndarray, seeds) -> float:
    return float(np.mean([episode_return(env, mlp, theta, int(s)) for s in seeds]))


def delay_rule(obs: np.ndarray) -> np.ndarray:
    """A hand-written reference on the same observation: grow the window (×1.5 per RTT) while the
    last report's RTT ratio is below 1.1, else cut it as much."""
    return np.array([1.0 if obs[-2] < 0.1 else -1.0], dtype=np.float32)


def rule_score(env: CcEnv, seeds) -> float:
    means = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        total, steps, done = 0.0, 0, False
        while not done:
            obs, r, terminated, truncated, _ = env.step(delay_rule(obs))
            total, steps, done = total + r, steps + 1, terminated or truncated
        means.append(total / max(steps, 1))
    return float(np.mean(means))


def train(seed: int = 1, iterations: int = 40, population: int = 32, episodes: int = 6, episode_s: float = 5.0,
          elite: float = 0.2, init_std: float = 0.5, log=print) -> tuple[Mlp, np.ndarray, list[dict]]:
    """The cross-entropy method; returns the network, the trained mean and per-iteration stats."""
    rng = np.random.default_rng(seed)
    env = CcEnv(scenario=LINKS, episode_s=episode_s)
    mlp = Mlp(int(np.prod(env.observation_space.shape)))
    mean, std = np.zeros(mlp.size), np.full(mlp.size, init_std)
    n_elite = max(2, int(round(elite * population)))
    history = []
    for it in range(iterations):
        t0 = time.monotonic()
        seeds = rng.integers(0, 2**31, size=episodes)
        thetas = mean + std * rng.standard_normal((population, mlp.size))
        scores = np.array([score(env, mlp, th, seeds) for th in thetas])
        best = thetas[np.argsort(scores)[-n_elite:]]
        mean, std = best.mean(axis=0), best.std(axis=0) + 0.02
        stats = {"iteration": it, "best": float(scores.max()), "mean": float(scores.mean()),
                 "elite_mean": float(np.sort(scores)[-n_elite:].mean()), "std": float(std.mean()),
                 "seconds": time.monotonic() - t0}
        history.append(stats)
        log(f"iteration {it:3d}: best {stats['best']:7.3f}  elite {stats['elite_mean']:7.3f}  "
            f"population {stats['mean']:7.3f}  σ {stats['std']:.3f}  ({stats['seconds']:.1f} s)")
    env.close()
    return mlp, mean, history


def export(mlp: Mlp, theta: np.ndarray, out: pathlib.Path, header: str = "") -> tuple[pathlib.Path, pathlib.Path]:
    """Writes ``out/policy.onnx`` (the network as Gemm/Tanh nodes) and ``out/policy.toml`` (the
    environment's default manifest, under ``header``)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w0, b0, w1, b1 = mlp.unpack(theta)
    inputs = w0.shape[0]
    inits = [numpy_helper.from_array(a, n) for a, n in ((w0, "w0"), (b0, "b0"), (w1, "w1"), (b1, "b1"))]
    nodes = [
        helper.make_node("Gemm", ["observation", "w0", "b0"], ["z0"]),
        helper.make_node("Tanh", ["z0"], ["h0"]),
        helper.make_node("Gemm", ["h0", "w1", "b1"], ["z1"]),
        helper.make_node("Tanh", ["z1"], ["action"]),
    ]
    graph = helper.make_graph(nodes, "ccp_agent_cem_policy", [
        helper.make_tensor_value_info("observation", TensorProto.FLOAT, [1, inputs])
    ], [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ccp-agent train.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    out.mkdir(parents=True, exist_ok=True)
    model_file, manifest_file = out / "policy.onnx", out / "policy.toml"
    onnx.save(model, str(model_file))
    manifest = DEFAULT_MANIFEST.replace(
        'summary = "Aurora-style policy', 'summary = "CEM-trained MLP (30-16-1, tanh), Aurora-style policy', 1)
    manifest_file.write_text(header + manifest)
    return model_file, manifest_file


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--population", type=int, default=32)
    p.add_argument("--episodes", type=int, default=6, help="episodes per candidate per iteration")
    p.add_argument("--episode-s", type=float, default=5.0, help="simulated seconds per episode")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("."))
    a = p.parse_args()
    t0 = time.monotonic()
    mlp, theta, history = train(a.seed, a.iterations, a.population, a.episodes, a.episode_s)
    minutes = (time.monotonic() - t0) / 60
    env = CcEnv(scenario=LINKS, episode_s=a.episode_s)
    before = score(env, mlp, np.zeros(mlp.size), HELD_OUT)
    after = score(env, mlp, theta, HELD_OUT)
    rule = rule_score(env, HELD_OUT)
    env.close()
    command = (f"python train.py --seed {a.seed} --iterations {a.iterations} --population {a.population} "
               f"--episodes {a.episodes} --episode-s {a.episode_s}")
    summary = (f"held-out mean reward per step ({len(HELD_OUT)} episodes, seeds {HELD_OUT.start}…{HELD_OUT.stop - 1}):"
               f" untrained (all-zero weights: action 0) {before:.3f}, trained {after:.3f};"
               f" the hand-written delay rule {rule:.3f}")
    print(summary)
    header = (f"# Trained by algorithms/learned/examples/train.py ({minutes:.0f} min):\n#   {command}\n"
              f"# {summary}\n")
    model_file, manifest_file = export(mlp, theta, a.out, header)
    print(f"wrote {model_file} and {manifest_file}")


if __name__ == "__main__":
    main()
