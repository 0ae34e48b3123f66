"""Determinant by cofactor expansion (recursive) and permutations of a small list."""


def minor(m, i, j):
    return [row[:j] + row[j + 1:] for k, row in enumerate(m) if k != i]


def det(m):
    if len(m) == 1:
        return m[0][0]
    if len(m) == 2:
        return m[0][0] * m[1][1] - m[0][1] * m[1][0]
    return sum((-1) ** j * m[0][j] * det(minor(m, 0, j)) for j in range(len(m)))


def permutations(items):
    if len(items) <= 1:
        return [items]
    out = []
    for i, x in enumerate(items):
        for p in permutations(items[:i] + items[i + 1:]):
            out.append([x] + p)
    return out


def main(n):
    m = [[(i + 1) * (j + 2) % 7 + (i == j) for j in range(n)] for i in range(n)]
    perms = permutations(list(range(n)))
    return det(m), len(perms), perms[-1]


SIZES = {"tiny": 4, "quick": 7}
