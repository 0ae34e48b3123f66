"""Random walks with NumPy: many short walks, first-passage times, mean squared distance."""
import numpy as np


def walks(rng, count, steps):
    return np.cumsum(rng.choice([-1, 1], size=(count, steps)), axis=1)


def first_passage(walk, level):
    hits = np.nonzero(np.abs(walk) >= level)[0]
    return int(hits[0]) if hits.size else -1


def msd(paths):
    return (paths.astype(float) ** 2).mean(axis=0)


def main(n):
    rng = np.random.default_rng(15)
    paths = walks(rng, n, 200)
    passages = [first_passage(p, 10) for p in paths]
    return float(msd(paths)[-1]), sum(p for p in passages if p >= 0), passages.count(-1)


SIZES = {"tiny": 4, "quick": 300}
