"""ccp_agent.env.CcEnv: the Gymnasium API, determinism, the manifest's spaces, scenario files with
cross traffic, episodes let go of, and the reward (run by scripts/python-package.sh)."""

import gc
import math
import threading
import time

import numpy as np
import pytest
import gymnasium as gym
from gymnasium.utils.env_checker import check_env

import ccp_agent
from ccp_agent.env import DEFAULT_MANIFEST, ENV_ID, BasePath, CcEnv, Links, Reward, terms

# Short episodes on the environment's default links (20–50 Mbit/s, 20–100 ms).
SHORT = dict(episode_s=2.0)


def actions(n, seed=5):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, 1)).astype(np.float32)


def test_passes_gymnasiums_checker():
    env = CcEnv(seed=0, **SHORT)
    check_env(env, skip_render_check=True)
    env.close()
    env = gym.make(ENV_ID, scenario=Links(cross_flows=1), **SHORT)
    check_env(env.unwrapped)
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.close()


def test_same_seed_and_actions_give_the_same_episode():
    def episode(seed):
        env = CcEnv(scenario=Links(cross_flows=(0, 2), loss_pct=(0.0, 1.0), cross_kind="mix"), **SHORT)
        obs, info = env.reset(seed=seed)
        seen, rewards = [obs], []
        for a in actions(60):
            obs, r, terminated, truncated, _ = env.step(a)
            seen.append(obs)
            rewards.append(r)
            if terminated or truncated:
                break
        env.close()
        return np.stack(seen), np.array(rewards), info["link"]

    a, ra, link_a = episode(11)
    b, rb, link_b = episode(11)
    assert np.array_equal(a, b) and np.array_equal(ra, rb) and link_a == link_b
    c, _, link_c = episode(12)
    assert link_c != link_a


def test_the_constructor_seed_seeds_the_first_reset():
    env = CcEnv(seed=3, **SHORT)
    link = env.reset()[1]["link"]
    assert env.reset(seed=3)[1]["link"] == link
    assert env.reset()[1]["link"] != link, "later resets continue the generator"
    env.close()


def test_spaces_follow_the_manifest():
    env = CcEnv(**SHORT)
    assert env.observation_space.shape == (30,) and env.observation_space.dtype == np.float32
    assert np.all(env.observation_space.high == 10.0) and np.all(env.observation_space.low == -10.0)
    assert (env.action_space.low[0], env.action_space.high[0]) == (-1.0, 1.0)
    rate = DEFAULT_MANIFEST.replace('kind = "window_multiplier"\nstep = 0.5\nclip = 1.0',
                                    'kind = "rate"\nscale_mbps = 10.0\nmax_mbps = 80.0')
    rate = rate.replace("layout = \"flat\"", "layout = \"sequence\"").replace("clip = 10.0 },\n    { name = \"rtt_ratio\"",
                                                                             "clip = 3.0 },\n    { name = \"rtt_ratio\"")
    env = CcEnv(manifest=rate, **SHORT)
    assert env.observation_space.shape == (10, 3)
    assert np.all(env.observation_space.high[:, 0] == 3.0) and np.all(env.observation_space.high[:, 1] == 10.0)
    assert (env.action_space.low[0], env.action_space.high[0]) == (0.0, 8.0)
    obs, _ = env.reset(seed=1)
    obs, *_ = env.step(np.array([2.5], dtype=np.float32))
    assert obs.shape == (10, 3) and env.observation_space.contains(obs)
    env.close()
    with pytest.raises(ValueError, match="observation.history"):
        CcEnv(manifest=DEFAULT_MANIFEST.replace("history = 10", "history = 0"))


def test_the_observation_fills_oldest_first_and_the_window_follows_the_action():
    env = CcEnv(scenario=Links(rate_mbps=40.0, rtt_ms=40.0, buffer_bdp=2.0), episode_s=5.0)
    obs, info = env.reset(seed=2)
    assert np.all(obs[:27] == 0.0), "zeros until ten reports came"
    windows = [info["cwnd_bytes"]]
    for _ in range(20):
        obs, _, _, _, info = env.step(np.array([1.0], dtype=np.float32))
        windows.append(info["cwnd_bytes"])
    assert np.any(obs[:3] != 0.0) or np.any(obs[3:6] != 0.0), "ten reports came"
    assert windows[-1] > 4 * windows[0], f"a window grown 1.5x per RTT while it limits the flow: {windows}"
    env.close()


def test_episodes_end_truncated_and_resets_and_drops_let_go_of_the_simulator():
    env = CcEnv(scenario=Links(rate_mbps=20.0, rtt_ms=100.0), episode_s=1.0)
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        _, r, terminated, truncated, _ = env.step(np.zeros(1, dtype=np.float32))
        assert not terminated
        steps += 1
    assert 5 <= steps <= 12, f"about one report per 100 ms RTT over 1 s: {steps}"
    threads = threading.active_count()
    for seed in range(5):
        env.reset(seed=seed)
        env.step(np.zeros(1, dtype=np.float32))
    env.reset(seed=9)
    del env
    gc.collect()
    deadline = time.monotonic() + 5
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    # Native threads are not Python's: the check is that dropping returns at all, and that
    # nothing was left to block the interpreter's exit.
    assert threading.active_count() <= threads


def test_a_scenario_file_runs_its_first_flow_as_the_learner_beside_its_own_traffic(tmp_path):
    scenario = tmp_path / "two.toml"
    scenario.write_text("""
duration_ms = 3000
[topology]
kind = "dumbbell"
senders = 2
receivers = 2
host_gbps = 1.0
host_delay_us = 5.0
bottleneck_gbps = 0.03
bottleneck_delay_us = 14990.0
[switch]
buffer_bytes = 2_000_000
admission = "static"
port_buffer_bytes = 150_000
loss_pct = 0.5
[transport]
ecn = false
[cc]
algorithm = "cubic"
reporting = "interval"
initial_rtt_us = 30000.0
[output]
plots = false
[[workload.flows]]
src = 0
dst = 2
[[workload.flows]]
src = 1
dst = 3
cc = { algorithm = "reno" }
""")
    env = CcEnv(scenario=scenario, seed=4)
    obs, info = env.reset()
    assert info["link"] is None
    assert info["path"].bottleneck_mbps == pytest.approx(30.0)
    assert 30.0 < info["path"].base_rtt_ms < 30.5, "2 × 15 ms of propagation, plus serialisation"
    total, steps, truncated = 0.0, 0, False
    while not truncated:
        obs, r, _, truncated, info = env.step(np.array([0.2], dtype=np.float32))
        total += r
        steps += 1
    assert steps > 20 and math.isfinite(total)
    env.close()
    per_ack = scenario.read_text().replace('reporting = "interval"', 'reporting = "per_ack"')
    scenario.write_text(per_ack)
    with pytest.raises(ValueError, match="cc.reporting"):
        CcEnv(scenario=scenario).reset(seed=0)
    scenario.write_text(per_ack.replace('"per_ack"', '"interval"').replace("dst = 2\n", "dst = 2\ncount = 2\n"))
    with pytest.raises(ValueError, match="count must be 1"):
        CcEnv(scenario=scenario).reset(seed=0)


def test_the_reward_is_configurable():
    seen = []

    def reward(report, path):
        seen.append((report, path))
        return -1.0

    env = CcEnv(scenario=Links(rate_mbps=30.0, rtt_ms=30.0), reward=reward, **SHORT)
    env.reset(seed=0)
    _, r, *_ = env.step(np.zeros(1, dtype=np.float32))
    assert r == -1.0
    report, path = seen[0]
    assert isinstance(report, ccp_agent.Report) and isinstance(path, BasePath)
    env.close()
    weights = Reward(throughput=1.0, delay=0.0, loss=0.0)
    env = CcEnv(scenario=Links(rate_mbps=30.0, rtt_ms=30.0), reward=weights, **SHORT)
    env.reset(seed=0)
    for _ in range(30):
        _, r, _, _, info = env.step(np.ones(1, dtype=np.float32))
    assert r == pytest.approx(info["utilisation"]) and 0.3 < r < 1.2, r
    env.close()


def test_reward_terms():
    report = ccp_agent.Report(interval_us=10_000, mss_bytes=1000, acked_pkts=20, sacked_pkts=5, lost_pkts=25,
                              rtt=ccp_agent.RttStats(mean_us=30_000, samples=3))
    t = terms(report, BasePath(bottleneck_mbps=40.0, base_rtt_ms=20.0))
    # 25 packets of 1000 B in 10 ms: 20 Mbit/s of 40; 30 ms over 20 ms; 25 lost of 50.
    assert t == {"utilisation": 0.5, "queueing": 0.5, "loss_fraction": 0.5}
    assert Reward()(report, BasePath(40.0, 20.0)) == pytest.approx(10 * 0.5 - 10 * 0.5 - 20 * 0.5)
    assert terms(ccp_agent.Report(), BasePath(40.0, 20.0)) == {"utilisation": 0.0, "queueing": 0.0, "loss_fraction": 0.0}


def test_bad_inputs_are_refused():
    env = CcEnv(**SHORT)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(1))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan]))
    env.close()
    with pytest.raises(ValueError, match="rate_mbps"):
        Links(rate_mbps=(50.0, 20.0))
    with pytest.raises(ValueError, match="cross_kind"):
        Links(cross_kind="bursty")
