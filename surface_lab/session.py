"""Session (SPEC 5): seed, append, read-only views, subscriptions and derived messages."""

from __future__ import annotations

import logging
import time as _time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from .errors import AdmissionError, SurfaceLabError
from .events import SURFACE_TYPES, Event, freeze_event
from .header import check_header
from .jsonvalue import FrozenDict
from .messages import DerivedMessages, project_message
from .surface import IncrementalSurface

if TYPE_CHECKING:
    from typing_extensions import deprecated
else:

    def deprecated(message: str) -> Callable[[Any], Any]:
        return lambda func: func


__all__ = ["EventsView", "Observer", "Session", "SurfaceOp", "SurfaceType"]

logger = logging.getLogger("surface_lab")

SurfaceType = Literal["user/message", "context/message", "assistant/message", "tool/result"]
SurfaceOp = Literal["append"] | Mapping[str, Any]
Observer = Callable[[Event], object]


def _now_ms() -> int:
    return _time.time_ns() // 1_000_000


class EventsView(Sequence[Event]):
    """The session's log, read-only and live (it grows as the session appends)."""

    __slots__ = ("_log",)

    def __init__(self, log: list[Event]) -> None:
        self._log = log

    def __len__(self) -> int:
        return len(self._log)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        return self._log[index]

    def __iter__(self) -> Iterator[Event]:
        return iter(self._log)

    def __repr__(self) -> str:
        return f"EventsView({len(self._log)} events)"


class Session:
    """One session: an append-only log of read-only events and its incremental surface.

    Args:
        id: the session id.
        seed: an existing log to start from (checked in full; all or nothing). Unless it
            ends with `session/end-seed`, that marker is appended after it.
        header: the session header; by default `{version: 0, id, createdAt: now}`.
        clock: returns the time in epoch ms for appended events (default: the wall clock).
        sink: called with each checked event before it is committed (the end-seed marker
            and every later append, not the seed); if it raises, nothing is committed.
            Stores use it to write ahead.

    Raises:
        AdmissionError: for a bad header or seed; a seed failure keeps the inner code and
            says "invalid seed event at index i: ...".
    """

    def __init__(
        self,
        id: str,
        seed: Iterable[Mapping[str, Any]] | None = None,
        header: Mapping[str, Any] | None = None,
        *,
        clock: Callable[[], int] | None = None,
        sink: Callable[[Event], None] | None = None,
    ) -> None:
        if not isinstance(id, str) or not id:
            raise AdmissionError(f"a session id must be a non-empty string, got {id!r}",
                                 code="header-invalid")
        self._clock = clock or _now_ms
        if header is None:
            header = {"version": 0, "id": id, "createdAt": self._clock()}
        checked = check_header(header)
        if checked["id"] != id:
            raise AdmissionError(
                f"header field id is {checked['id']!r}; expected the session id {id!r}",
                code="header-invalid",
            )
        self._id = id
        self._header = checked
        self._log: list[Event] = []
        self._surface = IncrementalSurface(self._log)
        self._observers: list[Observer] = []
        self._notifying = False
        self._projected: dict[int, Any] = {}
        self._messages = DerivedMessages(())
        self._messages_key = (0, 0)  # (replace generation, node count) they were built at
        self._first_live_seq = 0
        self._sink: Callable[[Event], None] | None = None
        if seed is not None:
            self._seed(seed)
        self._sink = sink
        if seed is not None:
            self._end_seed()

    def _seed(self, seed: Iterable[Mapping[str, Any]]) -> None:
        for index, raw in enumerate(seed):
            try:
                self._admit(raw)
            except AdmissionError as err:
                raise AdmissionError(
                    f"invalid seed event at index {index}: {err}",
                    code=err.code, seq=err.seq, event_type=err.event_type, detail=err.detail,
                ) from err
        self._first_live_seq = len(self._log)

    def _end_seed(self) -> None:
        if not self._log or self._log[-1]["type"] != "session/end-seed":
            self._admit({"type": "session/end-seed", "seq": len(self._log),
                         "time": self._clock(), "data": {}})

    def _admit(self, raw: Mapping[str, Any]) -> Event:
        """Check one event against every rule and commit it; nothing changes on failure."""
        event = freeze_event(raw)
        plan = self._surface.check(event)
        if self._sink is not None:
            self._sink(event)
        self._log.append(event)
        self._surface._commit(plan)
        return event

    # -- read-only state ---------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def header(self) -> FrozenDict:
        """The checked header (read-only)."""
        return self._header

    @property
    def events(self) -> EventsView:
        """The log: a read-only sequence of read-only events with on-disk keys."""
        return EventsView(self._log)

    @property
    def seq(self) -> int:
        """The seq the next appended event will get (the number of events)."""
        return len(self._log)

    @property
    def first_live_seq(self) -> int:
        """The first seq appended live: the seed's length (0 without a seed)."""
        return self._first_live_seq

    @property
    def surface(self) -> IncrementalSurface:
        """The incremental surface (`nodes`, `replace_generation`), one object for the
        session's whole life."""
        return self._surface

    # -- writing -----------------------------------------------------------------------

    @overload
    def append(
        self,
        type: SurfaceType,
        data: Any,
        *,
        surface_op: SurfaceOp,
        source_event_seqs: Sequence[int] | None = None,
    ) -> Event: ...
    @overload
    @deprecated("surface types (user/context/assistant message, tool/result) need surface_op")
    def append(
        self,
        type: SurfaceType,
        data: Any,
        *,
        surface_op: None = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> Event: ...
    @overload
    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> Event: ...
    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | None = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> Event:
        """Append one event: copy `data`, stamp seq and time, check every rule, commit, then
        notify subscribers.

        Args:
            type: the event type.
            data: any JSON value (copied; later changes by the caller do not reach the log).
            surface_op: `"append"` or `{"op": "replace", "start": S, "end": E}`; required
                for surface types, forbidden for the others.
            source_event_seqs: earlier seqs this event was made from.

        Returns:
            The committed, read-only event.

        Raises:
            AdmissionError: when a rule is broken; the log and surface are unchanged.
        """
        if self._notifying:
            raise SurfaceLabError("append from inside a subscriber notification is not "
                                  "allowed; schedule the append after the callback returns")
        raw: dict[str, Any] = {"type": type, "seq": len(self._log), "time": self._clock(),
                               "data": data}
        if source_event_seqs is not None:
            raw["sourceEventSeqs"] = (
                list(source_event_seqs) if isinstance(source_event_seqs, (tuple, range))
                else source_event_seqs
            )
        if surface_op is not None:
            raw["surfaceOp"] = surface_op
        event = self._admit(raw)
        self._notify(event)
        return event

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` after each committed append. A failing observer is logged
        and never un-commits. Returns a function that unsubscribes."""
        self._observers.append(observer)

        def unsubscribe() -> None:
            if observer in self._observers:
                self._observers.remove(observer)

        return unsubscribe

    def _notify(self, event: Event) -> None:
        self._notifying = True
        try:
            for observer in list(self._observers):
                try:
                    observer(event)
                except Exception:
                    logger.exception("session %s: subscriber %r failed on seq %s",
                                     self._id, observer, event["seq"])
        finally:
            self._notifying = False

    # -- derivation --------------------------------------------------------------------

    def derive_messages(self) -> DerivedMessages:
        """The messages the model sees now, projected from `surface.nodes`.

        Cached per node; extended in place while only appends happen, rebuilt when the
        replace generation changes. The messages are the events' own read-only objects.
        """
        nodes = self._surface.nodes
        generation = self._surface.replace_generation
        built_generation, built_count = self._messages_key
        if (generation, len(nodes)) == self._messages_key:
            return self._messages
        if generation == built_generation:
            new = nodes[built_count:]
            previous: Iterable[Any] = self._messages
        else:
            new, previous = list(nodes), ()
        picked = [self._project(seq) for seq in new]
        self._messages = DerivedMessages(
            [*previous, *(m for m in picked if m is not None)], "surface"
        )
        self._messages_key = (generation, len(nodes))
        return self._messages

    def _project(self, seq: int) -> Any:
        if seq not in self._projected:
            event = self._log[seq]
            self._projected[seq] = (
                project_message(event) if event["type"] in SURFACE_TYPES else None
            )
        return self._projected[seq]

    def __repr__(self) -> str:
        return (f"Session({self._id!r}, events={len(self._log)}, "
                f"nodes={len(self._surface.nodes)}, "
                f"replace_generation={self._surface.replace_generation})")
