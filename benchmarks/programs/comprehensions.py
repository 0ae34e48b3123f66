"""Comprehensions: Pythagorean triples, a multiplication table, set and dict comprehensions."""


def triples(limit):
    return [(a, b, c) for a in range(1, limit) for b in range(a, limit)
            for c in range(b, limit) if a * a + b * b == c * c]


def table(n):
    return [[i * j for j in range(1, n + 1)] for i in range(1, n + 1)]


def digit_sums(n):
    return {k: sum(int(d) for d in str(k)) for k in range(n)}


def distinct_products(n):
    return len({i * j for i in range(1, n) for j in range(1, n)})


def main(n):
    t = triples(n)
    return len(t), t[-1], sum(map(sum, table(n))), sum(digit_sums(n * 20).values()), \
        distinct_products(n)


SIZES = {"tiny": 10, "quick": 70}
