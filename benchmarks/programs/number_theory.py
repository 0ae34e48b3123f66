"""gcd/lcm by Euclid, modular exponentiation, Euler's totient, perfect numbers."""


def gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def lcm(a, b):
    return a * b // gcd(a, b)


def power_mod(base, exp, mod):
    result = 1
    base %= mod
    while exp > 0:
        if exp & 1:
            result = result * base % mod
        base = base * base % mod
        exp >>= 1
    return result


def totient(n):
    result = n
    p = 2
    while p * p <= n:
        if n % p == 0:
            while n % p == 0:
                n //= p
            result -= result // p
        p += 1
    if n > 1:
        result -= result // n
    return result


def divisor_sum(n):
    s = 1
    for d in range(2, int(n ** 0.5) + 1):
        if n % d == 0:
            s += d
            if d != n // d:
                s += n // d
    return s


def main(n):
    l = 1
    for k in range(1, 40):
        l = lcm(l, k)
    perfect = [k for k in range(2, n) if divisor_sum(k) == k]
    return (l, sum(totient(k) for k in range(1, n // 4)),
            power_mod(3, 10 ** 18 + 7, 10 ** 9 + 7), perfect)


SIZES = {"tiny": 30, "quick": 9000}
