"""Text processing as scripts do it: split, normalise, Counter, sorted with key functions,
f-strings with format specs, a dict of lists."""
from collections import Counter, defaultdict

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron "
         "pi rho sigma tau upsilon phi chi psi omega").split()


def make_text(n):
    out = []
    for i in range(n):
        w = WORDS[(i * 7 + i // 3) % len(WORDS)]
        out.append(w.upper() if i % 11 == 0 else w)
        if i % 9 == 8:
            out.append(".")
    return " ".join(out)


def sentences(text):
    return [s.strip() for s in text.split(".") if s.strip()]


def stats(text):
    words = [w.lower().strip(",;") for w in text.split() if w != "."]
    counts = Counter(words)
    by_letter = defaultdict(list)
    for w in sorted(counts):
        by_letter[w[0]].append(w)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    lines = [f"{w:>8s} {c:4d} {c / len(words):6.2%}" for w, c in top]
    return len(words), dict(by_letter), lines


def main(n):
    text = make_text(n)
    count, groups, lines = stats(text)
    longest = max(sentences(text), key=len)
    return count, groups, lines, len(longest)


SIZES = {"tiny": 20, "quick": 6000}
