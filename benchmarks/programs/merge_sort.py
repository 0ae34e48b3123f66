"""Top-down merge sort of words, and a bottom-up one of numbers."""
import random


def merge(left, right):
    result = []
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            result.append(left[i])
            i += 1
        else:
            result.append(right[j])
            j += 1
    result.extend(left[i:])
    result.extend(right[j:])
    return result


def merge_sort(seq):
    if len(seq) < 2:
        return list(seq)
    mid = len(seq) // 2
    return merge(merge_sort(seq[:mid]), merge_sort(seq[mid:]))


def merge_sort_bottom_up(seq):
    runs = [[x] for x in seq]
    while len(runs) > 1:
        merged = []
        for k in range(0, len(runs) - 1, 2):
            merged.append(merge(runs[k], runs[k + 1]))
        if len(runs) % 2:
            merged.append(runs[-1])
        runs = merged
    return runs[0] if runs else []


def main(n):
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefgh") for _ in range(5)) for _ in range(n)]
    nums = [rng.uniform(-1, 1) for _ in range(n)]
    return merge_sort(words)[:5], merge_sort_bottom_up(nums)[-3:]


SIZES = {"tiny": 40, "quick": 2000}
