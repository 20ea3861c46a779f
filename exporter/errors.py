"""Errors the exporter raises for bad input.

``SourceError`` is *bad input*: the command line turns it into exit code 2 and one message on
stderr, without a traceback. Anything else escaping the exporter is a bug.
"""


class SourceError(Exception):
    """The capture source (or another input) is invalid. The message names the file, line or key."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = ""
        if path and line is not None:
            where = f"{path}:{line}: "
        elif path:
            where = f"{path}: "
        super().__init__(f"{where}{message}")


class ShardExistsError(SourceError):
    """The output folder already holds this episode; shards are immutable."""


class AssemblyError(SourceError):
    """Shards cannot be assembled into one dataset (they disagree, or one is invalid)."""
