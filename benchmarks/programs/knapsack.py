"""0/1 knapsack and longest common subsequence by dynamic programming on lists."""
import random


def knapsack(weights, values, capacity):
    best = [0] * (capacity + 1)
    for w, v in zip(weights, values):
        for c in range(capacity, w - 1, -1):
            if best[c - w] + v > best[c]:
                best[c] = best[c - w] + v
    return best[capacity]


def lcs(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        for j, y in enumerate(b, 1):
            if x == y:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def main(n):
    rng = random.Random(19)
    weights = [rng.randint(1, 30) for _ in range(n)]
    values = [rng.randint(1, 100) for _ in range(n)]
    a = "".join(rng.choice("ACGT") for _ in range(n * 3))
    b = "".join(rng.choice("ACGT") for _ in range(n * 3))
    return knapsack(weights, values, n * 5), lcs(a, b)


SIZES = {"tiny": 5, "quick": 100}
