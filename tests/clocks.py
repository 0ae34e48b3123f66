"""The stand-in clock of give-back tests: a give-back waits for plain calls under 2 us each,
a time a loaded machine misses, so these tests time plain runs on a clock ticking 0.1 us a
read (what a small function's plain call costs on a quiet machine)."""
import contextlib

from pijit import eval_frame


@contextlib.contextmanager
def cheap_plain_runs():
    clock = [0.0]

    def tick():
        clock[0] += 1e-7
        return clock[0]
    eval_frame.set_perf_clock(tick)
    try:
        yield
    finally:
        eval_frame.set_perf_clock(None)
