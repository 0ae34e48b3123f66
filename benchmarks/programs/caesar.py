"""Caesar and Vigenere ciphers over strings, and breaking Caesar by letter frequency."""
from collections import Counter


def shift_char(c, k):
    if c.isupper():
        return chr((ord(c) - 65 + k) % 26 + 65)
    if c.islower():
        return chr((ord(c) - 97 + k) % 26 + 97)
    return c


def caesar(text, k):
    return "".join(shift_char(c, k) for c in text)


def vigenere(text, key, sign=1):
    out = []
    i = 0
    for c in text:
        if c.isalpha():
            out.append(shift_char(c, sign * (ord(key[i % len(key)]) - 97)))
            i += 1
        else:
            out.append(c)
    return "".join(out)


def crack_caesar(cipher):
    letters = Counter(c for c in cipher.lower() if c.isalpha())
    most = letters.most_common(1)[0][0]
    return (ord(most) - ord("e")) % 26


def main(n):
    plain = ("meet me near the old tree at seven, the eagle flies east! " * n)
    c = caesar(plain, 11)
    v = vigenere(plain, "lemon")
    return crack_caesar(c), vigenere(v, "lemon", -1) == plain, c[:30]


SIZES = {"tiny": 2, "quick": 300}
