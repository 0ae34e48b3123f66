"""Histograms and running statistics of many small NumPy samples."""
import numpy as np


def summarize(sample, bins):
    counts, edges = np.histogram(sample, bins=bins, range=(-4, 4))
    centre = (edges[:-1] + edges[1:]) / 2
    return counts, float((counts * centre).sum() / max(counts.sum(), 1))


def running_stats(samples):
    count, mean, m2 = 0, 0.0, 0.0
    for s in samples:
        for x in s[:5]:
            count += 1
            delta = x - mean
            mean += delta / count
            m2 += delta * (x - mean)
    return mean, m2 / (count - 1)


def main(n):
    rng = np.random.default_rng(18)
    samples = [rng.standard_normal(50) for _ in range(n)]
    total = np.zeros(16, dtype=np.int64)
    centres = []
    for s in samples:
        counts, c = summarize(s, 16)
        total += counts
        centres.append(c)
    m, v = running_stats(samples)
    return total.tolist(), round(sum(centres), 9), float(m), float(v)


SIZES = {"tiny": 3, "quick": 400}
