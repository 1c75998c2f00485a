# The Python side of the python_action fuzz target: an algorithm that returns whatever the
# target put in this module, and the odd kinds of value Python code can hand the host.
import sys

from ccp_agent import Action

# The target finds this module under a fixed name (the loader picks its own).
sys.modules["ccp_fuzz"] = sys.modules[__name__]

init_value = None
report_value = None
state_value = None


class Returns:
    """Returns what the fuzz target chose."""

    def init(self, flow):
        return init_value

    def on_report(self, report):
        return report_value

    def state(self):
        return state_value


class FloatLike:
    """A number only through __float__ (whatever that returns)."""

    def __init__(self, v):
        self.v = v

    def __float__(self):
        return self.v


class IndexLike:
    """An integer only through __index__ (whatever that returns)."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


class Raising:
    """A number whose every conversion raises."""

    def __float__(self):
        raise ValueError("fuzz: no float")

    def __index__(self):
        raise ValueError("fuzz: no index")


class MyInt(int):
    pass


class MyFloat(float):
    pass


class ActionLike:
    """Has an Action's attributes without being one."""

    cwnd_bytes = 14480.0
    pacing_rate_bytes_per_s = None
    pacing_off = False
    report_every_us = None
    report_per_rtt = None
    rtt_threshold_us = None
    report_acked_pkts = None
    ack_aggregation_bw_bytes_per_s = None


def function():
    return Action(1.0)


def big(negative, exponent, offset):
    n = 2**exponent + offset
    return -n if negative else n


def int_from(data):
    return int.from_bytes(data, "little", signed=True)


def surrogate(n):
    return chr(0xD800 + n)
