"""N queens by backtracking with sets, counting every solution."""


def solve(n):
    cols, diag1, diag2 = set(), set(), set()
    count = 0

    def place(row):
        nonlocal count
        if row == n:
            count += 1
            return
        for c in range(n):
            if c in cols or row - c in diag1 or row + c in diag2:
                continue
            cols.add(c)
            diag1.add(row - c)
            diag2.add(row + c)
            place(row + 1)
            cols.remove(c)
            diag1.remove(row - c)
            diag2.remove(row + c)
    place(0)
    return count


def is_safe(board, row, col):
    for r, c in enumerate(board[:row]):
        if c == col or abs(c - col) == row - r:
            return False
    return True


def first_solution(n, board=None, row=0):
    if board is None:
        board = [0] * n
    if row == n:
        return list(board)
    for col in range(n):
        if is_safe(board, row, col):
            board[row] = col
            found = first_solution(n, board, row + 1)
            if found:
                return found
    return None


def main(n):
    return solve(n), first_solution(n + 4)


SIZES = {"tiny": 5, "quick": 8}
