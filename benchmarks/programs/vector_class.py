"""A small 2-D vector class with operator overloading, properties and class methods, used in
a physics-style loop."""
import math


class Vec:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __add__(self, other):
        return Vec(self.x + other.x, self.y + other.y)

    def __sub__(self, other):
        return Vec(self.x - other.x, self.y - other.y)

    def __mul__(self, k):
        return Vec(self.x * k, self.y * k)

    __rmul__ = __mul__

    @property
    def norm(self):
        return math.hypot(self.x, self.y)

    @classmethod
    def polar(cls, r, theta):
        return cls(r * math.cos(theta), r * math.sin(theta))

    def __repr__(self):
        return f"Vec({self.x:.6f}, {self.y:.6f})"


def orbit(steps, dt):
    pos = Vec(1.0, 0.0)
    vel = Vec.polar(1.0, math.pi / 2)
    energy = []
    for i in range(steps):
        r = pos.norm
        acc = pos * (-1.0 / r ** 3)
        vel = vel + dt * acc
        pos = pos + vel * dt
        if i % 100 == 0:
            energy.append(0.5 * vel.norm ** 2 - 1.0 / pos.norm)
    return pos, energy


def main(n):
    pos, energy = orbit(n, 0.001)
    return repr(pos), energy[:3], len(energy)


SIZES = {"tiny": 50, "quick": 8000}
