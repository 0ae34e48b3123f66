"""Python loops over NumPy array elements: running max, moving average, peak counting."""
import numpy as np


def running_max(a):
    out = np.empty_like(a)
    m = a[0]
    for i in range(len(a)):
        if a[i] > m:
            m = a[i]
        out[i] = m
    return out


def moving_average(a, w):
    out = np.zeros(len(a) - w + 1)
    s = a[:w].sum()
    out[0] = s / w
    for i in range(1, len(out)):
        s += a[i + w - 1] - a[i - 1]
        out[i] = s / w
    return out


def count_peaks(a):
    peaks = 0
    for i in range(1, len(a) - 1):
        if a[i] > a[i - 1] and a[i] > a[i + 1]:
            peaks += 1
    return peaks


def main(n):
    rng = np.random.default_rng(26)
    a = rng.standard_normal(n).cumsum()
    return float(running_max(a)[-1]), float(moving_average(a, 5).sum()), count_peaks(a)


SIZES = {"tiny": 20, "quick": 20000}
