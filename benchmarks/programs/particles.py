"""A small particle simulation with classes: gravity, bouncing walls, kinetic energy."""
import random


class Vec:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def add(self, other, scale=1.0):
        return Vec(self.x + other.x * scale, self.y + other.y * scale)

    def norm2(self):
        return self.x * self.x + self.y * self.y


class Particle:
    def __init__(self, pos, vel, mass):
        self.pos = pos
        self.vel = vel
        self.mass = mass

    def step(self, dt, gravity):
        self.vel = self.vel.add(gravity, dt)
        self.pos = self.pos.add(self.vel, dt)
        if self.pos.y < 0:
            self.pos.y = -self.pos.y
            self.vel.y = -0.9 * self.vel.y
        if not 0 <= self.pos.x <= 10:
            self.vel.x = -self.vel.x

    def energy(self):
        return 0.5 * self.mass * self.vel.norm2()


class World:
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.particles = [Particle(Vec(rng.uniform(0, 10), rng.uniform(0, 10)),
                                   Vec(rng.uniform(-1, 1), 0.0), rng.uniform(1, 2))
                          for _ in range(n)]
        self.gravity = Vec(0.0, -9.81)

    def run(self, steps, dt):
        for _ in range(steps):
            for p in self.particles:
                p.step(dt, self.gravity)
        return sum(p.energy() for p in self.particles)


def main(n):
    world = World(n, 8)
    return world.run(50, 0.01)


SIZES = {"tiny": 3, "quick": 200}
