"""Linear regression by gradient descent on small NumPy arrays, and the normal equations."""
import numpy as np


def predict(x, w, b):
    return x @ w + b


def loss(x, y, w, b):
    r = predict(x, w, b) - y
    return float((r * r).mean())


def gradient_step(x, y, w, b, lr):
    r = predict(x, w, b) - y
    gw = 2 * x.T @ r / len(y)
    gb = 2 * r.mean()
    return w - lr * gw, b - lr * gb


def fit(x, y, epochs, lr):
    w = np.zeros(x.shape[1])
    b = 0.0
    history = []
    for epoch in range(epochs):
        w, b = gradient_step(x, y, w, b, lr)
        if epoch % 10 == 0:
            history.append(loss(x, y, w, b))
    return w, b, history


def main(n):
    rng = np.random.default_rng(21)
    x = rng.standard_normal((n, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.01 * rng.standard_normal(n)
    w, b, history = fit(x, y, 200, 0.1)
    exact = np.linalg.lstsq(np.c_[x, np.ones(n)], y, rcond=None)[0]
    return w.round(8).tolist(), round(float(b), 8), history[-1], exact.round(8).tolist()


SIZES = {"tiny": 10, "quick": 80}
