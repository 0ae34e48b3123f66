"""Image-style NumPy code: thresholds with masks, clipping, uint8 casts, histogram
equalisation with a lookup table, and a bounding box of a mask."""
import numpy as np


def normalise(img):
    lo, hi = img.min(), img.max()
    return ((img - lo) / (hi - lo) * 255).astype(np.uint8)


def equalise(img):
    hist = np.bincount(img.ravel(), minlength=256)
    cdf = hist.cumsum()
    cdf_min = cdf[cdf > 0][0]
    lut = np.round((cdf - cdf_min) / (cdf[-1] - cdf_min) * 255)
    lut = np.clip(lut, 0, 255).astype(np.uint8)
    return lut[img]


def threshold(img, t):
    out = np.zeros_like(img)
    out[img > t] = 255
    out[(img > t // 2) & (img <= t)] = 128
    return out


def bbox(mask):
    rows = np.any(mask, axis=1)
    cols = np.any(mask, axis=0)
    if not rows.any():
        return None
    r0, r1 = np.where(rows)[0][[0, -1]]
    c0, c1 = np.where(cols)[0][[0, -1]]
    return int(r0), int(r1), int(c0), int(c1)


def main(n):
    rng = np.random.default_rng(2)
    yy, xx = np.mgrid[0:n, 0:n]
    img = np.exp(-((xx - n / 3) ** 2 + (yy - n / 2) ** 2) / (n * 2.0)) + 0.05 * rng.random((n, n))
    u8 = normalise(img)
    eq = equalise(u8)
    th = threshold(eq, 200)
    return u8.sum(dtype=np.int64), eq, th.mean(), bbox(th == 255)


SIZES = {"tiny": 8, "quick": 160}
