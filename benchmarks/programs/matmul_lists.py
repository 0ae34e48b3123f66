"""Matrix code on lists of lists: multiply, transpose, identity, power by squaring."""


def zeros(n, m):
    return [[0] * m for _ in range(n)]


def identity(n):
    out = zeros(n, n)
    for i in range(n):
        out[i][i] = 1
    return out


def transpose(a):
    return [list(row) for row in zip(*a)]


def matmul(a, b):
    bt = transpose(b)
    return [[sum(x * y for x, y in zip(row, col)) for col in bt] for row in a]


def matpow(a, k):
    result = identity(len(a))
    while k:
        if k & 1:
            result = matmul(result, a)
        a = matmul(a, a)
        k >>= 1
    return result


def main(n):
    a = [[(i * j + 1) % 7 for j in range(n)] for i in range(n)]
    fib = matpow([[1, 1], [1, 0]], 90)
    p = matpow([[(x % 3) / 3.0 for x in row] for row in a], 5)
    return fib[0][1], sum(map(sum, matmul(a, a))), round(p[0][0], 6)


SIZES = {"tiny": 4, "quick": 45}
