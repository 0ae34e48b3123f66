"""A Runge-Kutta 4 integrator with a NumPy state vector and a Python right-hand side
(Lotka-Volterra and a damped pendulum), storing the trajectory row by row."""
import math

import numpy as np


def lotka(t, y, a=1.1, b=0.4, c=0.4, d=0.1):
    return np.array([a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - c * y[1]])


def pendulum(t, y):
    return np.array([y[1], -0.2 * y[1] - 9.81 * math.sin(y[0])])


def rk4(f, y0, t0, t1, steps):
    h = (t1 - t0) / steps
    ys = np.empty((steps + 1, len(y0)))
    ys[0] = y0
    y, t = np.asarray(y0, dtype=float), t0
    for i in range(steps):
        k1 = f(t, y)
        k2 = f(t + h / 2, y + h / 2 * k1)
        k3 = f(t + h / 2, y + h / 2 * k2)
        k4 = f(t + h, y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += h
        ys[i + 1] = y
    return ys


def main(n):
    a = rk4(lotka, [10.0, 5.0], 0.0, 20.0, n)
    b = rk4(pendulum, [1.0, 0.0], 0.0, 10.0, n)
    return a[-1], b[-1], a.max(axis=0), float(b[:, 0].min())


SIZES = {"tiny": 200, "quick": 2000}
