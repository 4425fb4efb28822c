"""The store interface, shared by the JSONL and SQLite backends. Backends store records
and return them as a `Scan`; the load pipeline (`reading.pipeline`) validates them, and
`Store.load` / `Store.resume` write its repair durably."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import AdmissionError, StorageError
from ..events import Event, check_envelope, freeze_event
from ..jsonvalue import as_int
from ..problems import Problem
from ..reading.pipeline import CheckedLog, check_log
from ..reading.scan import Scan
from ..session import Session

__all__ = ["Problem", "Scan", "Store"]


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
        loaded = self._load_for_resume(session_id)
        return loaded.header, loaded.events

    def resume(self, session_id: str) -> Session:
        """A Session over a stored (or created) session that writes every append here
        before committing it. The end-seed marker is the first batch written."""
        created = getattr(self, "_created", {}).get(session_id)
        sink = self._sink_for(session_id)
        if created is not None:
            return Session(session_id, header=created, sink=sink)
        checked = self._load_for_resume(session_id)
        return Session(session_id, seed=checked.events, header=checked.header, sink=sink)

    def _load_for_resume(self, session_id: str) -> CheckedLog:
        """Check a stored session for resuming; write its repair durably, then reload."""
        scan = self.scan(session_id)
        checked = check_log(scan, resume=True)
        if scan.needs_truncation or checked.closers:
            self._repair(session_id, scan, checked.closers)
            scan = self.scan(session_id)
            checked = check_log(scan, resume=True)
        return checked

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
