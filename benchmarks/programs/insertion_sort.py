"""Insertion sort, and binary insertion with bisect, on tuples (name, score)."""
import bisect
import random


def insertion_sort(records, key):
    out = list(records)
    for i in range(1, len(out)):
        current = out[i]
        j = i - 1
        while j >= 0 and key(out[j]) > key(current):
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = current
    return out


def by_score(record):
    return record[1]


def binary_insertion(values):
    result = []
    for v in values:
        bisect.insort(result, v)
    return result


def main(n):
    random.seed(4)
    records = [("p%d" % i, random.randint(0, 100)) for i in range(n)]
    ranked = insertion_sort(records, by_score)
    scores = binary_insertion([r[1] for r in records])
    return ranked[:3], ranked[-3:], scores[::max(1, n // 10)]


SIZES = {"tiny": 30, "quick": 400}
