"""Dice games with np.random called once per roll (scalar draws in a Python loop)."""
import numpy as np


def roll(rng, sides=6):
    return int(rng.integers(1, sides + 1))


def play_game(rng, target):
    total, turns = 0, 0
    while total < target:
        r = roll(rng)
        total = 0 if total + r == 13 else total + r
        turns += 1
    return turns


def tournament(games, seed):
    rng = np.random.default_rng(seed)
    turns = [play_game(rng, 30) for _ in range(games)]
    return sum(turns) / len(turns), max(turns)


def main(n):
    return tournament(n, 27)


SIZES = {"tiny": 5, "quick": 1000}
