"""The opcode handler table: `@handler("LOAD_FAST")` registers a function under an opcode name."""
HANDLERS = {}


def handler(*names):
    """Register the decorated function as the handler of each opcode in `names`."""
    def register(fn):
        for name in names:
            assert name not in HANDLERS, name
            HANDLERS[name] = fn
        return fn
    return register
