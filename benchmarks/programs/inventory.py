"""Inventory records with dicts, defaultdict grouping, sorting by keys, and text reports."""
import random
from collections import defaultdict


def make_orders(n, seed):
    rng = random.Random(seed)
    items = ["bolt", "nut", "screw", "washer", "gear", "spring"]
    return [{"id": i, "item": rng.choice(items), "qty": rng.randint(1, 20),
             "price": round(rng.uniform(0.1, 5.0), 2), "region": rng.choice("NSEW")}
            for i in range(n)]


def revenue_by(orders, key):
    totals = defaultdict(float)
    for o in orders:
        totals[o[key]] += o["qty"] * o["price"]
    return dict(totals)


def report(totals):
    lines = []
    for name, value in sorted(totals.items(), key=lambda kv: kv[1], reverse=True):
        lines.append(f"{name:<8}{value:>10.2f}")
    return "\n".join(lines)


def big_orders(orders, threshold):
    return [o["id"] for o in orders if o["qty"] * o["price"] > threshold]


def main(n):
    orders = make_orders(n, 25)
    return report(revenue_by(orders, "item")), report(revenue_by(orders, "region")), \
        len(big_orders(orders, 50))


SIZES = {"tiny": 20, "quick": 8000}
