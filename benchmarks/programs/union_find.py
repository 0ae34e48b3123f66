"""Union-find with path compression and union by rank over lists; connected components of a
random graph, Kruskal's minimum spanning tree."""
import random


class DSU:
    def __init__(self, n):
        self.parent = list(range(n))
        self.rank = [0] * n
        self.count = n

    def find(self, x):
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.rank[ra] < self.rank[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        if self.rank[ra] == self.rank[rb]:
            self.rank[ra] += 1
        self.count -= 1
        return True


def kruskal(n, edges):
    dsu = DSU(n)
    total, used = 0, []
    for w, a, b in sorted(edges):
        if dsu.union(a, b):
            total += w
            used.append((a, b))
    return total, used, dsu.count


def main(n):
    rnd = random.Random(4)
    edges = [(rnd.randint(1, 100), rnd.randrange(n), rnd.randrange(n)) for _ in range(3 * n)]
    total, used, comps = kruskal(n, edges)
    return total, len(used), comps, used[:5]


SIZES = {"tiny": 10, "quick": 3000}
