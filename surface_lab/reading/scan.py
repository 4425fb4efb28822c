"""`Scan`: what a backend read of one session, before the load pipeline checks it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..events import Event
from ..problems import Problem

__all__ = ["Scan"]


@dataclass
class Scan:
    """What a backend read: the raw header, the logical events of the good prefix (packed
    rows expanded, fixture seqs assigned), their physical lines, and scan findings."""

    path: str
    header: Any
    events: list[Event] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    form: Literal["stored", "fixture"] = "stored"
    problems: list[Problem] = field(default_factory=list)
    # Where repair truncates to (JSONL: the end of the last good line), when it must.
    truncate_at: int | None = None

    def line_of(self, seq: int | None) -> int | None:
        if seq is not None and 0 <= seq < len(self.lines):
            return self.lines[seq]
        return None

    @property
    def needs_truncation(self) -> bool:
        return self.truncate_at is not None
