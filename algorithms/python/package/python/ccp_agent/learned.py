"""Learned policies (``onnx:path/model.onnx`` with its manifest ``path/model.toml``) run outside
the agent exactly as the agent runs them, to check a trained model against its reference.

Both functions load the model through ccp-agent's own code (``ccp_learned``: the manifest, tract's
optimised plan, the observer and the action mapping). The inference deadline is off here: a check
must not depend on how busy the host is.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence, TypedDict, Union

from ccp_agent import _ccp_agent

__all__ = ["infer", "replay", "ReplayStep"]


def infer(model_path: Union[str, os.PathLike[str]], observation: Sequence[float]) -> float:
    """The model's output for one observation, as the agent computes it.

    ``observation`` holds the manifest's ``history × features`` values, oldest report first (the
    layout ``ccp_agent.env.CcEnv`` observes); they reach the model as float32. Raises
    ``ValueError`` naming the file when the model or its manifest cannot be loaded, or when the
    observation has the wrong length.
    """
    return _ccp_agent._learned_infer(os.fspath(model_path), [float(x) for x in observation])


class ReplayStep(TypedDict):
    """What the policy did with one replayed report."""

    flow: int
    cwnd_bytes: Optional[float]
    pacing_bytes_per_s: Optional[float]
    output: float
    error: Optional[str]


def replay(model_path: Union[str, os.PathLike[str]],
           reports_jsonl: Union[str, os.PathLike[str]]) -> list[ReplayStep]:
    """Recorded reports replayed through the policy, as ``onnx:`` runs it in the agent.

    ``reports_jsonl``: JSON lines, each a recorded report (``{"flow": …, "report": {…}}``, as
    ``ccp-sim run --record-reports`` writes) or a bare report (flow 0); a ``str`` is the text, a
    path (``pathlib.Path``) is read. Each flow gets its own instance of the policy's algorithm,
    started with the MSS and window of its first report, then given its reports in order. One
    entry per report: the action's ``cwnd_bytes`` and ``pacing_bytes_per_s`` (``None`` when it
    sets none), the model's ``output``, and ``error`` (``None``, or why the call failed, e.g. a
    NaN output).
    """
    if not isinstance(reports_jsonl, str):
        with open(reports_jsonl, encoding="utf-8") as f:
            reports_jsonl = f.read()
    return _ccp_agent._learned_replay(os.fspath(model_path), reports_jsonl)
