"""Elementary cellular automata on strings and on lists of bits (rule 30, rule 110)."""


def next_row(row, rule):
    n = len(row)
    out = []
    for i in range(n):
        left, mid, right = row[i - 1], row[i], row[(i + 1) % n]
        index = (left << 2) | (mid << 1) | right
        out.append((rule >> index) & 1)
    return out


def run(width, steps, rule):
    row = [0] * width
    row[width // 2] = 1
    rows = [row]
    for _ in range(steps):
        row = next_row(row, rule)
        rows.append(row)
    return rows


def draw(rows):
    return "\n".join("".join("#" if b else "." for b in row) for row in rows)


def main(n):
    r30 = run(n, n // 2, 30)
    r110 = run(n, n // 2, 110)
    return draw(r30).count("#"), sum(map(sum, r110)), "".join(map(str, r30[-1][:20]))


SIZES = {"tiny": 10, "quick": 200}
