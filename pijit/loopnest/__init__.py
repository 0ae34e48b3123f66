"""Loop nests compiled to C: Python loops over array elements as one graph node.

Stages, in the order data flows:
    recognise.py  the bytecode of an outermost loop (for over range, array elements or rows,
                  enumerate and zip of those; while; nested, with break/continue and
                  if/elif/else) -> ir.Nest, typed by types.py
    ir.py         a CFG of blocks over typed variables; ops that may bail start a block
    types.py      NumPy's (NEP 50) and Python's promotion rules, and each op's C domain
    slices.py     views by index (`L[i, :j]`) and the array ops on them (dot, sum,
                  elementwise updates): recognised for recognise.py, lowered for lower_c.py
                  and lower_py.py
    lower_py.py   Nest -> a Python function run from any block (O0; the rest of the nest
                  after the kernel bails: exact Python semantics, exceptions and warnings)
    bounds.py     the C kernel's loops versioned: accesses proven in range at a loop's
                  entry skip their bounds checks (the Python form never sees the copies);
                  an innermost loop's stores into arrays its entry checked apart from the
                  others keep those others' loads
    hoist.py      views of one geometry at every iteration (`for c in coef[::-1]` inside an
                  outer loop): checked and measured once at the C kernel's entry
    cse.py        loads and arithmetic the C kernel already holds on every path: copies
    forward.py    an element the previous iteration of a loop stored, read again: taken from
                  a variable the store sets (no round trip through memory)
    float_checks.py  NumPy float checks a later check covers (a non-finite value stays
                  non-finite through + - * and a numerator, and fails math.floor's,
                  int()'s and the math functions' checks): dropped
    ifconvert.py  small branches of the C kernel made selects: both sides run, the condition
                  picks; a check failing there runs the original branch
    calls.py      calls of NumPy's scalar ufuncs (NumPy's own loop, or C where it is one
                  IEEE operation) and scalar casts; anything else recognise.py cannot call
    inline.py     calls of user functions: their bytecode -> a CFG expanded in the C kernel
                  at the call (the Python form calls the function)
    appends.py    `out.append(x)` of scalars or tuples of them to a list the loop reads no
                  other way: the kernel appends at once (PyList_Append), so the list is
                  plain Python's at every hand-over; after the loop a list the function
                  built is a graph value (len, np.array where exact), the caller's ends
                  the graph
    raises.py     `raise E(args)`: an op that always hands over, so Python raises it at that
                  iteration, every earlier write done
    flags.py      branches on a value the entry guards and the loop never assigns (`if
                  verbose:`, `if DEBUG:`): only the arm it selects is walked
    views.py      locals bound to views (`row = A[i]`, `seg = x[a:b]`): aliases of the view,
                  its indices checked and copied at the binding
    ranges.py     integer value ranges of the C kernel's variables: the overflow, zero
                  divisor and range checks that cannot fail, left out by lower_c
    exit_checks.py  a loop accumulating a NumPy float (and storing nothing) checks the sum
                  once at its exit; not finite, it runs again in Python from its start (its
                  NumPy calls' floating-point flags read there too)
    lanes.py      such a loop's one-operand float ufunc calls run over chunks of iterations:
                  its straight body run in phases, one call of NumPy's loop per call site
    vectorize.py  innermost loops whose iterations touch disjoint elements (checked by address
                  at their entry): invariant loads read once before them, the body run over
                  chunks as a SIMD pass ORing its checks and a SIMD pass storing
    rows.py       innermost loops' unchecked `A[i, k]` (i never assigned there): the row from
                  a pointer set before the loop, opaque to gcc
    lower_c.py    Nest -> C (gotos), built by backends/cfused's build and disk cache
    node.py       NestOp: the graph node's function
    capture.py    the capture hook: at an outermost loop's first instruction, try the nest
"""
