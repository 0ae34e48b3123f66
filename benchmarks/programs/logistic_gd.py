"""Logistic regression by batch gradient descent with NumPy: in-place parameter updates,
a loss history in a list, early stopping on a tolerance."""
import numpy as np


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def loss(w, b, X, y):
    p = sigmoid(X @ w + b)
    eps = 1e-12
    return -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))


def fit(X, y, lr=0.1, epochs=200, tol=1e-7):
    w = np.zeros(X.shape[1])
    b = 0.0
    history = []
    for epoch in range(epochs):
        p = sigmoid(X @ w + b)
        err = p - y
        w -= lr * (X.T @ err) / len(y)
        b -= lr * err.mean()
        history.append(loss(w, b, X, y))
        if epoch > 0 and abs(history[-2] - history[-1]) < tol:
            break
    return w, b, history


def main(n):
    rng = np.random.default_rng(9)
    X = rng.standard_normal((n, 3))
    y = (X @ np.array([1.5, -2.0, 0.5]) + 0.3 * rng.standard_normal(n) > 0).astype(float)
    w, b, hist = fit(X, y)
    acc = float(((sigmoid(X @ w + b) > 0.5) == y).mean())
    return w, b, len(hist), hist[-1], acc


SIZES = {"tiny": 20, "quick": 2000}
