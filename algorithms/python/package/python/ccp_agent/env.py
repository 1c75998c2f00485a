"""A Gymnasium environment for learned congestion control: ccp-sim, with one flow (the learner)
controlled by the policy being trained.

One ``step`` is one report on the learner's flow. The observation is what ccp-agent would give
an ``onnx:`` policy for that report (ccp-learned's observer, as the manifest declares it); the
action is the policy's output, applied through the same action mapping (Aurora's window rule or
a target rate) and the same containment controller as in the agent. A policy trained here and
exported to ONNX with this manifest therefore sees and does the same in the agent.

The simulator runs inside the ``ccp_agent`` extension on its own thread (no subprocess): the
learner's reports wait for their actions there, and ``step`` waits for the next report without
holding the GIL. Episodes are deterministic: the same seed and the same actions give the same
observations and rewards.

Links: each ``reset`` draws one from a :class:`Links` distribution (bottleneck rate, base RTT,
buffer, random loss, competing Cubic/Reno flows) with the environment's seeded generator, or
runs a ccp-sim scenario file whose first ``[[workload.flows]]`` entry is the learner.

Needs ``gymnasium`` and ``numpy`` (``pip install ccp-agent[env]``). Importing this module
registers the environment as ``ccp_agent/CcEnv-v0`` for ``gymnasium.make`` (whose keyword
arguments are :class:`CcEnv`'s).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, SupportsFloat, Union

import gymnasium as gym
import numpy as np

from ccp_agent import Report, _ccp_agent

__all__ = ["CcEnv", "Links", "Link", "CrossFlow", "BasePath", "Reward", "terms", "DEFAULT_MANIFEST", "ENV_ID"]

#: The manifest the environment uses when given none: Aurora's observation (Jay et al., ICML
#: 2019, §4: latency gradient, latency ratio and sending ratio over the last 10 reports, one
#: report per RTT) and its multiplicative window rule, with step × clip = 0.5 so that one action
#: in [-1, 1] grows the window by up to 1.5× per RTT or cuts it as much.
DEFAULT_MANIFEST = """\
summary = "Aurora-style policy: window multiplier from 10 reports of RTT gradient, RTT ratio and send ratio"
reference = "Jay et al., A Deep Reinforcement Learning Perspective on Internet Congestion Control, ICML 2019"
fallback = "cubic"

[observation]
history = 10
layout = "flat"
features = [
    { name = "rtt_gradient", scale = 0.01, clip = 10.0 },
    { name = "rtt_ratio", offset = 1.0, clip = 10.0 },
    { name = "send_recv_ratio", offset = 1.0, clip = 10.0 },
]

[action]
kind = "window_multiplier"
step = 0.5
clip = 1.0

[report]
rtts = 1.0
"""

Range = Union[float, tuple[float, float]]


@dataclass(frozen=True)
class Links:
    """The distribution episodes draw their link from, at each ``reset``.

    Each field is a fixed value or a ``(lo, hi)`` range. Ranges are uniform, except
    ``rate_mbps``'s, which is log-uniform (so 20–50 Mbit/s is as much below 32 as above), and
    ``cross_flows``', which is a uniform integer in ``[lo, hi]``.

    The link is a dumbbell: the learner and each competing flow on its own sender and receiver
    (1 Gbit/s access links, or ten times the bottleneck if faster), one bottleneck of
    ``rate_mbps`` whose drop-tail buffer holds ``buffer_bdp`` × the bandwidth-delay product (at
    least two packets), ``rtt_ms`` of round-trip propagation (which the datapath also takes for the
    flow's RTT before its first sample, as a TCP handshake would have measured it), ``loss_pct`` % of the data packets
    lost at random (ccp-sim's ``[switch] loss_pct``), 1500-byte packets, no ECN, Linux's RTO
    bounds. Competing flows run ``cross_cc`` algorithms (one drawn per flow); ``"bulk"`` ones send
    from a time drawn in the first ``cross_start_s`` until the end, ``"on_off"`` ones alternate
    off and on periods (exponential, mean ``on_off_s`` each), sending in each on period what a
    fair share of the link would carry in it; ``"mix"`` draws the kind per flow.
    """

    rate_mbps: Range = (20.0, 50.0)
    rtt_ms: Range = (20.0, 100.0)
    buffer_bdp: Range = (0.5, 4.0)
    loss_pct: Range = 0.0
    cross_flows: Range = 0
    cross_cc: Sequence[str] = ("cubic", "reno")
    cross_kind: str = "bulk"
    cross_start_s: float = 2.0
    on_off_s: float = 1.0

    def __post_init__(self) -> None:
        for name in ("rate_mbps", "rtt_ms", "buffer_bdp", "loss_pct", "cross_flows"):
            lo, hi = _bounds(getattr(self, name), name)
            if lo < 0 or (name in ("rate_mbps", "rtt_ms", "buffer_bdp") and lo <= 0):
                raise ValueError(f"Links.{name}: {getattr(self, name)!r} must be positive")
        if _bounds(self.loss_pct, "loss_pct")[1] >= 100:
            raise ValueError(f"Links.loss_pct: {self.loss_pct!r} must stay below 100 %")
        if self.cross_kind not in ("bulk", "on_off", "mix"):
            raise ValueError(f"Links.cross_kind: {self.cross_kind!r} is not one of bulk, on_off, mix")
        if not self.cross_cc:
            raise ValueError("Links.cross_cc: name at least one algorithm")
        if not (self.cross_start_s >= 0 and self.on_off_s > 0):
            raise ValueError("Links.cross_start_s must be ≥ 0 and on_off_s > 0")

    def draw(self, rng: np.random.Generator, episode_s: float) -> "Link":
        """One link from this distribution."""
        lo, hi = _bounds(self.rate_mbps, "rate_mbps")
        rate = float(math.exp(rng.uniform(math.log(lo), math.log(hi)))) if hi > lo else lo
        rtt = _uniform(rng, self.rtt_ms)
        buffer = _uniform(rng, self.buffer_bdp)
        loss = _uniform(rng, self.loss_pct)
        lo, hi = _bounds(self.cross_flows, "cross_flows")
        n = int(rng.integers(int(lo), int(hi) + 1))
        cross = []
        for _ in range(n):
            cc = str(self.cross_cc[int(rng.integers(len(self.cross_cc)))])
            kind = self.cross_kind if self.cross_kind != "mix" else ("bulk", "on_off")[int(rng.integers(2))]
            start = float(rng.uniform(0.0, min(self.cross_start_s, episode_s / 2)))
            periods: list[tuple[float, float]] = []
            if kind == "on_off":
                t = start
                while t < episode_s:
                    on = float(rng.exponential(self.on_off_s))
                    periods.append((t, on))
                    t += on + float(rng.exponential(self.on_off_s))
            cross.append(CrossFlow(cc=cc, kind=kind, start_s=start, on_periods=tuple(periods)))
        return Link(rate_mbps=rate, rtt_ms=rtt, buffer_bdp=buffer, loss_pct=loss, cross=tuple(cross))


@dataclass(frozen=True)
class CrossFlow:
    """A competing flow: its algorithm, ``"bulk"`` or ``"on_off"``, when it starts, and (on/off)
    each on period's start and length, seconds."""

    cc: str
    kind: str
    start_s: float
    on_periods: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Link:
    """One episode's drawn link (see :class:`Links` for what each value means)."""

    rate_mbps: float
    rtt_ms: float
    buffer_bdp: float
    loss_pct: float
    cross: tuple[CrossFlow, ...] = ()

    def scenario(self, seed: int, episode_s: float, agent_delay_us: float = 0.0) -> str:
        """The ccp-sim scenario of an episode on this link (TOML); the learner is flow entry 0."""
        senders = 1 + len(self.cross)
        host_delay_us = 1.0
        host_gbps = max(1.0, 10 * self.rate_mbps / 1000)
        bottleneck_delay_us = max(self.rtt_ms * 1000 / 2 - 2 * host_delay_us, 0.0)
        bdp_bytes = self.rate_mbps * 1e6 / 8 * self.rtt_ms / 1000
        port_buffer = max(int(self.buffer_bdp * bdp_bytes), 2 * _WIRE_BYTES)
        lines = [
            'name = "ccp_agent.env"',
            f"seed = {seed}",
            f"duration_ms = {episode_s * 1000!r}",
            "",
            "[topology]",
            'kind = "dumbbell"',
            f"senders = {senders}",
            f"receivers = {senders}",
            f"host_gbps = {host_gbps!r}",
            f"host_delay_us = {host_delay_us!r}",
            f"bottleneck_gbps = {self.rate_mbps / 1000!r}",
            f"bottleneck_delay_us = {bottleneck_delay_us!r}",
            "",
            "[switch]",
            f"buffer_bytes = {port_buffer * (2 * senders + 2)}",
            'admission = "static"',
            f"port_buffer_bytes = {port_buffer}",
            f"loss_pct = {self.loss_pct!r}",
            "",
            "[transport]",
            f"mss_bytes = {_WIRE_BYTES - 40}",
            "header_bytes = 40",
            "ecn = false",
            "rto_min_us = 200000.0",
            "rto_initial_us = 1000000.0",
            "",
            "[cc]",
            'algorithm = "cubic"',
            'reporting = "interval"',
            "report_interval_us = 10000.0",
            # What the TCP handshake would have measured: per-RTT reports start at one per RTT.
            f"initial_rtt_us = {self.rtt_ms * 1000!r}",
            f"agent_delay_us = {agent_delay_us!r}",
            "",
            "[output]",
            f"sample_interval_us = {episode_s * 1e6!r}",
            "monitor = []",
            "plots = false",
            "",
            "[[workload.flows]]",
            "src = 0",
            f"dst = {senders}",
            'label = "learner"',
        ]
        fair_share_bytes_per_s = self.rate_mbps * 1e6 / 8 / senders
        for i, c in enumerate(self.cross):
            src, dst = 1 + i, senders + 1 + i
            spans = [(c.start_s, None)] if c.kind == "bulk" else [(t, max(1, int(on * fair_share_bytes_per_s)))
                                                                   for t, on in c.on_periods]
            for start_s, size in spans:
                lines += ["", "[[workload.flows]]", f"src = {src}", f"dst = {dst}", f"start_us = {start_s * 1e6!r}",
                          f'label = "cross-{i}"', f'cc = {{ algorithm = "{c.cc}" }}']
                if size is not None:
                    lines.append(f"bytes = {size}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class BasePath:
    """The learner's path as the reward normalises by it: its bottleneck's rate, and its round
    trip with every queue empty (propagation plus one packet's serialisation per hop), both as
    the simulator built the episode."""

    bottleneck_mbps: float
    base_rtt_ms: float


@dataclass(frozen=True)
class Reward:
    """The default reward: Aurora's (Jay et al., ICML 2019, §4), made comparable across links.

    Per step (one report on the learner's flow)::

        reward = throughput · delivered_mbps / bottleneck_mbps
               − delay · max(0, mean_rtt / base_rtt − 1)
               − loss · lost / (lost + delivered)

    ``delivered_mbps`` is the data the report says was delivered for the first time (packets
    acknowledged cumulatively or selectively, × MSS) over its interval; ``mean_rtt`` the
    interval's mean RTT sample (no delay term in an interval without one: nothing was delivered,
    and the throughput term is 0); ``lost`` and ``delivered`` the report's packets newly lost and
    delivered; ``bottleneck_mbps`` and ``base_rtt`` the :class:`BasePath`'s.

    Aurora's reward is ``10·throughput − 1000·latency − 2000·loss`` (packets per second,
    seconds, a fraction), whose balance between its terms moves with the link's rate and RTT.
    Here each term is made dimensionless so that randomised links score alike — throughput over
    the bottleneck's rate, latency as its excess over the base RTT, loss as a fraction — and the
    weights keep Aurora's: throughput 10, as in Aurora; delay 10, so that one base RTT of
    queueing (a standing queue of one BDP) costs as much as the whole link's throughput; loss 20,
    twice the delay weight, as Aurora's loss weight is twice its latency weight.

    Any callable ``(report: ccp_agent.Report, path: BasePath) -> float`` may replace this one
    (``CcEnv(reward=…)``).
    """

    throughput: float = 10.0
    delay: float = 10.0
    loss: float = 20.0

    def __call__(self, report: Report, path: BasePath) -> float:
        return self.of(terms(report, path))

    def of(self, t: dict[str, float]) -> float:
        """The reward from its :func:`terms`."""
        return self.throughput * t["utilisation"] - self.delay * t["queueing"] - self.loss * t["loss_fraction"]


def terms(report: Report, path: BasePath) -> dict[str, float]:
    """The default reward's terms for one report: ``utilisation`` (delivered rate over the
    bottleneck's), ``queueing`` (mean RTT over base RTT, minus 1, at least 0; 0 without an RTT
    sample) and ``loss_fraction``."""
    delivered = report.acked_pkts + report.sacked_pkts
    delivered_mbps = delivered * report.mss() * 8 / report.interval_us if report.interval_us > 0 else 0.0
    rtt = report.rtt
    queueing = max(0.0, rtt.mean_us / (path.base_rtt_ms * 1000) - 1) if rtt is not None and rtt.samples else 0.0
    lost = report.lost_pkts
    return {
        "utilisation": delivered_mbps / path.bottleneck_mbps,
        "queueing": queueing,
        "loss_fraction": lost / (lost + delivered) if lost + delivered else 0.0,
    }


class CcEnv(gym.Env):
    """ccp-sim with one flow controlled by the agent being trained (see the module's docs).

    Args:
        scenario: a :class:`Links` distribution (or a ``dict`` of its fields; default
            ``Links()``: 20–50 Mbit/s, 20–100 ms, 0.5–4 BDP of buffer, no loss, no competing
            flow), or the path of a ccp-sim scenario file whose first ``[[workload.flows]]``
            entry (with ``count = 1``) is the learner and whose ``[cc] reporting`` is
            ``"interval"`` (as the agent reports); its other flows keep their algorithms. Each
            episode replaces the scenario's ``seed`` with one drawn from the environment's
            generator. On a WAN path, set ``[cc] initial_rtt_us`` to about the path's RTT (what
            a handshake would have measured): the default, a datacenter's 100 µs, has a per-RTT
            policy called every 100 µs until the first ACK.
        seed: the generator's seed for the first ``reset`` that names none.
        manifest: the policy's manifest (``ccp_learned``'s format): a path to a ``.toml`` file,
            or its text; default :data:`DEFAULT_MANIFEST`. It declares the observation (shape,
            normalisation, clip) and the action (kind and bounds).
        reward: a :class:`Reward` (the default's weights) or any callable
            ``(report: ccp_agent.Report, path: BasePath) -> float``.
        episode_s: simulated seconds per episode for drawn links (a scenario file keeps its own
            ``duration_ms`` unless this is given). The episode is truncated when the simulation
            ends; it never terminates.
        agent_delay_us: time from a report to its action reaching the datapath (drawn links).

    Spaces: ``observation_space`` is a ``Box`` of the manifest's observation shape (without the
    batch axis), each value within ± its feature's clip; ``action_space`` is ``Box(1,)``:
    ``[-clip, clip]`` for ``window_multiplier``, ``[0, max_mbps / scale_mbps]`` for ``rate``. An
    action outside it is applied as the agent would apply the model's output (the action mapping
    clamps it); a non-finite one is refused.

    ``info`` holds ``now_s`` (simulated time of the report), ``cwnd_bytes``, the default
    reward's terms (``utilisation``, ``queueing``, ``loss_fraction``), and, after ``reset``,
    ``link`` (the drawn :class:`Link`, ``None`` for a scenario file) and ``path``
    (:class:`BasePath`).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        scenario: Union[Links, dict, str, os.PathLike[str], None] = None,
        seed: Optional[int] = None,
        manifest: Union[str, os.PathLike[str], None] = None,
        reward: Optional[Callable[[Report, BasePath], SupportsFloat]] = None,
        episode_s: Optional[float] = None,
        agent_delay_us: float = 0.0,
    ) -> None:
        super().__init__()
        self.manifest_text, self.manifest_file = _manifest(manifest)
        spaces = _ccp_agent._manifest_spaces(self.manifest_text, self.manifest_file)
        self.spaces = spaces
        clips = np.asarray(spaces["clips"], dtype=np.float32).reshape(spaces["shape"])
        self.observation_space = gym.spaces.Box(low=-clips, high=clips, dtype=np.float32)
        self.action_space = gym.spaces.Box(low=np.float32(spaces["action_low"]),
                                           high=np.float32(spaces["action_high"]), shape=(1,), dtype=np.float32)
        if scenario is None:
            scenario = Links()
        elif isinstance(scenario, dict):
            scenario = Links(**scenario)
        self.links: Optional[Links] = scenario if isinstance(scenario, Links) else None
        self.scenario_file: Optional[str] = None
        self.scenario_text: Optional[str] = None
        if self.links is None:
            self.scenario_file = os.fspath(scenario)  # type: ignore[arg-type]
            with open(self.scenario_file, encoding="utf-8") as f:
                self.scenario_text = f.read()
        if episode_s is not None and not episode_s > 0:
            raise ValueError(f"episode_s must be positive, not {episode_s}")
        self.episode_s = episode_s
        self.agent_delay_us = agent_delay_us
        self.reward_fn: Callable[[Report, BasePath], SupportsFloat] = reward if reward is not None else Reward()
        self._first_seed = seed
        self._core: Any = None
        self._obs = np.zeros(self.observation_space.shape, dtype=np.float32)
        self.link: Optional[Link] = None
        self.path: Optional[BasePath] = None

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None):
        if seed is None and self._first_seed is not None:
            seed, self._first_seed = self._first_seed, None
        super().reset(seed=seed)
        self.close()
        episode_seed = int(self.np_random.integers(1, 2**63 - 1))
        if self.links is not None:
            episode_s = self.episode_s if self.episode_s is not None else 10.0
            self.link = self.links.draw(self.np_random, episode_s)
            text = self.link.scenario(episode_seed, episode_s, self.agent_delay_us)
            self._core = _ccp_agent._SimCore(text, "ccp_agent.env.toml", self.manifest_text, self.manifest_file, 0, [])
        else:
            overrides = [f"seed={episode_seed}"]
            if self.episode_s is not None:
                overrides.append(f"duration_ms={self.episode_s * 1000!r}")
            self.link = None
            self._core = _ccp_agent._SimCore(self.scenario_text, self.scenario_file, self.manifest_text,
                                             self.manifest_file, 0, overrides)
        self.path = BasePath(bottleneck_mbps=self._core.bottleneck_bps / 1e6, base_rtt_ms=self._core.base_rtt_us / 1000)
        first = self._core.next(None)
        if first is None:
            raise RuntimeError("the episode ended before the learner's flow sent its first report")
        obs, info, _ = self._observe(*first)
        info.update(link=self.link, path=self.path)
        return obs, info

    def step(self, action):
        if self._core is None:
            raise RuntimeError("call reset() before step()")
        a = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
        if not math.isfinite(a):
            raise ValueError(f"the action must be a finite number, not {a}")
        out = self._core.next(a)
        if out is None:
            # The simulation ended before another report: nothing more to observe or reward.
            return self._obs.copy(), 0.0, False, True, {}
        obs, info, report = self._observe(*out)
        r = self.reward_fn.of(info) if isinstance(self.reward_fn, Reward) else self.reward_fn(report, self.path)
        return obs, float(r), False, False, info

    def _observe(self, observation: bytes, report: Report):
        obs = np.frombuffer(observation, dtype=np.float32).reshape(self.observation_space.shape)
        self._obs = obs
        info: dict[str, Any] = {"now_s": report.now_us / 1e6, "cwnd_bytes": report.cwnd_bytes,
                                **terms(report, self.path)}
        return obs.copy(), info, report

    def close(self) -> None:
        if self._core is not None:
            self._core.close()
            self._core = None


#: The id ``gymnasium.make`` knows the environment by.
ENV_ID = "ccp_agent/CcEnv-v0"
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="ccp_agent.env:CcEnv")

_WIRE_BYTES = 1500


def _bounds(v: Range, name: str) -> tuple[float, float]:
    if isinstance(v, (int, float)):
        return float(v), float(v)
    lo, hi = v
    if not lo <= hi:
        raise ValueError(f"Links.{name}: {v!r}: lo must not exceed hi")
    return float(lo), float(hi)


def _uniform(rng: np.random.Generator, v: Range) -> float:
    lo, hi = v if not isinstance(v, (int, float)) else (v, v)
    return float(rng.uniform(lo, hi)) if hi > lo else float(lo)


def _manifest(manifest: Union[str, os.PathLike[str], None]) -> tuple[str, str]:
    """The manifest's text and the name its errors give it."""
    if manifest is None:
        return DEFAULT_MANIFEST, "ccp_agent.env.DEFAULT_MANIFEST"
    if isinstance(manifest, str) and "\n" in manifest:
        return manifest, "manifest"
    path = os.fspath(manifest)
    with open(path, encoding="utf-8") as f:
        return f.read(), path
