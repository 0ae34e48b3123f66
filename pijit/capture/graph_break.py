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
