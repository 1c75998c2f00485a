"""How fast ccp_agent.env.CcEnv steps: episodes on the default links (20–50 Mbit/s, 20–100 ms,
0.5–4 BDP of buffer), wall time per step including the simulator, the crossing to Python and
back, and the reward. The actions: train.py's hand-written delay rule (which keeps the link busy:
the simulator's cost grows with the packets sent), or a fixed random stream (``--policy random``,
whose windows mostly stay small).

    python bench_env.py [--episodes 20] [--episode-s 10] [--cross-flows 0] [--policy delay]
"""

import argparse
import time

import numpy as np

from ccp_agent.env import CcEnv, Links


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--episode-s", type=float, default=10.0)
    p.add_argument("--cross-flows", type=int, default=0)
    p.add_argument("--policy", choices=["delay", "random"], default="delay")
    a = p.parse_args()
    env = CcEnv(scenario=Links(cross_flows=a.cross_flows), episode_s=a.episode_s)
    rng = np.random.default_rng(0)
    steps, resets, t_reset, t_step, utilisation = 0, 0, 0.0, 0.0, []
    for seed in range(a.episodes):
        t0 = time.perf_counter()
        obs, _ = env.reset(seed=seed)
        t1 = time.perf_counter()
        t_reset += t1 - t0
        resets += 1
        done = False
        while not done:
            if a.policy == "delay":
                action = np.array([1.0 if obs[-2] < 0.1 else -1.0], dtype=np.float32)
            else:
                action = rng.uniform(-1, 1, size=1).astype(np.float32)
            obs, _, terminated, truncated, info = env.step(action)
            utilisation += [info["utilisation"]] if info else []
            steps += 1
            done = terminated or truncated
        t_step += time.perf_counter() - t1
    env.close()
    print(f"{a.policy} policy, {steps} steps in {a.episodes} episodes of {a.episode_s} s "
          f"({a.cross_flows} competing flows, learner's mean utilisation {np.mean(utilisation):.2f}): "
          f"{steps / t_step:.0f} steps/s, {t_reset / resets * 1e3:.1f} ms per reset, "
          f"{a.episodes * a.episode_s / (t_reset + t_step):.0f} simulated s per wall s")


if __name__ == "__main__":
    main()
