"""Small NumPy math in a Python loop: trig tables, Fourier coefficients of a square wave."""
import numpy as np


def fourier_coefficients(signal, harmonics):
    t = np.linspace(0, 2 * np.pi, signal.size, endpoint=False)
    coeffs = []
    for k in range(1, harmonics + 1):
        a = 2 * np.mean(signal * np.cos(k * t))
        b = 2 * np.mean(signal * np.sin(k * t))
        coeffs.append((a, b))
    return coeffs


def reconstruct(coeffs, n):
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    out = np.zeros(n)
    for k, (a, b) in enumerate(coeffs, 1):
        out += a * np.cos(k * t) + b * np.sin(k * t)
    return out


def main(n):
    t = np.linspace(0, 2 * np.pi, 256, endpoint=False)
    square = np.sign(np.sin(t))
    coeffs = fourier_coefficients(square, n)
    approx = reconstruct(coeffs, 256)
    error = float(np.abs(approx - square).mean())
    return round(error, 10), [round(float(b), 10) for _, b in coeffs[:4]]


SIZES = {"tiny": 3, "quick": 120}
