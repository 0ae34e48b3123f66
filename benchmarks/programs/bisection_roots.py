"""Root finding by bisection and the secant method on Python floats, with tolerances,
iteration caps and the exceptions real code raises."""
import math


def bisect(f, lo, hi, tol=1e-12, max_iter=200):
    flo, fhi = f(lo), f(hi)
    if flo * fhi > 0:
        raise ValueError(f"no sign change on [{lo}, {hi}]")
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        if fm == 0 or hi - lo < tol:
            return mid
        if flo * fm < 0:
            hi, fhi = mid, fm
        else:
            lo, flo = mid, fm
    return 0.5 * (lo + hi)


def secant(f, x0, x1, tol=1e-12, max_iter=100):
    for i in range(max_iter):
        f0, f1 = f(x0), f(x1)
        if f1 == f0:
            break
        x0, x1 = x1, x1 - f1 * (x1 - x0) / (f1 - f0)
        if abs(x1 - x0) < tol:
            return x1, i
    return x1, max_iter


def cubic(x):
    return x ** 3 - 2 * x - 5


def main(n):
    roots = []
    for k in range(1, n + 1):
        roots.append(bisect(lambda x: math.cos(x) - x / k, 0.0, 2.0 + k))
    s = secant(cubic, 2.0, 3.0)
    try:
        bisect(cubic, 3.0, 4.0)
        err = None
    except ValueError as e:
        err = str(e)
    return sum(roots), roots[-1], s, err


SIZES = {"tiny": 3, "quick": 300}
