"""CPython-version facts in one place: which interpreter the C hook supports, and 3.11 flags."""
import inspect
import sys

SUPPORTED = sys.version_info[:2] == (3, 11)

# Code flags whose frames the hook never intercepts (their frames resume mid-code).
GENERATOR_LIKE = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                  | inspect.CO_ITERABLE_COROUTINE)


def arg_slot_count(code) -> int:
    """Number of leading localsplus slots that hold arguments at frame start (3.11 layout)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS)
    n += bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return n
