"""Order processing with dataclasses, enums, dict grouping, sorting by several keys,
exceptions for bad input, and a report built from f-strings."""
from dataclasses import dataclass, field
from enum import Enum


class Status(Enum):
    NEW = 1
    PAID = 2
    SHIPPED = 3


@dataclass
class Order:
    oid: int
    customer: str
    items: list = field(default_factory=list)
    status: Status = Status.NEW

    def total(self):
        return sum(q * p for _, q, p in self.items)


def make_orders(n):
    names = ["ann", "bob", "cy", "dee", "eve"]
    orders = []
    for i in range(n):
        o = Order(i, names[i % 5])
        for k in range(1 + i % 4):
            o.items.append((f"sku{(i + k) % 13}", 1 + (i * k) % 3, round(2.5 + k * 1.25, 2)))
        if i % 3 == 0:
            o.status = Status.PAID
        if i % 7 == 0:
            o.status = Status.SHIPPED
        orders.append(o)
    return orders


def validate(order):
    if not order.items:
        raise ValueError(f"order {order.oid} has no items")
    for sku, q, p in order.items:
        if q <= 0 or p < 0:
            raise ValueError(f"bad line {sku}")


def report(orders):
    by_customer = {}
    for o in orders:
        validate(o)
        by_customer.setdefault(o.customer, []).append(o)
    lines = []
    for name, os_ in sorted(by_customer.items()):
        paid = [o for o in os_ if o.status is not Status.NEW]
        lines.append(f"{name}: {len(os_)} orders, {sum(o.total() for o in paid):.2f} paid")
    best = sorted(orders, key=lambda o: (-o.total(), o.oid))[:3]
    return lines, [o.oid for o in best]


def main(n):
    orders = make_orders(n)
    lines, best = report(orders)
    try:
        report([Order(-1, "x")])
        err = None
    except ValueError as e:
        err = str(e)
    return lines, best, err


SIZES = {"tiny": 10, "quick": 3000}
