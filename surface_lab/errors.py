"""The package's exception hierarchy: every error a caller may branch on carries a `code`."""

from __future__ import annotations

from typing import Any

__all__ = [
    "AdmissionError",
    "CorruptLogError",
    "StorageError",
    "SurfaceLabError",
    "UnsupportedFormatError",
]


class SurfaceLabError(Exception):
    """Base of every error raised by surface_lab.

    Attributes:
        code: a stable code from SPEC section 14 (None for errors without one).
        path: the file or database the error is about, when known.
        line: the 1-based physical line (header = 1), when known.
        seq: the seq of the event concerned, when known.
        event_type: the type of the event concerned, when known.
        detail: the message without its location prefix.
        argument: the keyword argument of the call that settles the error, as the message
            names it (e.g. "session_id"), so a front end can name its own option instead.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        path: str | None = None,
        line: int | None = None,
        seq: int | None = None,
        event_type: str | None = None,
        detail: str | None = None,
        argument: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail if detail is not None else message
        self.code = code
        self.path = path
        self.line = line
        self.seq = seq
        self.event_type = event_type
        self.argument = argument

    def __str__(self) -> str:
        return self.message

    def location(self) -> str:
        """`path:line: seq N TYPE` with the unknown parts left out (SPEC 13)."""
        head = ":".join(str(p) for p in (self.path, self.line) if p is not None)
        tail = " ".join(
            part
            for part in (
                f"seq {self.seq}" if self.seq is not None else None,
                self.event_type,
            )
            if part
        )
        return ": ".join(p for p in (head, tail) if p)


class AdmissionError(SurfaceLabError, ValueError):
    """An event, seed or header broke a rule of SPEC sections 1, 2, 4 or 5."""


class CorruptLogError(SurfaceLabError):
    """Committed data on disk is damaged or breaks a rule (`log-corrupt` and scan codes).
    `str(err)` opens with where (`path:line: seq N TYPE: `), so an error caught in a loop
    over many files still names its file."""

    def __str__(self) -> str:
        where = self.location()
        if not where or self.message.startswith(f"{where}:") or (
                self.path is not None and self.message.startswith(f"{self.path}")):
            return self.message
        return f"{where}: {self.message}"


class UnsupportedFormatError(SurfaceLabError):
    """A valid log this version cannot use: another format version, an unknown type,
    a retired shape or a foreign SQLite schema."""


class StorageError(SurfaceLabError):
    """A store refused or failed a write (`seq-conflict`, `fixture-read-only`, I/O).

    Every storage error has a code a caller can branch on: `storage-failed` (an I/O error
    or a refusal without a more precise code) when the raiser names none."""

    def __init__(self, message: str, *, code: str | None = None, **where: Any) -> None:
        super().__init__(message, code=code or "storage-failed", **where)
