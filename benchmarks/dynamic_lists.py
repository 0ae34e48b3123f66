"""`python -m benchmarks.dynamic_lists`: library-style functions called with lists of many lengths.

Issue 18: statistics on a list of values, a polynomial on a list of coefficients and a
distance between two lists of points are called with lists of a new length at almost every
call. Each function runs over the same `--lengths` distinct lengths (1 .. N, shuffled), plain
and jitted, in alternating rounds (plain, jit, plain, jit...), each jit round a fresh jitted
function from pijit.reset, so it includes capture and compiles as a user's program pays
them ("jit"), then the same calls again on the entries it made ("warm"). Time is CPU time
(time.process_time) over the pass; the table gives the median round and the ratios to
plain, with how the jitted calls ran (graphs compiled, breaks, cache hits, over both
passes) and the adaptive policy as the environment sets it (PIJIT_ADAPTIVE).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import numpy as np

import pijit

X = np.linspace(-1.0, 1.0, 64)


def scaled_by_mean(x, vals):
    return np.sqrt(x * x + 1.0) * np.mean(vals)


def horner(coeffs, x):
    return np.polyval(coeffs, x)


def coefficient_ops(coeffs, x):
    c = np.asarray(coeffs)
    return np.sum(c * np.abs(x[: 1]) ** 2.0) + np.mean(x) * len(coeffs)


def distance(p, q):
    d = np.asarray(p) - np.asarray(q)
    return np.sqrt(np.dot(d, d)) / len(p)


CASES = {
    "np.mean(vals)": (scaled_by_mean, lambda n, r: (X, [r.random() for _ in range(n)])),
    "np.polyval(coeffs, x)": (horner, lambda n, r: ([r.random() for _ in range(n)], X)),
    "asarray(coeffs) ops, len": (coefficient_ops,
                                 lambda n, r: ([r.random() for _ in range(n)], X)),
    "distance(p, q)": (distance, lambda n, r: ([r.random() for _ in range(n)],
                                               [r.random() for _ in range(n)])),
}


def one_round(fn, inputs) -> float:
    start = time.process_time()
    for args in inputs:
        fn(*args)
    return time.process_time() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--level", default="O1")
    args = parser.parse_args(argv)
    print(f"pijit {pijit.__file__}; PIJIT_ADAPTIVE={os.environ.get('PIJIT_ADAPTIVE', '(unset)')}"
          f"; jit_level {args.level}; {args.lengths} lengths; {args.rounds} rounds")
    print(f"{'function':26} {'plain ms':>9} {'jit ms':>9} {'warm ms':>9} {'jit/plain':>9} "
          f"{'warm/plain':>10}  compiles breaks hits")
    for name, (fn, make) in CASES.items():
        rng = random.Random(18)
        lengths = list(range(1, args.lengths + 1))
        rng.shuffle(lengths)
        inputs = [make(n, rng) for n in lengths]
        jitted = pijit.jit(fn, jit_config={"jit_level": args.level})
        plain, jit, warm = [], [], []
        for _ in range(args.rounds):
            plain.append(one_round(fn, inputs))
            time.sleep(0.05)
            pijit.reset(jitted)
            jit.append(one_round(jitted, inputs))
            warm.append(one_round(jitted, inputs))
            time.sleep(0.05)
        s = pijit.stats(jitted)
        p, j, w = (statistics.median(t) * 1e3 for t in (plain, jit, warm))
        print(f"{name:26} {p:9.1f} {j:9.1f} {w:9.1f} {j / p:9.2f} {w / p:10.2f}  "
              f"{s['compile_count']:8} {s['break_count']:6} {s['cache_hits']:4}")


if __name__ == "__main__":
    main()
