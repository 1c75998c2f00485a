"""Write ccp-agent congestion control algorithms in Python.

An algorithm is a class with ``init(flow)`` and ``on_report(report)``, each returning an
``Action`` or ``None``; ccp-agent runs it as ``py:path/to/file.py:ClassName`` on every datapath,
in ccp-sim and in ccp-lab. Units are the Rust contract's: times in µs, sizes in bytes, rates in
bytes per second.
"""

from typing import ClassVar, Mapping, Optional, Sequence, Union

MIN_CWND_PKTS: float
"""The window floor the agent enforces, packets."""

class RttStats:
    """RTT statistics of one report interval, µs."""
    min_us: int
    max_us: int
    last_us: int
    srtt_us: int
    mean_us: int
    samples: int
    def __init__(self, *, min_us: int = 0, max_us: int = 0, last_us: int = 0, srtt_us: int = 0,
                 mean_us: int = 0, samples: int = 0) -> None: ...

class QcnFeedback:
    """A QCN congestion notification (IEEE 802.1Qau) for the flow."""
    fb_quantized: int
    q_off_bytes: int
    q_delta_bytes: int

class IntHop:
    """One hop of in-band network telemetry (HPCC)."""
    queue_bytes: int
    tx_bytes: int
    ts_ns: int
    rate_bps: int

class IntFeedback:
    """In-band network telemetry echoed in the flow's ACKs, one hop per switch in path order."""
    hops: list[IntHop]

class Report:
    """What the datapath measured over one report interval (or at an urgent event).

    Build one by hand for a test: ``Report(now_us=10_000, acked_bytes=14480, rtt=RttStats(...))``;
    fields not given are zero or None.
    """
    now_us: int
    interval_us: int
    mss_bytes: int
    acked_bytes: int
    acked_pkts: int
    sacked_bytes: int
    sacked_pkts: int
    lost_pkts: int
    timeouts: int
    ce_bytes: int
    ce_pkts: int
    ece_acks: int
    rtt_samples_over_threshold: int
    send_rate_bytes_per_s: Optional[int]
    recv_rate_bytes_per_s: Optional[int]
    max_delivery_rate_bytes_per_s: Optional[int]
    """The fastest of the interval's per-ACK rate samples (what BBR's max filter takes); None
    where the datapath takes no per-ACK samples."""
    extra_acked_bytes: Optional[int]
    """ACK aggregation against Action.ack_aggregation_bw_bytes_per_s (tcp_bbr.c's extra_acked),
    the interval's largest per-ACK value; None where the datapath does not measure it or no rate
    was set."""
    inflight_bytes: int
    unacked_bytes: int
    """Sent and not cumulatively acknowledged (snd_nxt - snd_una); 0 where the datapath does not
    say."""
    pending_bytes: int
    cwnd_bytes: int
    pacing_rate_bytes_per_s: Optional[int]
    app_limited: bool
    cwnd_limited: bool
    """The window limited the sender during the interval (Linux's tcp_is_cwnd_limited); a window
    the flow does not fill must not grow. True where the datapath cannot tell."""
    rtt: Optional[RttStats]
    urgent: Optional[str]
    """``"loss"``, ``"timeout"``, ``"state_change"`` or None."""
    feedback: Optional[Union[QcnFeedback, IntFeedback]]
    def __init__(self, **fields: object) -> None: ...
    def mss(self) -> float:
        """The MSS as a float, never below 1."""
    def has_loss(self) -> bool:
        """Whether the interval saw a loss or a timeout."""

class Seed:
    """Live state of a flow taken over from its previous algorithm."""
    cwnd_bytes: int
    pacing_rate_bytes_per_s: Optional[int]
    srtt_us: Optional[int]
    min_rtt_us: Optional[int]
    last_report: Optional[Report]

class FlowStart:
    """What the agent knows about a flow when it hands it to the algorithm."""
    now_us: int
    mss_bytes: int
    init_cwnd_bytes: int
    ecn: Optional[bool]
    seed: Optional[Seed]
    """Set when the flow ran under another algorithm (hot swap, attach, agent restart)."""
    start_cwnd_bytes: int
    """The seeded window if there is a seed, else the datapath's initial window."""
    def __init__(self, *, mss_bytes: int = 1448, init_cwnd_bytes: int = 14480, now_us: int = 0,
                 ecn: Optional[bool] = None) -> None: ...
    def mss(self) -> float: ...

class Action:
    """What an algorithm asks of the datapath; fields left None stay as they are.

    ``report_every_us`` and ``report_per_rtt`` exclude each other, as do
    ``pacing_rate_bytes_per_s`` and ``pacing_off``.
    """
    cwnd_bytes: Optional[float]
    pacing_rate_bytes_per_s: Optional[float]
    pacing_off: bool
    report_every_us: Optional[int]
    report_per_rtt: Optional[float]
    rtt_threshold_us: Optional[int]
    report_acked_pkts: Optional[int]
    ack_aggregation_bw_bytes_per_s: Optional[float]
    def __init__(self, cwnd_bytes: Optional[float] = None, *, pacing_rate_bytes_per_s: Optional[float] = None,
                 pacing_off: bool = False, report_every_us: Optional[int] = None,
                 report_per_rtt: Optional[float] = None, rtt_threshold_us: Optional[int] = None,
                 report_acked_pkts: Optional[int] = None,
                 ack_aggregation_bw_bytes_per_s: Optional[float] = None) -> None: ...

class Param:
    """A declared parameter; the default's type (float, int, bool, str) is the parameter's.

    ``min``/``max`` are inclusive; a str parameter lists its ``choices``.
    """
    name: str
    default: Union[float, int, bool, str]
    unit: str
    min: Optional[float]
    max: Optional[float]
    choices: Optional[list[str]]
    doc: str
    def __init__(self, name: str, default: Union[float, int, bool, str], *, unit: str = "",
                 min: Optional[float] = None, max: Optional[float] = None,
                 choices: Optional[Sequence[str]] = None, doc: str = "") -> None: ...

class Algorithm:
    """Optional base class of a Python congestion controller.

    One instance per flow, built as ``cls(**params)``: each declared parameter becomes an
    attribute. ``init`` runs once, ``on_report`` for every report, in order. A call that raises,
    returns another type, asks for a NaN window or runs past the agent's time budget is a
    contained fault: the flow keeps its last sane window; repeated faults hand it to the
    fallback algorithm.
    """
    params: ClassVar[Sequence[Param]]
    reference: ClassVar[str]
    def __init__(self, **params: object) -> None: ...
    def init(self, flow: FlowStart) -> Optional[Action]: ...
    def on_report(self, report: Report) -> Optional[Action]: ...
    def state(self) -> Mapping[str, float]: ...
