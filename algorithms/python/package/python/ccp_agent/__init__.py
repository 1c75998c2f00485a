"""Write ccp-agent congestion control algorithms in Python (the API below: ``Report``,
``FlowStart``, ``Action``, ``Param``, ``Algorithm``); train learned ones in the Gymnasium
environment ``ccp_agent.env.CcEnv`` over ccp-sim; run ONNX policies as the agent does with
``ccp_agent.learned``.

The API is the extension module ccp-agent itself embeds, re-exported here.
"""

from ccp_agent import _ccp_agent
from ccp_agent._ccp_agent import *  # noqa: F401,F403

# The engine of ccp_agent.env and ccp_agent.learned stays out of the public names.
__all__ = [name for name in _ccp_agent.__all__ if not name.startswith("_")]
