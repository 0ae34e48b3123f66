"""Recursive quicksort with list comprehensions, and an in-place Lomuto version."""
import random


def quicksort(xs):
    if len(xs) <= 1:
        return xs
    pivot = xs[len(xs) // 2]
    left = [x for x in xs if x < pivot]
    middle = [x for x in xs if x == pivot]
    right = [x for x in xs if x > pivot]
    return quicksort(left) + middle + quicksort(right)


def partition(a, lo, hi):
    pivot = a[hi]
    i = lo
    for j in range(lo, hi):
        if a[j] <= pivot:
            a[i], a[j] = a[j], a[i]
            i += 1
    a[i], a[hi] = a[hi], a[i]
    return i


def quicksort_inplace(a, lo=0, hi=None):
    if hi is None:
        hi = len(a) - 1
    if lo < hi:
        p = partition(a, lo, hi)
        quicksort_inplace(a, lo, p - 1)
        quicksort_inplace(a, p + 1, hi)
    return a


def main(n):
    random.seed(2)
    data = [random.random() for _ in range(n)]
    s1 = quicksort(data)
    s2 = quicksort_inplace(list(data))
    return s1 == s2, s1[0], s1[-1], len(s1)


SIZES = {"tiny": 50, "quick": 3000}
