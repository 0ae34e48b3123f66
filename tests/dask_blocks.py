"""Jitted block functions for the Dask tests, in a module of their own: Dask workers unpickle
them by reference (module and name), so they import this module, not the test file. Also the
worker side of the tests: what a worker's pijit compiled and what its kernel log said."""
import logging
import os

import numpy as np

import pijit


@pijit.jit
def fused_chain(x):
    return np.exp(-x * x) * 0.5 + np.sqrt(np.abs(x)) * x - 1.0


@pijit.jit
def row_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


_messages: list = []


class _Recorder(logging.Handler):
    def emit(self, record):
        _messages.append(record.getMessage().partition("\n")[0])     # not a kernel's C


def record_kernel_log():
    """In a worker (client.run): keep the first line of every message of pijit.kernels from
    now on (a build says 'compiling <module>', a load from disk 'kernel cache hit <path>')."""
    logger = logging.getLogger("pijit.kernels")
    if not any(isinstance(h, _Recorder) for h in logger.handlers):
        logger.addHandler(_Recorder())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False        # the debug messages (kernel C) stay out of the worker's log


def report(fn):
    """In a worker (client.run): its pid, pijit.stats(fn) and its kernel messages so far."""
    return {"pid": os.getpid(), "stats": pijit.stats(fn), "log": list(_messages)}
