"""One resolver for every notebook helper: a path, a `read_log` result, a `Session`, a
`(store, session_id)` pair or a list of events becomes a `LogData` with a per-event plan."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import AdmissionError, SurfaceLabError
from ..events import Event
from ..problems import Problem
from ..reading.codec import scan_file
from ..reading.read import LogReading, read_log
from ..session import Session
from ..storage.base import Store
from ..surface import FoldResult, Plan, PlanList, fold_surface

__all__ = ["LogData", "Source", "load_source"]

Source = (str | os.PathLike[str] | LogReading | Session | tuple[Store, str]
          | Sequence[Mapping[str, Any]])
PROGRESS_MIN_BYTES = 20_000_000


@dataclass
class LogData:
    """A log resolved for analysis: events, the plan each one committed, and problems.
    With `strict=False` a damaged log keeps the longest prefix that folds."""

    session_id: str
    events: Sequence[Event]
    plans: Sequence[Plan] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    path: str | None = None
    lines: Sequence[int] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict, repr=False)
    # The reader's fold, when it made one (saves refolding a large log).
    known_fold: FoldResult | None = field(default=None, repr=False)

    @cached_property
    def fold(self) -> FoldResult:
        if self.known_fold is not None:
            return self.known_fold
        plans = self.plans if isinstance(self.plans, PlanList) else PlanList.of(self.plans)
        return plans.fold()

    @cached_property
    def shadowed_by(self) -> dict[int, int]:
        """Each shadowed seq -> the seq of the replace that shadowed it."""
        return {s: r.seq for r in self.fold.replacements for s in r.shadowed_seqs}


def _progress_bar(path: Path) -> Callable[[int, int], None] | None:
    try:
        if path.stat().st_size < PROGRESS_MIN_BYTES:
            return None
    except OSError:
        return None
    from tqdm.auto import tqdm

    bar: Any = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit=" lines", desc=path.name, leave=False)
        bar.update(done - bar.n)
        if total - done < 50_000:
            bar.close()

    return update


def _plans(events: Sequence[Mapping[str, Any]], problems: list[Problem], strict: bool,
           path: str | None) -> tuple[list[Event], PlanList, FoldResult | None]:
    """The events that fold (all, or with `strict=False` those before the first broken
    rule), their plans, and their fold when all of them fold (`fold_surface`, the one
    fold)."""
    plans = PlanList(bytearray(), {})
    # frames need a type to show: the first event without a string one ends the log
    untyped = next((seq for seq, e in enumerate(events)
                    if not isinstance(e, Mapping) or not isinstance(e.get("type"), str)), None)
    try:
        fold = fold_surface(events if untyped is None else events[:untyped], plans=plans)
        if untyped is not None:
            kind = events[untyped].get("type") if isinstance(events[untyped], Mapping) else None
            raise AdmissionError(f"seq {untyped}: type must be a string, got {kind!r}",
                                 code="envelope-invalid", seq=untyped)
    except AdmissionError as err:
        if strict:
            raise
        problems.append(Problem.from_error(err, path=path))
        return list(events[: len(plans)]), plans, None
    return list(events), plans, fold


def load_source(source: Any, *, strict: bool = True, progress: bool = True) -> LogData:
    """Resolve any supported source.

    Args:
        source: a path, a `LogReading`, a `Session`, a `(Store, session_id)` pair or a list
            of events (seqs from 0).
        strict: raise on a damaged log; otherwise keep what folds and report problems.
        progress: show a progress bar while reading a large file.

    Raises:
        SurfaceLabError: with `strict`, for anything unreadable or invalid.
        TypeError: for an unsupported source.
    """
    if isinstance(source, LogData):
        return source
    problems: list[Problem] = []
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            source = read_log(path, progress=_progress_bar(path) if progress else None)
        except SurfaceLabError as err:
            if strict:
                raise
            problems.append(Problem.from_error(err, path=str(path)))
            try:
                scan = scan_file(path)
            except (SurfaceLabError, OSError):
                return LogData(path.name, [], problems=problems, path=str(path))
            # Keep what comes before the event the reader refused.
            good = scan.events if err.seq is None else scan.events[: err.seq]
            events, plans, fold = _plans(good, problems, False, str(path))
            header_id = scan.header.get("id") if isinstance(scan.header, dict) else None
            return LogData(str(header_id or path.name), events, plans, problems, str(path),
                           scan.lines, known_fold=fold)
    if isinstance(source, LogReading):
        problems += [p for p in source.problems if p.severity == "error"]
        if source.plans is not None:  # every reader plans every event
            return LogData(source.session_id, source.events, source.plans, problems,
                           source.path, source.lines, known_fold=source.fold)
        events, plans, fold = _plans(source.events, problems, strict, source.path)
        return LogData(source.session_id, events, plans, problems, source.path, source.lines,
                       known_fold=fold)
    if isinstance(source, Session):  # its surface planned every event as it committed
        events = list(source.events)
        surface = source.surface
        return LogData(source.id, events, surface.plans.prefix(len(events)), problems,
                       known_fold=FoldResult(list(surface.nodes), list(surface.replacements)))
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], Store):
        store, session_id = source
        events, plans, fold = _plans(store.read_suffix(session_id, 0), problems, strict,
                                     store.path)
        return LogData(session_id, events, plans, problems, store.path, known_fold=fold)
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        events, plans, fold = _plans(list(source), problems, strict, None)
        return LogData("events", events, plans, problems, known_fold=fold)
    raise TypeError(f"cannot read a log from {type(source).__name__}; give a path, a "
                    f"read_log result, a Session, a (store, session_id) pair or a list of "
                    f"events")
