"""Conway's game of life on a list-of-lists grid with wraparound."""


def make_grid(n):
    grid = [[0] * n for _ in range(n)]
    for r, c in [(1, 2), (2, 3), (3, 1), (3, 2), (3, 3)]:     # a glider
        grid[r][c] = 1
    for c in range(n // 2, n // 2 + 3):                        # a blinker
        grid[n // 2][c] = 1
    return grid


def neighbours(grid, r, c):
    n = len(grid)
    total = 0
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if dr or dc:
                total += grid[(r + dr) % n][(c + dc) % n]
    return total


def step(grid):
    n = len(grid)
    new = [[0] * n for _ in range(n)]
    for r in range(n):
        for c in range(n):
            k = neighbours(grid, r, c)
            new[r][c] = 1 if k == 3 or (k == 2 and grid[r][c]) else 0
    return new


def main(n):
    grid = make_grid(n)
    for _ in range(20):
        grid = step(grid)
    return sum(map(sum, grid)), [row.index(1) for row in grid if 1 in row][:4]


SIZES = {"tiny": 8, "quick": 40}
