"""JitConfig: the frozen, validated options of one jitted function, and the environment.

Options follow MindSpore PIJit's names where one exists. `OPTIONS` is the single table of
names, types, defaults, valid values and documentation; the README's table is checked
against it by the tests. Environment variables are read here and nowhere else.
"""
from __future__ import annotations

import dataclasses
import math
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    name: str
    type: type
    default: object
    doc: str
    choices: tuple = ()        # valid values, for str options
    minimum: int | None = None
    item_type: type | None = None   # for tuple options: the type of every item


OPTIONS = (
    Option("print_after_all", bool, False,
           "Print, for each compile, the original bytecode, the captured graph (one op per "
           "line with shapes and dtypes), the compiled graph (generated code, fused groups), "
           "the C of its fused kernels (their bodies, without the prelude every module "
           "shares), the guards and the transformed bytecode, to stderr."),
    Option("print_bb", bool, False, "Print the original bytecode of each compiled function."),
    Option("print_guard", bool, False, "Print the guards of each new cache entry."),
    Option("LOG_GRAPH_BREAK", bool, False,
           "Log every graph break and fallback at WARNING level on the `pijit.graph_breaks` "
           "logger, even when PIJIT_LOG does not name that channel."),
    Option("compile_with_try", bool, True,
           "An internal error while compiling runs the function as plain Python (logged) "
           "instead of raising; a RecursionError or MemoryError runs that call plain and is "
           "retried at later misses."),
    Option("specialize_scalar", bool, True,
           "Python int/float/complex arguments are constants guarded by value. When False "
           "they are typed graph inputs (guarded by type only), so new values do not recompile."),
    Option("limit_graph_count", int, 8,
           "Cache entries per code object (resume functions and outlined loop bodies have "
           "their own). Past it, inputs that match an existing entry still use it; others run "
           "as plain Python, said once per code (stats' eager_fallbacks, PIJIT_LOG=recompiles).",
           minimum=1),
    Option("enable_dynamic_shape", bool, True,
           "When a recompile meets an array of the dtype and ndim of some entry (any entry, "
           "not only the newest) with other dimensions, or an int/float argument of another "
           "value than an entry's, the new entry treats those dimensions (that value) as "
           "dynamic, so further sizes (values) reuse it."),
    Option("loop_unrolling", bool, True,
           "Unroll loops over iterables known at capture time (range with guarded bounds, "
           "tuples, lists, zip/enumerate of those, rows of an array). When False, or past "
           "MAX_LOOP_UNROLLING, the loop runs as residual bytecode and the code after it is "
           "captured in a resume function (or, with loop_nodes, a range loop may become a "
           "loop node)."),
    Option("MAX_LOOP_UNROLLING", int, 100,
           "Most iterations unrolled per loop (all loops nested in it included). Whatever this "
           "says, no loop unrolls further once the graph holds 256 nodes (inlined calls' loops "
           "included; a loop of known length stops after one iteration when its copies would "
           "pass that), nor past an iteration whose body holds a loop (a loop nest or loop "
           "node: nothing fuses across it): the loop then becomes a loop node, else runs as "
           "residual code (capture, fusion and gcc of unrolled copies cost about a millisecond "
           "a node). A list or tuple longer than this that the function reads (an argument, a "
           "global, an attribute) is opaque: not guarded item by item, and reading its items "
           "breaks the graph (a list is read as one whose length changes between calls: its "
           "uses by NumPy stay in the graph).", minimum=0),
    Option("loop_nodes", bool, True,
           "A `for` loop over range(...) whose bounds are known only at run time, or longer "
           "than MAX_LOOP_UNROLLING, or that cannot be unrolled, becomes one loop node: the body is captured once "
           "as a graph of its own and runs once per iteration inside the graph, with no guard "
           "on the trip count. Loops it cannot express (graph breaks or break/return in the "
           "body, a carried value whose type, dtype or shape changes, a loop variable used "
           "after a loop that may not run) are captured as when False: unrolled, or residual "
           "bytecode."),
    Option("loop_nests", bool, True,
           "An outermost loop over array elements (for over range(...), over a 1-D array's "
           "elements, over a 2-D array's rows read as row[j], over enumerate(x[, int start]) "
           "and zip of two or three of those; while; nested, with break/continue, "
           "if/elif/else, element reads and writes, scalar arithmetic, min/max/abs, "
           "int/float/bool and math functions on numbers, dots, sums and elementwise updates "
           "of slices by index such as L[i, :j] @ L[:j, j], x[:i].sum(), A[i, 1:-1] += e, "
           "also through a local bound to a view such as row = A[i]; raise E(args); "
           "out.append of scalars or tuples of them to a list the loop reads no other way, "
           "a list the function built staying a graph value after the loop (len() and "
           "np.array of float items, or with a dtype, in the graph; other uses break there), "
           "the caller's ending the graph after the loop; branches on a flag the entry guards "
           "by value, only the live arm walked) "
           "becomes one loop-nest node, "
           "compiled to C at O1/O2 with plain Python's results: where C cannot go on exactly "
           "(a Python int leaving int64, an index out of bounds, a division by zero, "
           "a non-finite float) the rest of the nest runs in Python from that point. Loops "
           "it cannot compile are captured as when False (print_after_all shows the nest's "
           "IR and C; PIJIT_LOG=graph_breaks says why a loop was not compiled)."),
    Option("MAX_INLINE_DEPTH", int, 8,
           "Deepest nesting of user functions inlined into one graph; deeper calls (and "
           "calls that cannot be captured whole) are graph breaks, and the callee is jitted "
           "on its own.", minimum=0),
    Option("allowed_inline_modules", tuple, (),
           "Modules (and their submodules) of installed libraries whose Python functions may "
           "be inlined. User code is always inlined; library code by default is not.",
           item_type=str),
    Option("pijit_forbidden", tuple, (),
           "Callables capture never calls, inlines or folds: each call of one is a graph "
           "break and runs as plain Python (e.g. a function with side effects pijit would "
           "otherwise take for pure).", item_type=Callable),
    Option("pijit_constexpr", tuple, (),
           "Callables whose calls on values known at capture time (guarded constants) are "
           "folded to constants, called once at capture: their result must depend only on "
           "their arguments. A call with array arguments is a graph break.",
           item_type=Callable),
    Option("print_last_frame_if_break_graph", bool, False,
           "At each graph break, print the frame state at the break (stack and live locals, "
           "with shapes and dtypes) to stderr."),
    Option("fullgraph", bool, False,
           "Whole-function capture: anything that cannot be captured raises "
           "pijit.GraphBreakError (same as mode='PSJit')."),
    Option("jit_syntax_level", str, "LAX",
           "'STRICT' behaves like fullgraph=True; 'LAX' falls back to plain Python.",
           choices=("STRICT", "LAX")),
    Option("jit_level", str, "O1",
           "'O0': the captured graph runs on the NumPy reference backend. 'O1': graph passes "
           "(dead code, constant scalars, exact identities such as x*1, common "
           "subexpressions; code that may warn is neither dropped nor merged, and NumPy "
           "scalar math of integers, which warns when it overflows, stays NumPy's, so the "
           "warnings are NumPy's) and fused C kernels for what rounds exactly "
           "like NumPy: + - * /, comparisons, sqrt, abs, maximum, minimum, clip, where, "
           "square, casts, integer and bitwise ops (wrapping around like NumPy), "
           "sum/prod/max/min of integers and bools, and any/all/argmax/argmin (over all "
           "axes, the last axis, or outer axes only; argmax/argmin not the latter), float "
           "sum/mean over outer axes (row after row in the dtype, as NumPy does for operands "
           "in C order and more than one value kept per row; other orders, and a column "
           "kept as one value, which NumPy sums pairwise, go to NumPy), along rows or over "
           "all axes (a copy of "
           "NumPy's pairwise summation, streamed in its own chunks; C order too, and dense "
           "operands for all axes), a float32 mean's sum divided by its count in double, as "
           "NumPy's true_divide by an np.intp count does, float max/min (a zero result, whose "
           "sign depends on the order when the values have zeros of both signs, goes to "
           "NumPy unless the row's values are in memory and its zeros all have one sign; a "
           "NaN result, whose sign NumPy keeps or drops by position, goes to NumPy), so "
           "softmax and layernorm are one kernel, "
           "and "
           "float exp, log, sin, cos, tanh, powers, expm1, log1p, log2, log10, exp2, sinh, "
           "cosh, tan, arcsin, arccos, arctan, arcsinh, arccosh, arctanh, cbrt, logaddexp, "
           "logaddexp2, arctan2 and hypot computed by calling NumPy's own loops on each row: "
           "results bit-identical to NumPy (`**` of a NumPy float scalar, which NumPy's "
           "scalar math computes by C's pow where power's loop of arrays takes sqrt for ** "
           "0.5, x*x for ** 2 and SIMD code otherwise, stays NumPy's). 'O2': O1 with these "
           "transcendentals through "
           "glibc's vector math inlined instead (those after pow where glibc is 2.35 or "
           "newer, else by NumPy's loops as at O1; logaddexp and logaddexp2 by NumPy's "
           "formula over vector exp and log1p) "
           "(within 5 to 8 ulp of NumPy's results: the README's O2 error bounds, each "
           "libmvec's documented bound plus NumPy's), float "
           "sum/mean/prod accumulated in float64 (pairwise in blocks) and max/min (a zero "
           "result goes to NumPy, as at O1), "
           "with a row reduction and the ops that broadcast it back in one kernel (softmax, "
           "layernorm; a division by a per-row value becomes a multiplication by its "
           "reciprocal, within 1.5 ulp), and a*b+c contracted into fused multiply-adds.",
           choices=("O0", "O1", "O2")),
    Option("adaptive", bool, True,
           "Compile where it pays (PIJIT_ADAPTIVE=0 turns this off for every function): an input "
           "signature (argument types, dtypes and ndims of arrays) runs as plain Python until its "
           "calls took compile_after_ms (however big their arrays; time spent compiling other "
           "functions inside those calls does not count), and its int and float arguments that "
           "took more than one value meanwhile are captured dynamic at once; a captured graph "
           "first runs on the NumPy backend (a graph whose work is a loop: as plain Python) and "
           "is compiled at jit_level once its calls took "
           "promote_after_ms, in the background when its kernels are not in the disk cache "
           "(background_compile); a graph with no array work (and no array for the code after a "
           "graph break) runs as plain Python, and calls of such a signature skip the hook; "
           "perf_statistics. Every call pijit"
           " runs as plain Python (a signature not hot yet, an entry that runs plain, a trial's "
           "plain side) runs outside the hook, as if no jitted call were in progress: its own "
           "calls are inlined by CPython and unjitted code it calls is not seen by the hook "
           "(jitted functions it calls enter it again through their wrappers). Capture itself "
           "gives up on a call with no array among its arguments once it has walked 1000 "
           "instructions and reads (counted, so the decision does not depend on the machine's "
           "load) without finding array work: that signature runs as plain Python (an entry "
           "guarded by the argument types), since capturing pure Python to the end (every "
           "unrolled iteration and inlined call) cost up to seconds for nothing to fuse. "
           "False: every signature compiles "
           "at its first call at jit_level, synchronously, and always runs compiled (what explain "
           "and the tests use)."),
    Option("compile_after_ms", int, 100,
           "With adaptive: milliseconds an input signature's calls run as plain Python (timed: "
           "its first 16 calls, then one in 16, counted 16 times; less the time spent compiling "
           "inside them; CPU time: wall time scaled by the thread's CPU share, so that other "
           "processes on a loaded machine do not count) before it is captured and compiled: "
           "capture costs 2-30 ms an entry (and its resume functions as much again), so a "
           "signature that is called rarely, or runs fast, is never worth it (the program "
           "corpus, 68 programs of 10-250 ms: geometric mean 0.78x plain at 20 ms, 0.82x at 50, "
           "0.88x at 100, 0.92x at 200, where the programs that gain from kernels lose it).",
           minimum=0),
    Option("promote_after", int, 1,
           "With adaptive: hits of an entry on the NumPy backend before it may be compiled at "
           "jit_level (fused C kernels), once promote_after_ms allows it. 0: at once.",
           minimum=0),
    Option("promote_after_ms", int, 20,
           "With adaptive: milliseconds an entry's calls run on the NumPy backend (timed, in CPU "
           "time as compile_after_ms; an entry "
           "whose work is a loop runs plain Python meanwhile) before it is compiled at jit_level: a C compile costs 60-300 ms when its kernels are not in "
           "the disk cache (run in the background, see background_compile) and a few ms of "
           "code generation when they are, so a program that runs a few ms in all never pays "
           "for one.", minimum=0),
    Option("background_compile", bool, True,
           "With adaptive: a promotion whose C kernels are not in the disk cache starts the C "
           "compiler in the background and the entry keeps running on the NumPy backend "
           "(bit-identical at O1) until the kernels are built; later hits check (at hits 1, 2, 4, "
           "... 1024 apart) and switch. A failed build keeps the NumPy-backend entry (logged on "
           "PIJIT_LOG=perf). Builds still running at exit are stopped. False: the promotion "
           "waits for the compiler."),
    Option("perf_statistics", bool, True,
           "With adaptive: time each new compiled entry against plain Python over its next "
           "2 * PERF_STATISTICS_COUNT hits (alternating; after its promotion, if any) and keep "
           "the faster; pijit.stats and PIJIT_LOG=perf report both times and the choice."),
    Option("inline_plain", bool, True,
           "Once pijit has nothing to do for a jitted function's calls (its code "
           "is left to plain Python, or frozen with entries that all run plain; or 1000 calls "
           "in a row ran plain, each passing the argument types of the last (no array), while no "
           "entry ran compiled code, and either their signature runs plain for good (captured: "
           "no array work) or no signature waiting to get hot cost 2 us a call), the "
           "function is given back to CPython: its calls from plain code are inlined and "
           "specialized as if pijit were not there (a recursive one-line function: 1.0x plain "
           "instead of about 0.5x), and code_info and stats no longer count them (code_info's "
           "'inlined'). Calls from inside a jitted call still reach the hook; pijit.reset, a "
           "new entry, a state change, or a new __code__ of the function (or of the function "
           "it was made from) give the calls back to pijit (3.11: a copy whose function someone "
           "else holds keeps a prefix that only checks that function is unchanged, as 3.11 "
           "cannot see it change; 3.13: a jitted __init__ is given back by putting a plain copy "
           "of it in its class's __dict__ in the Wrapper's place). "
           "Meanwhile a signature first seen from plain code (arrays after scalars, say) runs "
           "plain. False: pijit sees every call."),
    Option("PERF_STATISTICS_COUNT", int, 3,
           "Timed runs of each side in a perf_statistics trial (the fastest of each counts).",
           minimum=1),
    Option("PERF_STATISTICS_SCALE_10000X", int, 10300,
           "Plain Python replaces a compiled entry when the compiled run takes more than this "
           "/ 10000 times the plain run (10300: 3% slower).", minimum=10000),
    Option("num_threads", int, 0,
           "OpenMP threads for fused kernels over at least 65536 elements, sharing rows or "
           "chunks (never a whole-array reduction), so results are the same for any count. "
           "0: PIJIT_NUM_THREADS, else 1 (a second thread collapsed on this project's shared "
           "2-core machines). Idle threads sleep (OMP_WAIT_POLICY=PASSIVE unless set).",
           minimum=0),
)
_BY_NAME = {o.name: o for o in OPTIONS}


def _validate(name, value):
    option = _BY_NAME.get(name)
    if option is None:
        raise ValueError(f"jit_config: unknown option {name!r}; valid options are: "
                         f"{', '.join(sorted(_BY_NAME))}")
    ok_type = type(value) is option.type if option.type in (bool, int) else isinstance(value, option.type)
    if not ok_type:
        raise TypeError(f"jit_config[{name!r}] must be {option.type.__name__}, "
                        f"got {type(value).__name__} {value!r}")
    if option.choices and value not in option.choices:
        raise ValueError(f"jit_config[{name!r}] must be one of "
                         f"{', '.join(map(repr, option.choices))}; got {value!r}")
    if option.item_type is not None and not all(isinstance(v, option.item_type) for v in value):
        raise TypeError(f"jit_config[{name!r}] must hold only {option.item_type.__name__} "
                        f"items, got {value!r}")
    if option.minimum is not None and value < option.minimum:
        raise ValueError(f"jit_config[{name!r}] must be >= {option.minimum}, got {value!r}")


@dataclass(frozen=True)
class JitConfig:
    """Options of a jitted function. Build it with keywords or from a dict (`JitConfig.of`)."""
    print_after_all: bool = False
    print_bb: bool = False
    print_guard: bool = False
    LOG_GRAPH_BREAK: bool = False
    compile_with_try: bool = True
    specialize_scalar: bool = True
    limit_graph_count: int = 8
    enable_dynamic_shape: bool = True
    loop_unrolling: bool = True
    MAX_LOOP_UNROLLING: int = 100
    loop_nodes: bool = True
    loop_nests: bool = True
    MAX_INLINE_DEPTH: int = 8
    allowed_inline_modules: tuple = ()
    pijit_forbidden: tuple = ()
    pijit_constexpr: tuple = ()
    print_last_frame_if_break_graph: bool = False
    fullgraph: bool = False
    jit_syntax_level: str = "LAX"
    jit_level: str = "O1"
    adaptive: bool = True
    compile_after_ms: int = 100
    promote_after: int = 1
    promote_after_ms: int = 20
    background_compile: bool = True
    perf_statistics: bool = True
    inline_plain: bool = True
    PERF_STATISTICS_COUNT: int = 3
    PERF_STATISTICS_SCALE_10000X: int = 10300
    num_threads: int = 0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            _validate(f.name, getattr(self, f.name))

    @classmethod
    def of(cls, config) -> "JitConfig":
        """A JitConfig from None, a dict of options, or a JitConfig."""
        if config is None:
            return cls()
        if isinstance(config, JitConfig):
            return config
        if isinstance(config, dict):
            config = {k: tuple(v) if _BY_NAME.get(k) and _BY_NAME[k].type is tuple
                      and isinstance(v, list) else v for k, v in config.items()}
            for key, value in config.items():
                if not isinstance(key, str):
                    raise TypeError(f"jit_config keys must be option names (str), got {key!r}")
                _validate(key, value)
            return cls(**config)
        raise TypeError(f"jit_config must be a dict or pijit.JitConfig, got {type(config).__name__}")

    @property
    def strict(self) -> bool:
        return self.fullgraph or self.jit_syntax_level == "STRICT"

    @property
    def is_adaptive(self) -> bool:
        return self.adaptive and env_adaptive()

    @property
    def threads(self) -> int:
        return self.num_threads or env_num_threads()

    def replace(self, **changes) -> "JitConfig":
        return dataclasses.replace(self, **changes)


assert [f.name for f in dataclasses.fields(JitConfig)] == [o.name for o in OPTIONS]
assert all(f.default == _BY_NAME[f.name].default for f in dataclasses.fields(JitConfig))


# -- environment ----------------------------------------------------------------------------
def env_disabled() -> bool:
    """PIJIT_DISABLE=1 turns every jit off (plain Python)."""
    return os.environ.get("PIJIT_DISABLE", "").strip() not in ("", "0")


def env_verify_graphs() -> bool:
    """PIJIT_VERIFY_GRAPHS=1 (the test suite sets it): verify every graph after each stage
    that makes one (pijit.graph.verify.after)."""
    return os.environ.get("PIJIT_VERIFY_GRAPHS", "").strip() not in ("", "0")


def env_full_tracebacks() -> bool:
    """PIJIT_FULL_TRACEBACK=1 keeps pijit's own frames in tracebacks (pijit.tracebacks),
    for debugging pijit itself."""
    return os.environ.get("PIJIT_FULL_TRACEBACK", "").strip() not in ("", "0")


LOG_CHANNELS = ("graph_breaks", "guards", "recompiles", "bytecode", "graph", "kernels", "perf")


def env_num_threads() -> int:
    """PIJIT_NUM_THREADS (a positive int; default 1): threads of fused kernels."""
    raw = os.environ.get("PIJIT_NUM_THREADS", "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"PIJIT_NUM_THREADS must be a positive integer, got {raw!r}")
    return int(raw)


def env_pool_bytes() -> int:
    """PIJIT_POOL_MB (an int >= 0; default 512): the most memory the buffer pool keeps for
    reuse by big kernel outputs (csrc/pool.c); 0 keeps nothing."""
    return _env_megabytes("PIJIT_POOL_MB", 512)


def env_adaptive() -> bool:
    """PIJIT_ADAPTIVE=0 turns the adaptive option off for every function (the test suite's
    setting: each signature compiles at its first call)."""
    raw = os.environ.get("PIJIT_ADAPTIVE", "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"PIJIT_ADAPTIVE must be 0 or 1, got {raw!r}")
    return raw != "0"


def env_cache_bytes() -> int:
    """PIJIT_CACHE_MB (an int >= 0; default 1024): the most the compiled kernels in the cache
    dir may take; past it the least recently used go. 0: no limit."""
    return _env_megabytes("PIJIT_CACHE_MB", 1024)


def _env_megabytes(name: str, default: int) -> int:
    """Bytes from environment variable `name`, an int >= 0 of megabytes (default if unset)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default << 20
    if not raw.isdigit():
        raise ValueError(f"{name} must be an integer >= 0 (megabytes), got {raw!r}")
    return int(raw) << 20


def env_build_timeout() -> float:
    """PIJIT_BUILD_TIMEOUT (seconds, a number > 0; default 300): the longest one kernel
    module's build may take (gcc runs included). Past it gcc is killed and the graph runs on
    NumPy (logged). Generous: a module of many kernels takes seconds on a loaded machine."""
    raw = os.environ.get("PIJIT_BUILD_TIMEOUT", "").strip()
    if not raw:
        return 300.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"PIJIT_BUILD_TIMEOUT must be a number of seconds > 0, got {raw!r}")
    return value


def env_cc() -> list:
    """CC (default gcc): the command that compiles fused kernels, with any arguments of its
    own (`CC="ccache gcc"`); it must take gcc's flags."""
    raw = os.environ.get("CC", "").strip()
    if not raw:
        return ["gcc"]
    try:
        words = shlex.split(raw)
    except ValueError:
        words = []
    if not words or not words[0]:
        raise ValueError(f"CC must be a command (words split as by a shell), got {raw!r}")
    return words


def cache_dir() -> str:
    """PIJIT_CACHE_DIR, else $XDG_CACHE_HOME/pijit or ~/.cache/pijit: where compiled kernels
    are kept between processes."""
    env = os.environ.get("PIJIT_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pijit")


def env_log_channels() -> list:
    """PIJIT_LOG=graph_breaks,guards,... (or `all`): the logging channels to turn on."""
    raw = os.environ.get("PIJIT_LOG", "")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if names == ["all"]:
        return list(LOG_CHANNELS)
    unknown = [n for n in names if n not in LOG_CHANNELS]
    if unknown:
        raise ValueError(f"PIJIT_LOG: unknown channel(s) {', '.join(unknown)}; valid channels "
                         f"are: {', '.join(LOG_CHANNELS)}, all")
    return names
