"""Simpson's rule and adaptive Simpson (recursive) on a few integrands."""
import math


def simpson(f, a, b, n):
    if n % 2:
        n += 1
    h = (b - a) / n
    s = f(a) + f(b)
    for i in range(1, n):
        s += (4 if i % 2 else 2) * f(a + i * h)
    return s * h / 3


def _adaptive(f, a, b, fa, fm, fb, whole, eps, depth):
    m = (a + b) / 2
    lm, rm = (a + m) / 2, (m + b) / 2
    flm, frm = f(lm), f(rm)
    left = (m - a) / 6 * (fa + 4 * flm + fm)
    right = (b - m) / 6 * (fm + 4 * frm + fb)
    if depth <= 0 or abs(left + right - whole) <= 15 * eps:
        return left + right + (left + right - whole) / 15
    return (_adaptive(f, a, m, fa, flm, fm, left, eps / 2, depth - 1)
            + _adaptive(f, m, b, fm, frm, fb, right, eps / 2, depth - 1))


def adaptive_simpson(f, a, b, eps=1e-9):
    fa, fb, fm = f(a), f(b), f((a + b) / 2)
    whole = (b - a) / 6 * (fa + 4 * fm + fb)
    return _adaptive(f, a, b, fa, fm, fb, whole, eps, 40)


def gaussian(x):
    return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def main(n):
    return (simpson(gaussian, -3, 3, n), simpson(math.cos, 0, 1, n),
            adaptive_simpson(gaussian, -3, 3), adaptive_simpson(math.log1p, 0, 5))


SIZES = {"tiny": 20, "quick": 20000}
