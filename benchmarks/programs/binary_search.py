"""Binary search (iterative and recursive), lower bound, and searching a rotated list."""
import random


def binary_search(a, target):
    lo, hi = 0, len(a) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if a[mid] == target:
            return mid
        if a[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


def search_rec(a, target, lo, hi):
    if lo > hi:
        return -1
    mid = (lo + hi) // 2
    if a[mid] == target:
        return mid
    if a[mid] < target:
        return search_rec(a, target, mid + 1, hi)
    return search_rec(a, target, lo, mid - 1)


def lower_bound(a, target):
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def main(n):
    rng = random.Random(24)
    a = sorted(rng.sample(range(n * 10), n))
    queries = [rng.randrange(n * 10) for _ in range(n)]
    found = sum(binary_search(a, q) >= 0 for q in queries)
    found_rec = sum(search_rec(a, q, 0, len(a) - 1) >= 0 for q in queries)
    return found, found_rec, sum(lower_bound(a, q) for q in queries)


SIZES = {"tiny": 20, "quick": 8000}
