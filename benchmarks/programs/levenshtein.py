"""Edit distance between words, and spelling suggestions from a small dictionary."""


def levenshtein(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def suggest(word, dictionary, k=3):
    scored = sorted((levenshtein(word, w), w) for w in dictionary)
    return [w for _, w in scored[:k]]


DICTIONARY = ["apple", "apply", "ample", "maple", "angle", "ankle", "table", "cable", "fable",
              "python", "typhoon", "pythons", "matrix", "metric", "method", "numpy", "lumpy"]


def main(n):
    queries = ["appel", "pyton", "matrx", "nunpy", "tabel", "angel"] * n
    return [suggest(q, DICTIONARY) for q in queries[:6]], \
        sum(levenshtein(q, "python") for q in queries)


SIZES = {"tiny": 1, "quick": 150}
