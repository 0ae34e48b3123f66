"""Bubble sort and selection sort of a list of random ints."""
import random


def bubble_sort(items):
    items = list(items)
    n = len(items)
    for i in range(n):
        swapped = False
        for j in range(n - 1 - i):
            if items[j] > items[j + 1]:
                items[j], items[j + 1] = items[j + 1], items[j]
                swapped = True
        if not swapped:
            break
    return items


def selection_sort(items):
    items = items[:]
    for i in range(len(items)):
        smallest = i
        for j in range(i + 1, len(items)):
            if items[j] < items[smallest]:
                smallest = j
        items[i], items[smallest] = items[smallest], items[i]
    return items


def main(n):
    random.seed(1)
    data = [random.randint(0, 1000) for _ in range(n)]
    a = bubble_sort(data)
    b = selection_sort(data)
    assert a == b == sorted(data)
    return a[:10], sum(a)


SIZES = {"tiny": 30, "quick": 250}
