"""Why capture stopped: the reasons enum and the exception capture raises to stop."""
import enum


class Reason(enum.Enum):
    UNSUPPORTED_OPCODE = "unsupported opcode"
    UNSUPPORTED_CALL = "call to a function pijit cannot capture"
    UNSUPPORTED_VALUE = "value of a type pijit cannot capture"
    UNSUPPORTED_OP = "NumPy operation pijit cannot capture exactly"
    DATA_DEPENDENT = "value depends on array data"
    SIDE_EFFECT = "side effect"
    CONTROL_FLOW = "control flow"
    EXCEPTION_HANDLING = "exception handling"
    CLOSURE_CREATION = "creates a closure or nested function"
    LOOP = "loop"
    FRAME_INTROSPECTION = "inspects its own frame"


# Reasons that do not depend on the inputs and leave nothing to split: the whole function
# runs as plain Python. Frame introspection (locals(), sys._getframe, exec) would see the
# transformed frame instead of the user's.
STATIC_REASONS = frozenset({Reason.FRAME_INTROSPECTION})

# Reasons whose residual bytecode runs from the break to the end of the function: exception
# handlers and `with` blocks keep their exception table entries only if copied whole.
TO_END_REASONS = frozenset({Reason.EXCEPTION_HANDLING})


class GraphBreak(Exception):
    """Raised by an opcode handler when the instruction cannot be captured.

    Carries the reason, a detail message and the user's source line of the instruction.
    """

    def __init__(self, reason: Reason, detail: str, lineno=None):
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
        self.lineno = lineno
        self.filename = None
        self.position = None      # index of the instruction in the abstract instruction list
        self.callee = None        # a user function the call could not inline: jit it alone
        self.would_raise = False  # the rule found the real call raises: plain Python raises it


class CaptureAbandoned(Exception):
    """Capture gave up on a call that shows no array work after PURE_CAPTURE_COST steps and
    reads (csrc's budget lets plain runs take compile_after_ms before capture; capture of pure
    Python, which walks every unrolled iteration and inlined call, took up to 1.7 s for a
    result known in advance: nothing to fuse). The call's signature runs as plain Python."""
