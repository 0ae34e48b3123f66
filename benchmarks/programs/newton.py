"""Newton's method: square roots, and roots of polynomials given as coefficient lists."""


def newton_sqrt(a, tol=1e-12):
    if a == 0:
        return 0.0
    x = a if a > 1 else 1.0
    while True:
        nxt = 0.5 * (x + a / x)
        if abs(nxt - x) < tol * nxt:
            return nxt
        x = nxt


def poly_eval(coeffs, x):
    result = 0.0
    for c in coeffs:
        result = result * x + c
    return result


def poly_deriv(coeffs):
    n = len(coeffs) - 1
    return [c * (n - i) for i, c in enumerate(coeffs[:-1])]


def newton_root(coeffs, x0, max_iter=50):
    d = poly_deriv(coeffs)
    x = x0
    for _ in range(max_iter):
        fx = poly_eval(coeffs, x)
        dfx = poly_eval(d, x)
        if dfx == 0:
            break
        step = fx / dfx
        x -= step
        if abs(step) < 1e-13:
            break
    return x


def main(n):
    roots = [newton_sqrt(float(k)) for k in range(n)]
    poly = [1.0, 0.0, -7.0, 6.0]          # (x-1)(x-2)(x+3)
    found = sorted({round(newton_root(poly, s / 10.0), 9) for s in range(-n // 10, n // 10)})
    return sum(roots), found


SIZES = {"tiny": 20, "quick": 4000}
