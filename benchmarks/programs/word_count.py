"""Word frequencies of generated text: split, normalize, count in a dict, top words."""
import random
import string

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "numpy", "python",
         "array", "loop", "Fast", "slow", "The", "Dog"]


def make_text(n, seed):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        lines.append(" ".join(words) + rng.choice(".,!?;"))
    return "\n".join(lines)


def normalize(word):
    return word.strip(string.punctuation).lower()


def count_words(text):
    counts = {}
    for line in text.splitlines():
        for word in line.split():
            w = normalize(word)
            if not w:
                continue
            counts[w] = counts.get(w, 0) + 1
    return counts


def top(counts, k):
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def main(n):
    text = make_text(n, 7)
    counts = count_words(text)
    return top(counts, 5), len(counts), sum(counts.values())


SIZES = {"tiny": 20, "quick": 3000}
