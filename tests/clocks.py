"""Stand-in clocks of give-back tests: a give-back waits for plain calls under 2 us each, a
time a loaded machine misses, so these tests time plain runs on a clock ticking a fixed step
a read: 0.1 us (what a small function's plain call costs on a quiet machine), or a costly
call's 0.5 ms."""
import contextlib

from pijit import eval_frame


@contextlib.contextmanager
def ticking_clock(step: float):
    clock = [0.0]

    def tick():
        clock[0] += step
        return clock[0]
    eval_frame.set_perf_clock(tick)
    try:
        yield
    finally:
        eval_frame.set_perf_clock(None)


def cheap_plain_runs():
    return ticking_clock(1e-7)
