"""A discrete-event queue simulation (bank tellers) with random arrivals and deque."""
import random
from collections import deque


class Customer:
    def __init__(self, arrival, service):
        self.arrival = arrival
        self.service = service


def simulate(n_customers, tellers, seed):
    rng = random.Random(seed)
    t = 0.0
    arrivals = deque()
    for _ in range(n_customers):
        t += rng.expovariate(1.0)
        arrivals.append(Customer(t, rng.expovariate(1.0 / (tellers * 0.9))))
    free_at = [0.0] * tellers
    waits = []
    while arrivals:
        c = arrivals.popleft()
        k = min(range(tellers), key=free_at.__getitem__)
        start = max(c.arrival, free_at[k])
        waits.append(start - c.arrival)
        free_at[k] = start + c.service
    return sum(waits) / len(waits), max(waits)


def main(n):
    return simulate(n, 3, 22), simulate(n, 4, 23)


SIZES = {"tiny": 20, "quick": 15000}
