# Executed into the ccp_agent module's namespace when the module initialises (embedded in
# ccp-agent or imported from the wheel): the parts of the API that are plain Python.


class Algorithm:
    """Base class for a congestion controller written in Python.

    ccp-agent builds one instance per flow: ``cls(**params)``, with every parameter the class
    declares in ``params`` validated and filled in with its default, then calls ``init`` once and
    ``on_report`` for every report on the flow, in order. Both return an ``Action`` (or ``None``:
    change nothing). Subclassing is optional: any class with these methods will do.

    Class attributes:
        params: a sequence of ``Param``; each becomes an instance attribute of that name.
        reference: the paper, RFC or spec section the algorithm implements (listed by
            ``ccp-agent algorithms``). The first line of the class docstring is its summary.

    The algorithm is a pure state machine: time comes in with the report (``report.now_us``).
    A call that raises, returns something other than an ``Action`` or ``None``, asks for a NaN
    window or runs past the agent's time budget is a contained fault: the flow keeps its last
    sane window, and repeated faults hand it to the agent's fallback algorithm.
    """

    params = ()
    reference = ""

    def __init__(self, **params):
        for name, value in params.items():
            setattr(self, name, value)

    def init(self, flow):
        """Called once per flow, before the first report. ``flow`` is a ``FlowStart``."""
        return None

    def on_report(self, report):
        """Called for every report on the flow. ``report`` is a ``Report``."""
        raise NotImplementedError(f"{type(self).__name__} must define on_report(self, report)")

    def state(self):
        """Named internal state for ``ccp-agent ctl status``: a mapping of name to number."""
        return {}
