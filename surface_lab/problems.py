"""`Problem`: one finding about a log, as every reader, command and frame reports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import SurfaceLabError

__all__ = ["Problem", "Severity"]

Severity = Literal["note", "error"]


@dataclass(frozen=True)
class Problem:
    """One finding about a log: an `error` makes it invalid, a `note` does not."""

    severity: Severity
    code: str
    message: str
    path: str | None = None
    line: int | None = None
    seq: int | None = None
    event_type: str | None = None

    @classmethod
    def from_error(cls, err: SurfaceLabError, *, path: str | None = None) -> Problem:
        where = err.path or path
        message = err.message
        if where and message.startswith(f"{where}: "):  # the location says it already
            message = message[len(where) + 2 :]
        return cls("error", err.code or "error", message, where, err.line, err.seq,
                   err.event_type)

    def __str__(self) -> str:
        """`PATH:LINE: seq N TYPE: CODE: message` (SPEC 13), notes prefixed `note:`."""
        where = SurfaceLabError("", path=self.path, line=self.line, seq=self.seq,
                                event_type=self.event_type).location()
        text = f"{self.code}: {self.message}"
        if self.severity == "note":
            text = f"note: {text}"
        return f"{where}: {text}" if where else text
