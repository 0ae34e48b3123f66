"""Monte Carlo pi with np.random in batches, and the batch estimates' spread."""
import numpy as np


def batch_estimate(rng, size):
    pts = rng.random((size, 2))
    inside = (pts ** 2).sum(axis=1) <= 1.0
    return 4.0 * inside.mean()


def estimate(batches, size, seed=0):
    rng = np.random.default_rng(seed)
    estimates = np.array([batch_estimate(rng, size) for _ in range(batches)])
    return estimates.mean(), estimates.std()


def main(n):
    return estimate(n, 1000)


SIZES = {"tiny": 3, "quick": 60}
