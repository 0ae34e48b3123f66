"""Prefix sums and a summed-area table built by loops, box sums queried from it, checked
against cumsum."""
import numpy as np


def prefix(x):
    out = np.empty(len(x) + 1, dtype=x.dtype)
    out[0] = 0
    for i in range(len(x)):
        out[i + 1] = out[i] + x[i]
    return out


def table(img):
    h, w = img.shape
    s = np.zeros((h + 1, w + 1), dtype=np.int64)
    for i in range(h):
        row = 0
        for j in range(w):
            row += int(img[i, j])
            s[i + 1, j + 1] = s[i, j + 1] + row
    return s


def box(s, r0, c0, r1, c1):
    return s[r1, c1] - s[r0, c1] - s[r1, c0] + s[r0, c0]


def main(n):
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, size=(n, n), dtype=np.uint8)
    s = table(img)
    ref = np.zeros_like(s)
    ref[1:, 1:] = img.astype(np.int64).cumsum(0).cumsum(1)
    boxes = [int(box(s, i, i, n - i, n - i // 2)) for i in range(n // 2)]
    p = prefix(np.arange(n, dtype=np.int32) - n // 2)
    return bool(np.array_equal(s, ref)), boxes, p


SIZES = {"tiny": 6, "quick": 80}
