"""Palindromic substrings and numbers; string reversal and two-pointer checks."""


def is_palindrome(s):
    i, j = 0, len(s) - 1
    while i < j:
        if s[i] != s[j]:
            return False
        i += 1
        j -= 1
    return True


def longest_palindrome(s):
    best = ""
    for center in range(2 * len(s) - 1):
        lo = center // 2
        hi = lo + center % 2
        while lo >= 0 and hi < len(s) and s[lo] == s[hi]:
            lo -= 1
            hi += 1
        if hi - lo - 1 > len(best):
            best = s[lo + 1:hi]
    return best


def palindromic_numbers(limit):
    return [k for k in range(limit) if str(k) == str(k)[::-1]]


def main(n):
    text = "".join("abacdfgdcabaracecar"[(i * 7) % 19] for i in range(n))
    nums = palindromic_numbers(n * 10)
    return longest_palindrome(text), sum(is_palindrome(str(k)) for k in range(n)), len(nums)


SIZES = {"tiny": 30, "quick": 1500}
