"""Heap sort with a hand-written sift-down, and a priority queue via heapq."""
import heapq
import random


def sift_down(heap, start, end):
    root = start
    while True:
        child = 2 * root + 1
        if child > end:
            break
        if child + 1 <= end and heap[child] < heap[child + 1]:
            child += 1
        if heap[root] < heap[child]:
            heap[root], heap[child] = heap[child], heap[root]
            root = child
        else:
            break


def heap_sort(values):
    a = list(values)
    n = len(a)
    for start in range((n - 2) // 2, -1, -1):
        sift_down(a, start, n - 1)
    for end in range(n - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        sift_down(a, 0, end - 1)
    return a


def k_smallest(values, k):
    heap = []
    for v in values:
        heapq.heappush(heap, -v)
        if len(heap) > k:
            heapq.heappop(heap)
    return sorted(-x for x in heap)


def main(n):
    random.seed(5)
    vals = [random.randint(-10000, 10000) for _ in range(n)]
    return heap_sort(vals)[:5], k_smallest(vals, 5)


SIZES = {"tiny": 40, "quick": 3000}
