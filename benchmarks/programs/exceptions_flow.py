"""Exceptions as control flow: parsing mixed tokens, dict lookups with KeyError, EAFP."""
import random


def parse_number(token):
    try:
        return int(token)
    except ValueError:
        try:
            return float(token)
        except ValueError:
            return None


def lookup_all(table, keys):
    found, missing = 0, 0
    for k in keys:
        try:
            found += table[k]
        except KeyError:
            missing += 1
    return found, missing


def safe_div(a, b):
    try:
        return a / b
    except ZeroDivisionError:
        return float("inf")


def main(n):
    rng = random.Random(13)
    tokens = [rng.choice(["12", "3.5", "x", "-7", "1e3", "nan?", "42"]) for _ in range(n)]
    numbers = [v for v in map(parse_number, tokens) if v is not None]
    table = {str(i): i for i in range(0, 100, 3)}
    ratios = [safe_div(i, i % 5) for i in range(n)]
    return sum(numbers), lookup_all(table, [str(rng.randint(0, 99)) for _ in range(n)]), \
        sum(r for r in ratios if r != float("inf"))


SIZES = {"tiny": 30, "quick": 8000}
