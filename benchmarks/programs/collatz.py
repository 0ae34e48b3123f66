"""Collatz sequences: the longest chain below n, with and without a cache."""


def collatz_length(n):
    steps = 1
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def longest_chain(limit):
    best, best_start = 0, 1
    for start in range(1, limit):
        length = collatz_length(start)
        if length > best:
            best, best_start = length, start
    return best_start, best


def longest_chain_cached(limit):
    cache = {1: 1}

    def length(n):
        path = []
        while n not in cache:
            path.append(n)
            n = n // 2 if n % 2 == 0 else 3 * n + 1
        base = cache[n]
        for i, m in enumerate(reversed(path), 1):
            cache[m] = base + i
        return cache[path[0]] if path else base
    return max(range(1, limit), key=length)


def main(n):
    return longest_chain(n), longest_chain_cached(n)


SIZES = {"tiny": 30, "quick": 12000}
