"""Mandelbrot set with Python complex numbers; ASCII rendering of escape counts."""


def escape_time(c, max_iter):
    z = 0j
    for i in range(max_iter):
        z = z * z + c
        if abs(z) > 2.0:
            return i
    return max_iter


def render(width, height, max_iter):
    rows = []
    for y in range(height):
        row = []
        for x in range(width):
            c = complex(-2.0 + 2.8 * x / width, -1.2 + 2.4 * y / height)
            row.append(escape_time(c, max_iter))
        rows.append(row)
    return rows


def to_ascii(rows, max_iter):
    chars = " .:-=+*#%@"
    return ["".join(chars[min(9, v * 10 // (max_iter + 1))] for v in row) for row in rows]


def main(n):
    rows = render(n, n // 2, 60)
    art = to_ascii(rows, 60)
    return sum(map(sum, rows)), art[len(art) // 2]


SIZES = {"tiny": 10, "quick": 90}
