"""Calls in a loop nest without a rule of recognise.py's own: NumPy scalar ufuncs and scalar
type casts (np.sqrt(x), np.maximum(a, b), np.float32(x)), and user functions (inline.py).

A ufunc's loop is the one NumPy resolves for the operands' types (`ufunc.resolve_dtypes`,
a Python int or float weak as NEP 50 says), and the kernel runs NumPy's own inner loop for
that signature on the one element (the `numpy_1.24_ufunc_call_info` capsule of
`_get_strided_loop`, found when the kernel loads; n = 1 and strides 0, as
`np.<ufunc>(scalars)` runs it on 0-d operands), so the result is NumPy's bit for bit. The floating-point flags it raises decide: divide,
overflow or invalid, or underflow while np.errstate does not ignore it, hand the nest over
to Python at the call, which calls the ufunc itself and warns or raises as NumPy does. Where
NumPy's loop is one IEEE operation exact on finite values (sqrt, absolute, floor,
maximum...) the kernel computes it in C and hands over on any non-finite operand or result;
where it is one call of libm (float64 sin and cos, LIBM) the kernel makes that call and reads
the flags as after NumPy's loop.

Operands are converted to the loop's types as NumPy converts them; a conversion NumPy could
reject or round another way (a Python int out of the loop type's range, an int beyond 2**24
into float32, a Python float overflowing float32) hands over instead.
"""
from __future__ import annotations

import functools
import math
import types

import numpy as np

from pijit.loopnest import types as T
from pijit.loopnest.ir import Const
from pijit.loopnest.types import Unsupported

DOMAINS = ("ufunc", "cast", "inline")
# np.<name> scalar types a nest may call as casts
CASTS = {dt.type: dt for dt in T.DTYPES}
# module constants a nest may read (their modules are guarded by identity, and the value
# read by identity: Nest.module_attrs)
CONSTANTS = ("pi", "e", "tau", "inf", "nan")
# float ufuncs whose loop is one IEEE operation, exact and flag-free on finite operands with
# a finite result: C instead of a call of NumPy's loop ({f}: the libm function's suffix)
DIRECT = {"sqrt": "sqrt{f}(u0)", "absolute": "fabs{f}(u0)", "fabs": "fabs{f}(u0)",
          "negative": "-u0", "positive": "+u0", "floor": "floor{f}(u0)", "ceil": "ceil{f}(u0)",
          "trunc": "trunc{f}(u0)", "rint": "rint{f}(u0)", "copysign": "copysign{f}(u0, u1)",
          "maximum": "u0 >{tie} u1 ? u0 : u1", "fmax": "u0 >{tie} u1 ? u0 : u1",
          "minimum": "u0 <{tie} u1 ? u0 : u1", "fmin": "u0 <{tie} u1 ? u0 : u1"}

C_HELPERS = r"""
/* The flags a call raised: 0 none; 1 only underflow; -1 divide, overflow or invalid.
   They are read after the call only (reading them costs more than a libm sin): a flag
   raised before it (Python code, or a Python float's silent inf in the kernel) makes at
   most one hand-over NumPy would not need, since any flag read is cleared, and Python
   computing from the call is right whatever the flags were. */
static inline int pj_call_flags(void)
{
    int f = fetestexcept(PJ_FE_ERR | FE_UNDERFLOW);
    if (__builtin_expect(f != 0, 0)) {
        feclearexcept(PJ_FE_ERR | FE_UNDERFLOW);
        return (f & PJ_FE_ERR) ? -1 : 1;
    }
    return 0;
}
/* libm's sin and cos as NumPy's float64 loops call them (LIBM in calls.py). The empty asm
   makes the argument opaque, so gcc neither folds a constant's sin at compile time (MPFR's
   rounding, not libm's) nor merges a sin and a cos of one value into a sincos call. */
static inline double pj_libm_sin(double x)
{
    __asm__("" : "+x"(x));
    return sin(x);
}
static inline double pj_libm_cos(double x)
{
    __asm__("" : "+x"(x));
    return cos(x);
}
/* n contiguous elements through NumPy's own loop of slot k, its flags left unread (lanes.py):
   0 done, -1 the loop failed or the slot is not set */
static inline int pj_nest_ufunc_n(int k, char **data, const npy_intp *steps, npy_intp n)
{
    pj_ufunc_info *u = pj_ufuncs[k];
    if (u == NULL)
        return -1;
    if (u->loop(u->context, data, &n, steps, u->auxdata) < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}
/* One element through NumPy's own loop of slot k (the call-info of pj_ufuncs, n = 1):
   0 done; 1 only underflow raised; -1 divide, overflow or invalid raised, the loop failed,
   or the slot is not set (the caller hands over). The flags of a loop flagged
   NPY_METH_NO_FLOATINGPOINT_ERRORS are not read, as NumPy does not read them; nor are
   they when read_flags is 0: a loop exit_checks.py restarts reads them at its exit
   (pj_exit_flags). */
static inline int pj_nest_ufunc(int k, char **data, const npy_intp *steps, int read_flags)
{
    pj_ufunc_info *u = pj_ufuncs[k];
    npy_intp n = 1;
    if (u == NULL)
        return -1;
    /* an error the loop set (integer ** a negative integer sets one and returns 0): Python
       calls the ufunc again and raises it */
    if (u->loop(u->context, data, &n, steps, u->auxdata) < 0 || PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (u->no_floatingpoint_errors || !read_flags)
        return 0;
    return pj_call_flags();
}
/* At the exit of a loop whose NumPy calls left their flags unread: whether one of them
   raised divide, overflow or invalid, or underflow while np.errstate does not ignore it.
   The flags are sticky, so one read covers every call of every iteration; a flag raised
   before the loop (the kernel clears them at its entry) or by a Python float's silent inf
   only makes Python run the loop again, which is right whatever the flags were. Any flag
   read is cleared. */
static inline int pj_exit_flags(void)
{
    int f = fetestexcept(PJ_FE_ERR | FE_UNDERFLOW);
    if (__builtin_expect(f != 0, 0)) {
        feclearexcept(PJ_FE_ERR | FE_UNDERFLOW);
        return (f & PJ_FE_ERR) || pj_underflow_reported();
    }
    return 0;
}
"""


def module_constant(obj, attr):
    """The Const `obj.attr` is when obj is math or numpy and attr a float constant (pi...)."""
    value = getattr(obj, attr, None) if obj is math or obj is np else None
    if attr in CONSTANTS and type(value) is float:
        return Const(value, T.FLOAT)
    return None


def global_constant(obj):
    """The Const a global holding a Python int, float or bool is (its value guarded: the
    loop-nest capture and inline.guard)."""
    if type(obj) in (int, float, bool) and T.of_value(obj) is not None:
        return Const(obj, T.of_value(obj))
    return None


def module_callable(obj, attr):
    """The callable `np.attr` when a nest may call it (a ufunc or a scalar type), else None."""
    if obj is not np:
        return None
    value = getattr(np, attr, None)
    if isinstance(value, np.ufunc) or isinstance(value, type) and value in CASTS:
        return value
    return None


def call(walk, block, stack, pos, fn, args):
    """The walk's CALL of `fn` (a ufunc, a NumPy scalar type, a user function) with `args`
    (stack items): its result pushed; the block to continue in. Unsupported otherwise."""
    name = getattr(fn, "__name__", type(fn).__name__)
    is_cast = isinstance(fn, type) and fn in CASTS
    if not isinstance(fn, (np.ufunc, types.FunctionType)) and not is_cast:
        raise Unsupported(f"a call of {name!r}")
    if any(x[0] != "v" for x in args):
        raise Unsupported(f"{name}() of a non-scalar")
    operands = tuple(x[1] for x in args)
    if isinstance(fn, types.FunctionType):
        from pijit.loopnest import inline       # its walk extends recognise's, which imports us
        return inline.call(walk, block, stack, pos, fn, operands)
    fname = f"np_{name}"
    walk.funcs[fname] = fn
    if is_cast:
        if len(operands) != 1:
            raise Unsupported(f"np.{name}() of {len(operands)} arguments")
        return walk.compute(block, stack, pos, "call", fname,
                            functools.partial(_cast_rule, CASTS[fn]), operands)
    return walk.compute(block, stack, pos, "call", fname,
                        functools.partial(_ufunc_rule, fn, len(operands)), operands)


def _cast_rule(target, member):
    if target.kind == "b":
        return target, ("truth",)       # np.bool_(x) is x != 0 (NaN is true)
    return target, ("cast", target.name)


def _weak(t):
    """What resolve_dtypes takes for a static type: Python int and float are weak."""
    return {T.INT: int, T.FLOAT: float, T.BOOL: T.NPBOOL}.get(t, t)


@functools.lru_cache(maxsize=None)
def loop_signature(ufunc, members: tuple) -> str:
    """The loop NumPy runs for ufunc on operands of these static types, as 'dd->d' (dtype
    characters); Unsupported when it is not one of a numeric dtype the kernel carries."""
    if ufunc.nout != 1 or ufunc.signature is not None or ufunc.nin != len(members):
        raise Unsupported(f"np.{ufunc.__name__} of {len(members)} arguments")
    try:
        dts = ufunc.resolve_dtypes(tuple(_weak(m) for m in members) + (None,))
    except Exception:       # noqa: BLE001 - no loop, or a resolver refusing weak scalars
        raise Unsupported(f"np.{ufunc.__name__} of {', '.join(map(T.name, members))}") \
            from None
    if not all(any(d.type is t.type for t in T.DTYPES) for d in dts):
        raise Unsupported(f"np.{ufunc.__name__} with a loop over {dts}")
    return "".join(d.char for d in dts[:-1]) + "->" + dts[-1].char


def _ufunc_rule(ufunc, nargs, *members):
    if nargs != ufunc.nin:
        raise Unsupported(f"np.{ufunc.__name__} of {nargs} arguments")
    sig = loop_signature(ufunc, members)
    _UFUNCS[ufunc.__name__] = ufunc
    return np.dtype(sig[-1]), ("ufunc", ufunc.__name__, sig)


_UFUNCS = {}                # ufunc name (as in a domain) -> the ufunc


def _sig_dtypes(sig: str) -> tuple:
    """('dd->d') -> ((float64, float64), float64)."""
    ins, out = sig.split("->")
    return tuple(np.dtype(c) for c in ins), np.dtype(out)


# float64 ufunc loops that are one call of libm, as NumPy >= 1.25.2 has them on every CPU
# (loops_trigonometric.dispatch: "Disable SIMD code sin/cos f64 and revert to libm", each
# element `npy_sin(in)`, i.e. libm's sin): the kernel calls libm itself, sparing NumPy's
# loop wrapper per element, and reads the flags as after NumPy's loop. float32 sin/cos
# have SIMD loops of NumPy's own and stay NumPy's.
LIBM = {("sin", "d->d"): "pj_libm_sin", ("cos", "d->d"): "pj_libm_cos"} \
    if np.lib.NumpyVersion(np.__version__) >= "1.25.2" else {}


def is_direct(domain) -> bool:
    """Whether a ufunc op is computed by C itself (DIRECT) rather than by NumPy's loop."""
    ins, out = _sig_dtypes(domain[2])
    return domain[1] in DIRECT and out.kind == "f" and all(d == out for d in ins)


# -- the kernel's side -------------------------------------------------------------------------
def slots(blocks) -> list:
    """The NumPy loops a kernel calls, in slot order: (ufunc name, signature) of each ufunc
    op not computed directly, in the blocks and the functions inlined into them."""
    from pijit.loopnest import inline
    out = []
    for op in inline.all_ops(blocks):
        if op.domain[:1] == ("ufunc",) and not is_direct(op.domain) \
                and op.domain[1:] not in LIBM:
            key = op.domain[1:]
            if key not in out:
                out.append(key)
    return out


def raise_flags(blocks) -> bool:
    """Whether blocks (or the functions inlined into them) call a NumPy loop or libm, whose
    floating-point flags the kernel reads."""
    from pijit.loopnest import inline
    return any(op.domain[:1] == ("ufunc",) and not is_direct(op.domain)
               for op in inline.all_ops(blocks))


def call_info(name: str, sig: str):
    """The call-info capsule of NumPy's loop of ufunc `name` for `sig`."""
    ufunc = _UFUNCS.get(name) or getattr(np, name)
    ins, out = _sig_dtypes(sig)
    _, info = ufunc._resolve_dtypes_and_context(ins + (out,))
    ufunc._get_strided_loop(info)
    return info


def set_loops(kernels, loops: list):
    """Give a built kernel module its NumPy loops (slots() of its nest)."""
    for k, (name, sig) in enumerate(loops):
        kernels.set_ufunc(k, call_info(name, sig))


def lower(kernel, op, a, d, bail) -> list:
    """The C of a call op of DOMAINS (lower_c.NestKernel.compute hands them here)."""
    from pijit.loopnest import lanes
    kind = op.domain[0]
    if kind == "inline":
        from pijit.loopnest import inline
        return inline.lower(kernel, op, bail)
    if kind == "cast":
        return _lower_cast(kernel, op, a[0], d, np.dtype(op.domain[1]), bail)
    ins, out = _sig_dtypes(op.domain[2])
    lines = ["{"]
    for j, (x, dt) in enumerate(zip(op.args, ins)):
        lines += ["    " + s for s in _convert(kernel, x, j, dt, bail)]
    ct = _ctype(out)
    if is_direct(op.domain):
        us = [f"u{j}" for j in range(len(ins))]
        lines.append(f"    if ({' || '.join(f'!isfinite({u})' for u in us)}) {bail}")
        tie = ""
        if "{tie}" in DIRECT[op.domain[1]]:
            tie = _tie(op.domain[1], out)
            if tie is None:
                lines.append(f"    if (u0 == u1 && signbit(u0) != signbit(u1)) {bail}")
        expr = DIRECT[op.domain[1]].format(f="f" if out == T.F32 else "", tie=tie or "")
        lines += [f"    {ct} r = {expr};", f"    if (!isfinite(r)) {bail}", f"    {d} = r;", "}"]
        return lines
    if kernel.lane is not None and lanes.site(op):
        # lanes.py: the phases after the first reaching this call take its result from
        # its buffer; that phase records the operand and stops the lane (NumPy's loop then
        # computes the call for every lane), or computes it (libm)
        h, j = kernel.lane
        kernel.lane[1] += 1
        first = kernel.lanes[h].phase(j)
        lines += [f"    {ct} r;", f"    if (pj_ph{h} > {first}) r = pj_lo{h}_{j}[pj_ln{h}];"]
        if op.domain[1:] in LIBM:
            lines.append(f"    else {{ r = {LIBM[op.domain[1:]]}(u0); "
                         f"pj_lo{h}_{j}[pj_ln{h}] = r; }}")
        else:
            lines.append(f"    else {{ pj_li{h}_{j}[pj_ln{h}] = u0; goto pj_lane_end{h}; }}")
        return lines + [f"    {d} = r;", "}"]
    read = int(not kernel.flags_at_exit)
    if op.domain[1:] in LIBM:
        lines += [f"    {ct} r = {LIBM[op.domain[1:]]}(u0);",
                  f"    int uf = {read} ? pj_call_flags() : 0;",
                  f"    if (uf < 0 || (uf > 0 && pj_underflow_reported())) {bail}",
                  f"    {d} = r;", "}"]
        return lines
    slot = kernel.ufunc_slots.index(op.domain[1:])
    ptrs = ", ".join([f"(char *)&u{j}" for j in range(len(ins))] + ["(char *)&r"])
    # strides 0, as NumPy's for the 0-d operands of np.<ufunc>(scalars): power's loop takes
    # its fast paths (x ** 0.5 as sqrt...) by them
    lines += [f"    {ct} r;",
              f"    char *ud[{len(ins) + 1}] = {{{ptrs}}};",
              f"    static const npy_intp us[{len(ins) + 1}] = {{0}};",
              f"    int uf = pj_nest_ufunc({slot}, ud, us, {read});",
              f"    if (uf < 0 || (uf > 0 && pj_underflow_reported())) {bail}",
              f"    {d} = r;", "}"]
    return lines


@functools.lru_cache(maxsize=None)
def _tie(name: str, dtype) -> str | None:
    """Which of +0.0 and -0.0 NumPy's maximum/minimum/fmax/fmin of `dtype` returns (it
    varies by ufunc and dtype: its SIMD loops pick by operand position): "=" the first
    operand, "" the second, None neither consistently (the kernel then hands such ties
    over)."""
    f = getattr(np, name)
    neg, pos = dtype.type(-0.0), dtype.type(0.0)
    a, b = np.signbit(f(neg, pos)), np.signbit(f(pos, neg))
    return "=" if a and not b else "" if b and not a else None


def _ctype(dt) -> str:
    from pijit.loopnest.lower_c import ctype
    return ctype(dt)


def _convert(kernel, x, j, dt, bail) -> list:
    """C declaring u<j>: operand x as a value of the loop's input dtype `dt`, as NumPy
    converts it (NumPy scalars by C casts: the loop was resolved by safe casting)."""
    v = kernel.val(x)
    members = kernel.types(x)
    ct = _ctype(dt)
    out = []
    py_int = any(m is T.INT for m in members)
    if dt.kind in "iu" and dt != T.I64 and py_int:
        lo, hi = (int(b) for b in (np.iinfo(dt).min, np.iinfo(dt).max))
        iv = kernel.ival(x)
        out.append(f"if ({iv} < {lo}LL || {iv} > {hi}LL) {bail}")
    if dt == T.F32 and py_int:
        out.append(f"if (PJ_I24({kernel.ival(x)})) {bail}")
    out.append(f"{ct} u{j} = ({ct}){v};")
    if dt == T.F32 and any(m is T.FLOAT for m in members):
        out.append(f"if (isinf(u{j}) && !isinf({v})) {bail}")
    return out


def _lower_cast(kernel, op, v, d, target, bail) -> list:
    ct = _ctype(target)
    kinds = {T.kind(m) for m in kernel.types(op.args[0])}
    if target.kind == "f":
        if "f" in kinds:
            return ["{", f"    double x = (double){v};", f"    if (!isfinite(x)) {bail}",
                    f"    {ct} r = ({ct})x;", f"    if (!isfinite(r)) {bail}",
                    f"    {d} = r;", "}"]
        check = [f"if (PJ_I24((int64_t){v})) {bail}"] if target == T.F32 else []
        return check + [f"{d} = ({ct})(int64_t){v};"]
    info = np.iinfo(target)
    lo, hi = int(info.min), int(info.max)
    if "f" in kinds:
        return ["{", f"    double x = (double){v};",
                f"    if (!(x > {float(lo) - 1.0!r} && x < {float(hi) + 1.0!r})) {bail}",
                f"    {d} = ({ct})(int64_t)x;", "}"]
    if target == T.I64:
        return [f"{d} = (int64_t){v};"]
    return ["{", f"    int64_t x = (int64_t){v};",
            f"    if (x < {lo}LL || x > {hi}LL) {bail}", f"    {d} = ({ct})x;", "}"]

