"""Exceptions raised for programs the DSL cannot turn into a correct plan."""


class DSLError(RuntimeError):
    """A DSL program is wrong (bad rank, chunk, channel, thread block or synchronization).

    A RuntimeError, so code written against the reference DSL (which raises RuntimeError) still
    catches it."""


class DSLValueError(DSLError, ValueError):
    """A wrong argument value (slice form, thread block list)."""


class SyncError(DSLError):
    """Signals and waits that do not pair up, or a program whose blocks would wait forever."""
