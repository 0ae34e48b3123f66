"""Bank accounts with classes and exceptions for control flow (insufficient funds)."""
import random


class InsufficientFunds(Exception):
    pass


class Account:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount
        self.history.append(("deposit", amount))

    def withdraw(self, amount):
        if amount > self.balance:
            raise InsufficientFunds(f"{self.owner}: {amount} > {self.balance}")
        self.balance -= amount
        self.history.append(("withdraw", amount))


def transfer(src, dst, amount):
    src.withdraw(amount)
    dst.deposit(amount)


def simulate(n, seed):
    rng = random.Random(seed)
    accounts = [Account(f"acct{i}", rng.randint(0, 100)) for i in range(10)]
    failed = 0
    for _ in range(n):
        a, b = rng.sample(accounts, 2)
        try:
            transfer(a, b, rng.randint(1, 60))
        except InsufficientFunds:
            failed += 1
    return failed, [acc.balance for acc in accounts]


def main(n):
    return simulate(n, 9)


SIZES = {"tiny": 20, "quick": 8000}
