"""Array operations on slices inside loop nests: views by index -> dot, sum and elementwise
updates, as ops of the nest's IR (ir.ARRAY_OPS) lowered to inner loops in C and to NumPy in
the Python form.

A view is an array indexed by ints and slices whose bounds are the nest's values (`L[i, :j]`,
`L[:j, j]`, `x[:i]`, `A[i, 1:-1]`, `A[i]`), one dimension left. Views exist only on the walk's
stack (recognise.py hands the instructions that make or use them here) and as operands of
three ops: `vdot` (`a @ b`, `np.dot(a, b)`, `a.dot(b)`), `vsum` (`a.sum()`, `np.sum(a)`) and
`vstore` (`A[i, a:b] = expr`, `A[i, a:b] += expr`, expr of views and scalars with + - * /
and unary minus); a view going anywhere else is Unsupported. Each op is NumPy's, bit for bit:
a dot calls the dtype's own dotfunc (NumPy's ArrFuncs, so its BLAS call or loop) on the same
strides NumPy passes it, after np.dot's own special cases (cblas_matrixproduct: the product
for one element, contiguous copies of operands BLAS cannot stride); a float sum follows
NumPy's pairwise recursion (pj_leaf_* of the kernel prelude for its leaves); an update
computes every element (operands broadcast as NumPy does) into a scratch buffer before it
writes one, as NumPy's temporaries and overlap copies make it read all first. Whatever
NumPy would raise or warn on (an index out of range, lengths that do not broadcast, a zero
step, a non-finite float, a Python int out of an array's range) hands the op over to Python,
which runs it with NumPy from its start (nothing is written before).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from bytecode import BinaryOp

from pijit import _compat
from pijit.loopnest import types as T
from pijit.loopnest.ir import Const, Op
from pijit.loopnest.types import Unsupported

PASS = object()             # instr(): not an instruction about views, recognise.py goes on

_INPLACE = {"INPLACE_ADD": "add", "INPLACE_SUBTRACT": "sub", "INPLACE_MULTIPLY": "mul",
            "INPLACE_TRUE_DIVIDE": "truediv"}
_BINARY = {"ADD": "add", "SUBTRACT": "sub", "MULTIPLY": "mul", "TRUE_DIVIDE": "truediv"}
_SYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}
# dtypes of views in expressions, dots and sums (bool arrays are Unsupported there)
_DTYPES = tuple(d for d in T.DTYPES if d.kind != "b")
_NPY = {"int8": "NPY_INT8", "int16": "NPY_INT16", "int32": "NPY_INT32", "int64": "NPY_INT64",
        "uint8": "NPY_UINT8", "uint16": "NPY_UINT16", "uint32": "NPY_UINT32",
        "float32": "NPY_FLOAT32", "float64": "NPY_FLOAT64"}
SCRATCH = 256               # elements a scratch buffer holds on the C stack; more: malloc


# -- the structures (operands are positions in the op's args once emitted) ----------------
@dataclass(frozen=True)
class Slice:
    start: object = None
    stop: object = None
    step: object = None


@dataclass(frozen=True)
class View:
    """array[index]: per dimension an int operand or a Slice; exactly one Slice."""
    array: str
    index: tuple


def view_dtype(walk, view: View):
    """The dtype of the array `view` is a part of (its entry's)."""
    return walk.entries[view.array[2:]].array[0]


@dataclass(frozen=True)
class Leaf:
    view: View
    dtype: object


@dataclass(frozen=True)
class Scalar:
    value: object
    type: object                # a static type (types.INT, np.float64 ...)


@dataclass(frozen=True)
class Node:
    """op(args) elementwise: op in add/sub/mul/truediv (two args) or neg (one)."""
    op: str
    args: tuple
    dtype: object               # the element's NumPy dtype
    domain: tuple               # types.binop's / unop's


@dataclass(frozen=True)
class ArrayOp:
    """What an array op computes. form: "matmul", "dot" (np.dot), "dot_method" (a.dot(b)),
    "sum" (np.sum), "sum_method" (a.sum()), "set" (A[..] = e) or an in-place operator
    ("add", "sub", "mul", "truediv": A[..] op= e); trees: the operands (a store's: its target
    view, and the value of each element: e, or the Node `target op e`); dtype: the result's
    (dot, sum) or the target's (store)."""
    form: str
    trees: tuple
    dtype: object

    def text(self, args) -> str:
        """The op as Python source over the operands' texts `args` (by position)."""
        t = [_tree_text(x, args) for x in self.trees]
        if self.form == "matmul":
            return f"{t[0]} @ {t[1]}"
        if self.form == "dot":
            return f"_f_np_dot({t[0]}, {t[1]})"
        if self.form == "dot_method":
            return f"{t[0]}.dot({t[1]})"
        if self.form == "sum":
            return f"_f_np_sum({t[0]})"
        if self.form == "sum_method":
            return f"{t[0]}.sum()"
        if self.form == "set":
            return f"{t[0]} = {t[1]}"
        if self.form == "view":         # views.py: the view a local is bound to, checked
            return t[0]
        if self.form == "element":      # views.py: an element of a view
            return f"{t[0]}[{t[1]}]"
        if self.form == "put":
            return f"{t[0]}[{t[1]}] = {t[2]}"
        if self.form == "len":
            return f"_f_len({t[0]})"
        return f"{t[0]} {_SYM[self.form]}= {_tree_text(self.trees[1].args[1], args)}"


def _tree_text(x, args) -> str:
    if isinstance(x, Leaf):
        return _view_text(x.view, args)
    if isinstance(x, Scalar):
        return args[x.value]
    if x.op == "neg":
        return f"(-{_tree_text(x.args[0], args)})"
    return f"({_tree_text(x.args[0], args)} {_SYM[x.op]} {_tree_text(x.args[1], args)})"


def _view_text(v: View, args) -> str:
    parts = []
    for ix in v.index:
        if isinstance(ix, Slice):
            b = ["" if p is None else args[p] for p in (ix.start, ix.stop, ix.step)]
            parts.append(f"{b[0]}:{b[1]}" + (f":{b[2]}" if ix.step is not None else ""))
        else:
            parts.append(args[ix])
    return f"{v.array}[{', '.join(parts)}]"


def python_line(op: Op, operand) -> str:
    """The op's statement in the nest's Python form (lower_py.py): the user's own NumPy
    expression, so O0 and a hand-over run exactly what plain Python runs."""
    args = [operand(x) for x in op.args]
    text = op.array.text(args)
    return f"{op.dst} = {text}" if op.dst is not None else text


def _flatten(trees) -> tuple:
    """(args, trees with every operand replaced by its position in args)."""
    args = []

    def ref(x):
        if x is None:
            return None
        args.append(x)
        return len(args) - 1

    def walk(t):
        if isinstance(t, Leaf):
            index = tuple(Slice(ref(s.start), ref(s.stop), ref(s.step)) if isinstance(s, Slice)
                          else ref(s) for s in t.view.index)
            return Leaf(View(t.view.array, index), t.dtype)
        if isinstance(t, Scalar):
            return Scalar(ref(t.value), t.type)
        return Node(t.op, tuple(walk(a) for a in t.args), t.dtype, t.domain)
    out = tuple(walk(t) for t in trees)
    return tuple(args), out


# -- recognition: the walk's stack items ----------------------------------------------------
# ("none",) None; ("slice", Slice) a slice object; ("view", View) a view; ("vexpr", tree) an
# elementwise expression; ("vupdate", View, op, tree) a view after `view op= tree`;
# ("vmethod", name, tree) + ("vself",) a bound method of a view (sum, dot).

def instr(walk, ins, pos, block, stack):
    """Simulate `ins` when it is about views (see recognise._Walk.instr for the protocol);
    PASS when it is not."""
    name = ins.name
    if name == "LOAD_CONST" and (ins.arg is None or isinstance(ins.arg, slice)):
        if ins.arg is None:
            stack.append(("none",))
        else:
            parts = [None if p is None else _const_bound(p)
                     for p in (ins.arg.start, ins.arg.stop, ins.arg.step)]
            stack.append(("slice", Slice(*parts)))
        return None
    if name == "BUILD_SLICE":
        items = stack[len(stack) - ins.arg:]
        del stack[len(stack) - ins.arg:]
        stack.append(("slice", Slice(*(_bound(walk, x) for x in items))))
        return None
    if name == "BINARY_SLICE":                      # 3.12+: x[a:b]
        stop, start, obj = stack.pop(), stack.pop(), stack.pop()
        sl = ("slice", Slice(_bound(walk, start), _bound(walk, stop)))
        stack.append(("view", _view(walk, obj, sl)))
        return None
    if name == "STORE_SLICE":                       # 3.12+: x[a:b] = value
        stop, start, obj, value = stack.pop(), stack.pop(), stack.pop(), stack.pop()
        sl = ("slice", Slice(_bound(walk, start), _bound(walk, stop)))
        return _store(walk, block, pos, _view(walk, obj, sl), value)
    if name == "BINARY_SUBSCR" and len(stack) >= 2:
        index, obj = stack[-1], stack[-2]
        if obj[0] == "view" and index[0] == "slice":
            del stack[-2:]
            stack.append(("view", _view(walk, obj, index)))
            return None
        if obj[0] == "view":
            del stack[-2:]
            return _element(walk, block, pos, stack, obj[1], index)
        if _makes_view(walk, obj, index):
            del stack[-2:]
            stack.append(("view", _view(walk, obj, index)))
            return None
        return PASS
    if name == "STORE_SUBSCR" and len(stack) >= 3:
        index, obj, value = stack[-1], stack[-2], stack[-3]
        if obj[0] == "view":
            del stack[-3:]
            return _element(walk, block, pos, stack, obj[1], index, value)
        if _makes_view(walk, obj, index):
            del stack[-3:]
            return _store(walk, block, pos, _view(walk, obj, index), value)
        if value[0] in ("view", "vexpr", "vupdate"):
            raise Unsupported("a slice stored into an element")
        return PASS
    if name == "BINARY_OP" and len(stack) >= 2:
        b, a = stack[-1], stack[-2]
        if not (_is_vector(walk, a) or _is_vector(walk, b)):
            return PASS
        del stack[-2:]
        return _binary(walk, block, pos, stack, ins, a, b)
    if name == "UNARY_NEGATIVE" and stack and _is_vector(walk, stack[-1]):
        x = _tree(walk, stack.pop())
        stack.append(("vexpr", _node(walk, "neg", (x,))))
        return None
    if name in ("LOAD_ATTR", "LOAD_METHOD") and stack:
        return _attr(walk, ins, stack)
    if name == "CALL":
        return _call(walk, block, pos, stack, ins.arg)
    return PASS


def _const_bound(p):
    if type(p) is not int or not -2**63 <= p < 2**63:
        raise Unsupported(f"a slice bound {p!r}")
    return Const(p, T.INT)


def _bound(walk, item):
    """A slice bound: None or an integer operand (a bool or a float is Unsupported)."""
    if item[0] == "none":
        return None
    if item[0] != "v" or any(T.kind(m) != "i" for m in walk.type(item[1])):
        raise Unsupported("a slice bound that is not an integer")
    return item[1]


def _is_vector(walk, item) -> bool:
    if item[0] in ("view", "vexpr"):
        return True
    if item[0] == "arr":
        return walk.entries[item[1]].array[1] == 1
    return item[0] == "row"


def _tree(walk, item):
    """The elementwise tree of a stack item: a view, a whole 1-D array or a row (leaves), an
    expression, or a scalar; Unsupported otherwise."""
    kind = item[0]
    if kind == "vexpr":
        return item[1]
    if kind in ("view", "arr", "row"):
        view = item[1] if kind == "view" else _view(walk, item, ("tuple", []))
        dtype = view_dtype(walk, view)
        if dtype not in _DTYPES:
            raise Unsupported(f"an array operation on {dtype}")
        return Leaf(view, dtype)
    if kind == "v":
        t = walk.type(item[1])
        if len(t) != 1:
            raise Unsupported("a scalar of two types beside a slice")
        if T.kind(t[0]) == "b":
            raise Unsupported("a bool beside a slice")
        return Scalar(item[1], t[0])
    raise Unsupported(f"a {kind} beside a slice")


def _type_of(tree):
    return tree.type if isinstance(tree, Scalar) else tree.dtype


def _node(walk, op, args):
    """An elementwise node with NumPy's result dtype (NEP 50: an array's dtype is strong, a
    Python scalar weak); only + - * / and unary minus, in the domains the C loop computes."""
    if op == "neg":
        r, domain = T.unop("neg", _type_of(args[0]))
    else:
        r, domain = T.binop(op, _type_of(args[0]), _type_of(args[1]))
    if not T.is_np(r) or r not in _DTYPES or domain[0] not in ("f", "i64", "int", "idiv"):
        raise Unsupported(f"{op} of slices giving {r}")
    return Node(op, tuple(args), r, domain)


def _makes_view(walk, obj, index) -> bool:
    """Whether obj[index] is a view: an array (or a row) indexed with a slice, or with fewer
    integers than dimensions."""
    if obj[0] not in ("arr", "row"):
        return False
    items = index[1] if index[0] == "tuple" else [index]
    if any(x[0] == "slice" for x in items):
        return True
    ndim = walk.entries[obj[1]].array[1] - (obj[0] == "row")
    return len(items) < ndim and all(x[0] == "v" for x in items)


def _view(walk, obj, index) -> View:
    """The View of obj[index] (obj an array or a row; missing trailing dimensions are whole),
    which must leave one dimension."""
    if obj[0] == "view" and index[0] == "slice" and Slice() in obj[1].index:
        # A[i][a:b] of a whole row (or column) is A[i, a:b]
        return View(obj[1].array, tuple(index[1] if s == Slice() else s for s in obj[1].index))
    if obj[0] not in ("arr", "row"):
        raise Unsupported(f"a slice of a {obj[0]}")
    arr = obj[1]
    ndim = walk.entries[arr].array[1]
    items = index[1] if index[0] == "tuple" else [index]
    lead = [obj[2]] if obj[0] == "row" else []
    walk.arrays_used.add(arr)
    spec = list(lead)
    for x in items:
        if x[0] == "slice":
            spec.append(x[1])
        elif x[0] == "v" and all(T.kind(m) == "i" for m in walk.type(x[1])):
            spec.append(x[1])
        else:
            raise Unsupported("an index that is not an integer or a slice")
    if len(spec) > ndim:
        raise Unsupported("too many indices")
    spec += [Slice()] * (ndim - len(spec))
    if sum(isinstance(s, Slice) for s in spec) != 1:
        raise Unsupported("a slice of more than one dimension")
    return View("a_" + arr, tuple(spec))


def _element(walk, block, pos, stack, view, index, value=None):
    """view[j] of a view of a whole row (`A[i][j]`): an element load or store as a row's."""
    s = [k for k, x in enumerate(view.index) if isinstance(x, Slice)][0]
    if s != len(view.index) - 1 or view.index[s] != Slice() or index[0] != "v" or \
            any(T.kind(m) != "i" for m in walk.type(index[1])):
        raise Unsupported("an element of a slice")
    arr = view.array
    idx = view.index[:s] + (index[1],)
    if value is None:
        dst = f"t{pos}"
        walk.define(dst, (walk.entries[arr[2:]].array[0],))
        stack.append(("v", dst))
        return walk.emit(block, Op("load", dst, (arr,) + idx, "row"))
    if value[0] != "v":
        raise Unsupported("a slice stored into an element")
    walk.check_store(arr[2:], walk.type(value[1]))
    walk.written.add(arr)
    return walk.emit(block, Op("store", None, (arr,) + idx + (value[1],), "row"))


def _binary(walk, block, pos, stack, ins, a, b):
    opname = BinaryOp(ins.arg).name
    if opname == "MATRIX_MULTIPLY":
        return _dot(walk, block, pos, stack, "matmul", a, b)
    if opname in _INPLACE and a[0] == "view":
        stack.append(("vupdate", a[1], _INPLACE[opname], _tree(walk, b)))
        return None
    op = _BINARY.get(opname.removeprefix("INPLACE_"))
    if op is None:
        raise Unsupported(f"operator {opname} on slices")
    stack.append(("vexpr", _node(walk, op, (_tree(walk, a), _tree(walk, b)))))
    return None


def _leaf(walk, item) -> Leaf:
    t = _tree(walk, item)
    if not isinstance(t, Leaf):
        raise Unsupported("a dot or sum of an expression")
    return t


def _dot(walk, block, pos, stack, form, a, b):
    x, y = _leaf(walk, a), _leaf(walk, b)
    if x.dtype != y.dtype:
        raise Unsupported(f"a dot of {x.dtype} and {y.dtype}")
    return _emit(walk, block, pos, stack, "vdot", ArrayOp(form, (x, y), x.dtype))


def _sum(walk, block, pos, stack, form, a):
    x = _tree(walk, a)
    if isinstance(x, Scalar):
        raise Unsupported("a sum of a scalar")
    r = np.add.reduce(np.zeros(1, x.dtype)).dtype
    if r not in _DTYPES:
        raise Unsupported(f"a sum of {x.dtype} (giving {r})")
    return _emit(walk, block, pos, stack, "vsum", ArrayOp(form, (x,), r))


def _emit(walk, block, pos, stack, kind, array):
    args, trees = _flatten(array.trees)
    dst = f"t{pos}"
    walk.define(dst, (array.dtype,))
    stack.append(("v", dst))
    return walk.emit(block, Op(kind, dst, args, array.form,
                               array=ArrayOp(array.form, trees, array.dtype)))


def _store(walk, block, pos, view, value):
    """target[...] = value, or the end of target[...] op= e (value a vupdate of the same
    view): a vstore whose result dtype is the target's."""
    dtype = view_dtype(walk, view)
    if dtype not in _DTYPES:
        raise Unsupported(f"an array operation on {dtype}")
    target = Leaf(view, dtype)
    if value[0] == "vupdate":
        if value[1] != view:
            raise Unsupported("an in-place operator stored into another slice")
        form = value[2]
        rhs = _node(walk, form, (target, value[3]))
        if rhs.dtype != dtype:
            raise Unsupported(f"{form}= of {dtype} giving {rhs.dtype}")
    else:
        form = "set"
        rhs = _tree(walk, value)
        if isinstance(rhs, Scalar):
            walk.check_store(view.array[2:], (rhs.type,))
        elif rhs.dtype != dtype:
            raise Unsupported(f"storing {rhs.dtype} values into {dtype}")
    walk.written.add(view.array)
    args, trees = _flatten((target, rhs))
    return walk.emit(block, Op("vstore", None, args, form, array=ArrayOp(form, trees, dtype)))


def _attr(walk, ins, stack):
    facts = _compat.BYTECODE
    method, attr = ins.arg if facts.attr_pair and ins.name == "LOAD_ATTR" else \
        (ins.name == "LOAD_METHOD", ins.arg)
    obj = stack[-1]
    if obj[0] == "obj" and obj[1] is np and attr in ("dot", "sum"):
        stack.pop()
        walk.push_callable(stack, ("obj", getattr(np, attr)), method)
        return None
    if not _is_vector(walk, obj) or obj[0] == "arr" and attr not in ("dot", "sum"):
        return PASS
    if attr not in ("dot", "sum") or not method:
        raise Unsupported(f"attribute {attr} of a slice")
    stack.pop()
    stack += [("vmethod", attr, obj), ("vself",)]
    return None


def _call(walk, block, pos, stack, nargs):
    if isinstance(nargs, tuple) or len(stack) < nargs + 2:
        return PASS
    args = stack[len(stack) - nargs:]
    first, second = stack[len(stack) - nargs - 2], stack[len(stack) - nargs - 1]
    if first[0] == "vmethod":
        name, obj = first[1], first[2]
        del stack[len(stack) - nargs - 2:]
        if name == "sum" and nargs == 0:
            return _sum(walk, block, pos, stack, "sum_method", obj)
        if name == "dot" and nargs == 1:
            return _dot(walk, block, pos, stack, "dot_method", obj, args[0])
        raise Unsupported(f".{name}() of a slice with {nargs} arguments")
    fn = first if first[0] == "obj" else second if second[0] == "obj" else None
    if fn is None or not any(fn[1] is f for f in (np.dot, np.sum)):
        iterates = fn is not None and fn[1] in (enumerate, zip)    # views.iterate's
        if any(x[0] == "vexpr" or x[0] == "view" and not iterates for x in args):
            raise Unsupported("a call with a slice argument")
        return PASS
    del stack[len(stack) - nargs - 2:]
    if fn[1] is np.dot and nargs == 2:
        walk.funcs["np_dot"] = np.dot
        return _dot(walk, block, pos, stack, "dot", args[0], args[1])
    if fn[1] is np.sum and nargs == 1:
        walk.funcs["np_sum"] = np.sum
        return _sum(walk, block, pos, stack, "sum", args[0])
    raise Unsupported(f"np.{fn[1].__name__}() of {nargs} arguments")


# -- C ------------------------------------------------------------------------------------
C_HELPERS = r"""
/* The first index and the length of start:stop:step over n items, as CPython's
   PySlice_Unpack and PySlice_AdjustIndices make them (NumPy's basic indexing); an omitted
   start is passed as 0 (step > 0) or INT64_MAX, an omitted stop as INT64_MAX or INT64_MIN.
   step != 0. */
static inline npy_intp pj_slice(npy_intp n, int64_t start, int64_t stop, int64_t step,
                                npy_intp *first)
{
    if (step < -INT64_MAX)
        step = -INT64_MAX;
    if (start < 0) {
        start += n;
        if (start < 0)
            start = step < 0 ? -1 : 0;
    } else if (start >= n)
        start = step < 0 ? n - 1 : n;
    if (stop < 0) {
        stop += n;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
    } else if (stop >= n)
        stop = step < 0 ? n - 1 : n;
    *first = start;
    if (step < 0)
        return stop < start ? (start - stop - 1) / (-step) + 1 : 0;
    return start < stop ? (stop - start - 1) / step + 1 : 0;
}

/* The dtype's dotfunc (NumPy's ArrFuncs: its BLAS call or its loop), looked up once. */
static PyArray_DotFunc *pj_dotfunc(int type)
{
    static PyArray_DotFunc *funcs[NPY_NTYPES_LEGACY];
    if (funcs[type] == NULL) {
        PyArray_Descr *d = PyArray_DescrFromType(type);
        if (d == NULL) {
            PyErr_Clear();
            return NULL;
        }
        funcs[type] = PyDataType_GetArrFuncs(d)->dotfunc;
        Py_DECREF(d);
    }
    return funcs[type];
}

/* NumPy's dot of two 1-D arrays of n items into *out. matmul (`a @ b`, its scalar_out
   case) calls the dotfunc on the strides as they are. np.dot and ndarray.dot of floats go
   through cblas_matrixproduct: +0 for n = 0, the one product for n = 1, else the dotfunc
   on the operands, each copied to a contiguous buffer first when BLAS cannot take its
   stride (_bad_strides: negative, zero, not a multiple of the item). 0: no dotfunc or no
   memory (the caller hands over). */
static int pj_vdot(int type, int size, int npdot, char *a, npy_intp sa, char *b,
                   npy_intp sb, npy_intp n, void *out)
{
    PyArray_DotFunc *f = pj_dotfunc(type);
    char *copy = NULL;
    if (f == NULL)
        return 0;
    if (npdot && (type == NPY_FLOAT64 || type == NPY_FLOAT32)) {
        if (n == 0) {
            memset(out, 0, size);
            return 1;
        }
        if (n == 1) {
            if (type == NPY_FLOAT64)
                *(double *)out = *(double *)a * *(double *)b;
            else
                *(float *)out = *(float *)a * *(float *)b;
            return 1;
        }
        int bad_a = sa <= 0 || sa % size, bad_b = sb <= 0 || sb % size;
        if (bad_a || bad_b) {
            copy = malloc((size_t)n * size * (bad_a + bad_b));
            if (copy == NULL)
                return 0;
            char *c = copy;
            if (bad_a) {
                for (npy_intp k = 0; k < n; k++)
                    memcpy(c + k * size, a + k * sa, size);
                a = c;
                sa = size;
                c += n * size;
            }
            if (bad_b) {
                for (npy_intp k = 0; k < n; k++)
                    memcpy(c + k * size, b + k * sb, size);
                b = c;
                sb = size;
            }
        }
    }
    f(a, sa, b, sb, out, n, NULL);
    free(copy);
    return 1;
}

/* NumPy's pairwise summation of n items at stride s (@TYPE@_pairwise_sum): leaves of at
   most 128 summed by the prelude's pj_leaf_* (gathered when strided), split as NumPy
   splits. */
#define PJ_VSUM(name, leaf, T)                                                        \
static T name(const char *a, npy_intp n, npy_intp s)                                  \
{                                                                                     \
    if (n <= 128) {                                                                   \
        T b[128];                                                                     \
        if (s == (npy_intp)sizeof(T))                                                 \
            return leaf((const T *)a, n);                                             \
        for (npy_intp k = 0; k < n; k++)                                              \
            memcpy(&b[k], a + k * s, sizeof(T));                                      \
        return leaf(b, n);                                                            \
    }                                                                                 \
    npy_intp n2 = n / 2;                                                              \
    n2 -= n2 % 8;                                                                     \
    return name(a, n2, s) + name(a + n2 * s, n - n2, s);                              \
}
PJ_VSUM(pj_vsum_d, pj_leaf_d, double)
PJ_VSUM(pj_vsum_f, pj_leaf_f, float)
#undef PJ_VSUM
"""


def c_helpers(nest) -> str:
    """The C helpers a nest's kernel needs for its array ops ('' without any, so the C of
    other nests stays as it was)."""
    has = any(op.array is not None for b in nest.blocks for op in b.ops)
    return C_HELPERS if has else ""


def lower_c(k, op, bail: str) -> list:
    """op's C for lower_c.NestKernel `k`, one block statement; a failed check runs `bail`
    (hands over at op's block: nothing is written before)."""
    lines = _lower_c(k, op, bail)
    return [lines[0]] + ["    " + s for s in lines[1:-1]] + [lines[-1]]


def _lower_c(k, op, bail: str) -> list:
    from pijit.loopnest.lower_c import ctype

    a = op.array
    args = op.args
    if op.kind == "vcheck" or op.kind in ("vload", "vlen") or a.form == "put":
        from pijit.loopnest import views
        check = views.check_c if op.kind == "vcheck" else views.element_c
        return check(k, op, _view_c, bail)
    if op.kind == "vdot":
        x, y = a.trees
        ct = ctype(a.dtype)
        L = ["{"] + _view_c(k, x.view, args, "va", bail) + _view_c(k, y.view, args, "vb", bail)
        npdot = int(a.form != "matmul")
        L += [f"if (va_n != vb_n) {bail}",
              f"{ct} r;",
              f"if (!pj_vdot({_NPY[str(a.dtype)]}, sizeof(r), {npdot}, va_p, va_s, vb_p, "
              f"vb_s, va_n, &r)) {bail}"]
        if a.dtype.kind == "f":
            L.append(f"if (!isfinite(r)) {bail}")
        return L + [f"v_{op.dst} = r;", "}"]
    if op.kind == "vsum":
        (x,) = a.trees
        if isinstance(x, Node):
            # the expression's values first, as NumPy's temporary, then their sum
            loop = _Loop(k, args, bail)
            n = loop.length(x)
            loop.strides(x, n)
            L = ["{"] + _scratch(loop, x, n, ctype(x.dtype))
            L += ["char *va_p = (char *)sb;", f"npy_intp va_n = {n}, va_s = sizeof(*sb);"]
            free = ["if (sb != sb_stack) free(sb);"]
        else:
            L = ["{"] + _view_c(k, x.view, args, "va", bail)
            free = []
        if a.dtype.kind == "f":
            fn = "pj_vsum_f" if a.dtype == T.F32 else "pj_vsum_d"
            ct = ctype(a.dtype)
            # in the view's order, also for a negative stride: NumPy's reduction does not
            # turn it around
            L += [f"{ct} r = ({ct})0 + {fn}(va_p, va_n, va_s);"] + free + \
                [f"if (!isfinite(r)) {bail}"]
        else:
            src = ctype(x.dtype)
            # integer sums wrap around: any order of the additions gives the same bits
            L += ["uint64_t r = 0;"]
            L += _unit_stride({"va": src}, [
                "for (npy_intp e = 0; e < va_n; e++)",
                f"    r += (uint64_t)(int64_t)*({src} *)(va_p + e * va_s);"], "reduction(+:r)")
            L += free
        return L + [f"v_{op.dst} = ({ctype(a.dtype)})r;", "}"]
    return _store_c(k, op, bail)


def _view_c(k, view, args, nm, bail) -> list:
    """C defining {nm}_p (the first item), {nm}_n (the length) and {nm}_s (the stride in
    bytes) of a view; an int index out of range or a zero step runs `bail`."""
    arr = view.array
    L = [f"char *{nm}_p = d_{arr};", f"npy_intp {nm}_n = 0, {nm}_s = 0;"]
    for axis, ix in enumerate(view.index):
        n, st = f"n_{arr}_{axis}", f"s_{arr}_{axis}"
        if isinstance(ix, Slice):
            step = "1" if ix.step is None else f"(int64_t){k.val(args[ix.step])}"
            L.append("{")
            L.append(f"    int64_t step = {step};")
            if ix.step is not None:
                L.append(f"    if (step == 0) {bail}")
            start = "(step < 0 ? INT64_MAX : 0)" if ix.start is None else \
                f"(int64_t){k.val(args[ix.start])}"
            stop = "(step < 0 ? INT64_MIN : INT64_MAX)" if ix.stop is None else \
                f"(int64_t){k.val(args[ix.stop])}"
            L += ["    npy_intp first;",
                  f"    {nm}_n = pj_slice({n}, {start}, {stop}, step, &first);",
                  f"    {nm}_p += first * {st};",
                  f"    {nm}_s = (npy_intp)step * {st};",
                  "}"]
        else:
            L += ["{",
                  f"    int64_t ix = (int64_t){k.val(args[ix])};",
                  f"    if (ix < 0) ix += {n};",
                  f"    if ((uint64_t)ix >= (uint64_t){n}) {bail}",
                  f"    {nm}_p += ix * {st};",
                  "}"]
    return L


class _Loop:
    """The C of one elementwise loop over a tree: pre-loop code (views, lengths, scalar
    checks) and the loop body's statements, each node computed into a local."""

    def __init__(self, k, args, bail):
        self.k, self.args, self.bail = k, args, bail
        self.pre, self.body = [], []
        self.names = {}         # id(leaf) -> the C name of its view
        self.read = {}          # the C name of a view the body reads -> its element's C type
        self.count = 0
        self.checks = False     # a float node: a non-finite value hands over

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def length(self, tree) -> str:
        """Pre-loop C: the broadcast length of tree (a scalar: 1), its leaves' views set."""
        if isinstance(tree, Scalar):
            return "1"
        if isinstance(tree, Leaf):
            nm = self.fresh("vl")
            self.names[id(tree)] = nm
            self.pre += _view_c(self.k, tree.view, self.args, nm, self.bail)
            return f"{nm}_n"
        lens = [self.length(x) for x in tree.args]
        if len(lens) == 1:
            return lens[0]
        m = self.fresh("vm")
        a, b = lens
        self.pre += [f"npy_intp {m} = ({a} == {b} || {b} == 1) ? {a} : {a} == 1 ? {b} : -1;",
                     f"if ({m} < 0) {self.bail}"]
        return m

    def strides(self, tree, n: str):
        """Pre-loop C: each leaf's stride, 0 where it broadcasts (length 1) to n."""
        if isinstance(tree, Leaf):
            nm = self.names[id(tree)]
            self.pre.append(f"if ({nm}_n != {n}) {nm}_s = 0;")
        elif isinstance(tree, Node):
            for x in tree.args:
                self.strides(x, n)

    def value(self, tree) -> str:
        """The body's C expression of tree's element e (locals set by statements)."""
        from pijit.loopnest.lower_c import ctype

        if isinstance(tree, Leaf):
            nm = self.names[id(tree)]
            self.read[nm] = ctype(tree.dtype)
            return f"(*({ctype(tree.dtype)} *)({nm}_p + e * {nm}_s))"
        ct = ctype(tree.dtype)
        kind = tree.domain[0]
        xs = []
        for j, x in enumerate(tree.args):
            if isinstance(x, Scalar):
                other = tree.args[1 - j] if len(tree.args) == 2 else None
                xs.append(self.scalar(x, kind, tree.dtype, other))
            else:
                xs.append(self.value(x))
        r = self.fresh("vr")
        if kind in ("f", "idiv"):
            xs = [f"(({'double' if kind == 'idiv' else ct}){x})" for x in xs]
            expr = f"-{xs[0]}" if tree.op == "neg" else f"{xs[0]} {_SYM[tree.op]} {xs[1]}"
            self.body += [f"{ct} {r} = {expr};", f"bad |= !isfinite({r});"]
            self.checks = True
        else:           # integers wrap around (NumPy's array loops, no warning)
            xs = [f"(uint64_t)(int64_t){x}" for x in xs]
            expr = f"0 - {xs[0]}" if tree.op == "neg" else f"{xs[0]} {_SYM[tree.op]} {xs[1]}"
            self.body.append(f"{ct} {r} = ({ct})({expr});")
        return r

    def scalar(self, s, kind, dtype, other) -> str:
        """A scalar operand beside arrays, checked once before the loop as NumPy converts
        it (NEP 50): a Python int to the other operand's integer dtype (which it must fit,
        else NumPy raises) or to float32 (exactly: within 2**24), a Python float to float32
        (finite: else NumPy warns)."""
        v = self.k.val(self.args[s.value])
        if s.type is T.INT and other is not None and T.is_np(_type_of(other)) and \
                _type_of(other).kind in "iu" and _type_of(other) != T.I64:
            lo, hi = _int_range(_type_of(other))
            self.pre.append(f"if ((int64_t){v} < {lo}LL || (int64_t){v} > {hi}LL) {self.bail}")
        elif s.type is T.INT and kind == "f" and dtype == T.F32:
            self.pre.append(f"if (PJ_I24((int64_t){v})) {self.bail}")
        elif s.type is T.FLOAT and kind == "f" and dtype == T.F32:
            self.pre.append(f"if (isinf((float){v}) && !isinf({v})) {self.bail}")
        return v


def _int_range(dtype) -> tuple:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _store_c(k, op, bail) -> list:
    from pijit.loopnest.lower_c import ctype

    a = op.array
    target, value = a.trees
    ct = ctype(a.dtype)
    loop = _Loop(k, op.args, bail)
    L = ["{"] + _view_c(k, target.view, op.args, "vd", bail)
    if a.form == "set" and isinstance(value, Scalar):
        # a fill: the value converted once as an element store converts it
        L += k.store_value(op.args[value.value], a.dtype, bail)
        L += _unit_stride({"vd": ct}, ["for (npy_intp e = 0; e < vd_n; e++)",
                                       f"    *({ct} *)(vd_p + e * vd_s) = sv;"])
        return L + ["}"]
    if a.form != "set":
        # target op= e: the target is the node's first operand, read where it is
        loop.names[id(value.args[0])] = "vd"
        rhs = value.args[1]
    else:
        rhs = value
    n = loop.length(rhs)
    loop.pre.append(f"if (!({n} == vd_n || {n} == 1)) {bail}")
    loop.strides(rhs, "vd_n")
    # every value into a scratch buffer before any is written: NumPy's temporaries (and
    # its copies of operands overlapping the target) read every operand first
    L += _scratch(loop, value, "vd_n", ct)
    L += [f"if (vd_s == (npy_intp)sizeof({ct}))",
          "    memcpy(vd_p, sb, (size_t)vd_n * sizeof(*sb));",
          "else",
          "    for (npy_intp e = 0; e < vd_n; e++)",
          f"        *({ct} *)(vd_p + e * vd_s) = sb[e];",
          "if (sb != sb_stack) free(sb);", "}"]
    return L


def _unit_stride(views: dict, loop: list, clause: str = "") -> list:
    """C running `loop` (over e, at view nm's element nm_p + e * nm_s) in SIMD when
    every view of `views` ({C name: element C type}) has unit stride (the usual row or
    column of a C array), else as it is. The nest's function is built with
    no-tree-vectorize, so only `#pragma omp simd` vectorizes, and only with the strides
    known: the SIMD copy declares them as constants shadowing the variables. Each lane does
    the same IEEE operations as the scalar loop (-ffp-contract=off), and a reduction
    `clause` must give the same bits in any order (an OR of checks, a wrapping integer sum)."""
    if not views:
        return loop
    units = " && ".join(f"{nm}_s == (npy_intp)sizeof({t})" for nm, t in sorted(views.items()))
    return [f"if ({units}) {{",
            *(f"    const npy_intp {nm}_s = (npy_intp)sizeof({t});"
              for nm, t in sorted(views.items())),
            f"    #pragma omp simd {clause}".rstrip(),
            *("    " + s for s in loop), "} else {", *("    " + s for s in loop), "}"]


def _scratch(loop, tree, n: str, ct: str) -> list:
    """C computing tree's n elements into sb (on the stack, or malloc'd: free it), after
    loop.pre; a non-finite float hands over (nothing written)."""
    result = loop.value(tree)
    bail = loop.bail
    L = list(loop.pre)
    L += [f"{ct} sb_stack[{SCRATCH}], *sb = sb_stack;",
          f"if ({n} > {SCRATCH}) {{",
          f"    sb = malloc((size_t){n} * sizeof({ct}));",
          f"    if (sb == NULL) {bail}",
          "}",
          "int bad = 0;"]
    L += _unit_stride(loop.read, [
        f"for (npy_intp e = 0; e < {n}; e++) {{", *("    " + s for s in loop.body),
        f"    sb[e] = {result};", "}"], "reduction(|:bad)")
    L += ["(void)bad;"]
    if loop.checks:
        L += ["if (bad) {", "    if (sb != sb_stack) free(sb);", f"    {bail}", "}"]
    return L
