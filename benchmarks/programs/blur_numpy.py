"""Image filters on small NumPy images: box blur by shifted slices, threshold, erosion."""
import numpy as np


def make_image(n, seed):
    rng = np.random.default_rng(seed)
    img = rng.random((n, n))
    img[n // 4:n // 2, n // 4:n // 2] += 1.0
    return img


def box_blur(img):
    padded = np.pad(img, 1, mode="edge")
    out = np.zeros_like(img)
    for dy in range(3):
        for dx in range(3):
            out += padded[dy:dy + img.shape[0], dx:dx + img.shape[1]]
    return out / 9.0


def threshold(img, level):
    return (img > level).astype(np.uint8)


def erode(mask):
    m = np.pad(mask, 1)
    return (m[1:-1, 1:-1] & m[:-2, 1:-1] & m[2:, 1:-1] & m[1:-1, :-2] & m[1:-1, 2:])


def main(n):
    img = make_image(n, 11)
    for _ in range(3):
        img = box_blur(img)
    mask = erode(threshold(img, img.mean()))
    return float(img.sum()), int(mask.sum())


SIZES = {"tiny": 8, "quick": 64}
