"""k-means on small 2-D NumPy point clouds, with a Python loop over iterations and clusters."""
import numpy as np


def assign(points, centroids):
    d = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    return d.argmin(axis=1)


def update(points, labels, k, old):
    new = old.copy()
    for j in range(k):
        members = points[labels == j]
        if len(members):
            new[j] = members.mean(axis=0)
    return new


def kmeans(points, k, iters):
    centroids = points[:k].copy()
    for _ in range(iters):
        labels = assign(points, centroids)
        centroids = update(points, labels, k, centroids)
    return centroids, labels


def main(n):
    rng = np.random.default_rng(20)
    centres = np.array([[0, 0], [5, 5], [0, 5]], dtype=float)
    points = np.concatenate([c + rng.standard_normal((n, 2)) for c in centres])
    rng.shuffle(points)
    c, labels = kmeans(points, 3, 15)
    return np.sort(c, axis=0).round(6).tolist(), np.bincount(labels).tolist()


SIZES = {"tiny": 5, "quick": 150}
