"""Sobel edge detection on small images, with a Python loop over images of a batch."""
import numpy as np

KX = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=float)
KY = KX.T


def convolve3(img, k):
    h, w = img.shape
    out = np.zeros((h - 2, w - 2))
    for i in range(3):
        for j in range(3):
            out += k[i, j] * img[i:i + h - 2, j:j + w - 2]
    return out


def sobel(img):
    gx = convolve3(img, KX)
    gy = convolve3(img, KY)
    return np.hypot(gx, gy)


def edge_fraction(images, level):
    fractions = []
    for img in images:
        mag = sobel(img)
        fractions.append(float((mag > level).mean()))
    return fractions


def main(n):
    rng = np.random.default_rng(12)
    images = [rng.random((24, 24)) for _ in range(n)]
    return edge_fraction(images, 1.5)


SIZES = {"tiny": 2, "quick": 60}
