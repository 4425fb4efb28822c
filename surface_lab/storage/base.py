"""The store interface, shared by the JSONL and SQLite backends, and the records a scan of
stored data produces. Backends store and return records; `load.py` validates and repairs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import AdmissionError, StorageError, SurfaceLabError
from ..events import Event, check_envelope, freeze_event
from ..jsonvalue import as_int
from ..session import Session

__all__ = ["Problem", "Scan", "Store"]

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


class Store(ABC):
    """A place that keeps many sessions' logs.

    The contract every backend passes (tests/store_contract.py):

    * `create(header)` registers a new session; nothing is stored until its first append.
    * `append(session_id, events)` stores a batch atomically: it must start at the stored
      next seq and have no gaps, else `StorageError("seq-conflict")` and nothing is
      written; of two racing writers one wins and the other gets the conflict error.
      Non-JSON data is refused (`data-not-json`, naming the event type).
    * `load(session_id)` returns the header and the stored events plus the closers of an
      open turn, after writing any repair durably (SPEC 7.3).
    * `read_suffix(session_id, seq)` returns the stored events from `seq` on.
    * `list()` names the sessions that have at least one stored event.
    * `close()` releases the store; it is also a context manager.
    """

    path: str

    @abstractmethod
    def create(self, header: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def append(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> None: ...

    @abstractmethod
    def scan(self, session_id: str) -> Scan:
        """The stored records of one session as they are, without validation."""

    @abstractmethod
    def read_suffix(self, session_id: str, seq: int) -> list[Event]: ...

    @abstractmethod
    def list(self) -> list[str]: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _repair(self, session_id: str, scan: Scan, closers: Sequence[Event]) -> None:
        """Durably drop a crash tail or torn fragment and append the closers."""

    def load(self, session_id: str) -> tuple[Mapping[str, Any], Sequence[Event]]:
        """The header and the events (closers included) of a stored session, repairing it
        durably first when a crash left a torn tail, a crash tail or an open turn.

        Raises:
            CorruptLogError, UnsupportedFormatError, StorageError.
        """
        from .load import load_for_resume

        loaded = load_for_resume(self, session_id)
        return loaded.header, loaded.events

    def resume(self, session_id: str) -> Session:
        """A Session over a stored (or created) session that writes every append here
        before committing it. The end-seed marker is the first batch written."""
        from .load import resume_session

        return resume_session(self, session_id)

    def _sink_for(self, session_id: str) -> Any:
        def sink(event: Event) -> None:
            self.append(session_id, [event])

        return sink

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def conflict(path: str, session_id: str, expected: int, got: Any) -> StorageError:
    return StorageError(
        f"session {session_id!r}: the batch starts at seq {got!r} but the stored next seq is "
        f"{expected}; another writer appended first (reload and retry)",
        code="seq-conflict", path=path, seq=got if isinstance(got, int) else None,
    )


def checked_batch(events: Sequence[Mapping[str, Any]]) -> list[Event]:
    """Freeze a batch and check each envelope (refusing non-JSON data and row-tag types)
    and that its seqs have no gaps."""
    batch: list[Event] = [freeze_event(e) for e in events]
    for i, event in enumerate(batch):
        check_envelope(event)
        seq = as_int(event.get("seq"))
        if seq is None or (i and seq != batch[i - 1]["seq"] + 1):
            raise AdmissionError(f"batch has a gap: event {i} has seq {event.get('seq')!r}, "
                                 f"expected {batch[i - 1]['seq'] + 1 if i else 'an integer'}",
                                 code="seq-not-contiguous", seq=seq)
    return batch
