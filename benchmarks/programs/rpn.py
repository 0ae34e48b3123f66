"""A reverse-Polish calculator and an infix-to-RPN converter (shunting yard)."""
import operator

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def tokenize(expr):
    tokens, num = [], ""
    for ch in expr:
        if ch.isdigit() or ch == ".":
            num += ch
        else:
            if num:
                tokens.append(num)
                num = ""
            if ch in PREC or ch in "()":
                tokens.append(ch)
    if num:
        tokens.append(num)
    return tokens


def to_rpn(tokens):
    out, stack = [], []
    for t in tokens:
        if t in PREC:
            while stack and stack[-1] in PREC and PREC[stack[-1]] >= PREC[t]:
                out.append(stack.pop())
            stack.append(t)
        elif t == "(":
            stack.append(t)
        elif t == ")":
            while stack[-1] != "(":
                out.append(stack.pop())
            stack.pop()
        else:
            out.append(t)
    while stack:
        out.append(stack.pop())
    return out


def eval_rpn(tokens):
    stack = []
    for t in tokens:
        if t in OPS:
            b, a = stack.pop(), stack.pop()
            stack.append(OPS[t](a, b))
        else:
            stack.append(float(t))
    return stack[0]


def main(n):
    exprs = ["(%d + 3) * %d - 4 / (1 + %d)" % (i, i % 7, i % 5) for i in range(n)]
    return sum(eval_rpn(to_rpn(tokenize(e))) for e in exprs)


SIZES = {"tiny": 10, "quick": 3000}
