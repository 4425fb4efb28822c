"""One resolver for every notebook helper: a path, a `read_log` result, a `Session`, a
`(store, session_id)` pair or a list of events becomes a `LogData` with a per-event plan."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from ..errors import AdmissionError, SurfaceLabError
from ..events import Event, mapping_at, message_of
from ..messages import message_text
from ..problems import Problem
from ..reading.codec import scan_file
from ..reading.lines import TYPE_NAMES
from ..reading.sequences import LogEvents
from ..session import Session
from ..storage.base import Store
from ..storage.read import LogReading, read_log
from ..surface import LOG_ONLY, REPLACE, FoldResult, Plan, PlanList, fold_surface
from .facts import tool_names

__all__ = ["PROGRESS_ENV", "LogData", "Source", "load_source", "shows_progress", "step_bar"]

Source = (str | os.PathLike[str] | LogReading | Session | tuple[Store, str]
          | Sequence[Mapping[str, Any]])
PROGRESS_MIN_BYTES = 20_000_000
PROGRESS_DELAY = 1.0  # seconds: a step that ends sooner shows no bar
PROGRESS_ENV = "SURFACE_LAB_PROGRESS"  # 1 forces bars off a terminal too, 0 hides them


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

    # What an audit reads: the replaces, the entries, and events found by type, none of
    # them parsing the events it does not read (a log the fast reader kept packed is
    # read from its type codes and kinds; any other log is in memory already).

    @cached_property
    def replaces(self) -> list[Plan]:
        """The plan of every replace, in log order."""
        if isinstance(self.plans, PlanList):
            return [self.plans.replaces[seq] for seq in sorted(self.plans.replaces)]
        return [p for p in self.plans if p.kind == REPLACE]

    @cached_property
    def entries(self) -> list[int]:
        """The seqs of every event that went onto the surface (appends and replaces)."""
        if isinstance(self.plans, PlanList):
            import numpy as np

            kinds = np.frombuffer(bytes(self.plans.kinds), dtype=np.uint8)
            return [int(s) for s in np.flatnonzero(kinds != LOG_ONLY)]
        return [p.seq for p in self.plans if p.kind != LOG_ONLY]

    @cached_property
    def types(self) -> Sequence[str]:
        """Each event's type."""
        if isinstance(self.events, LogEvents):
            return self.events.types
        return [str(e["type"]) for e in self.events]

    def seqs_of_type(self, *names: str) -> list[int]:
        """The seqs of the events of these types, in order."""
        if isinstance(self.events, LogEvents):
            import numpy as np

            codes = np.frombuffer(self.events.type_codes, dtype=np.uint8)
            wanted = [TYPE_NAMES.index(n) for n in names if n in TYPE_NAMES]
            return [int(s) for s in np.flatnonzero(np.isin(codes, wanted))]
        wanted_names = set(names)
        return [seq for seq, kind in enumerate(self.types) if kind in wanted_names]

    def type_of(self, seq: int) -> str:
        if isinstance(self.events, LogEvents):
            return TYPE_NAMES[self.events.type_codes[seq]]
        return str(self.events[seq]["type"])

    def read(self, seq: int) -> Mapping[str, Any]:
        """Event `seq`, parsed but not frozen where the log is kept packed."""
        if isinstance(self.events, LogEvents):
            return self.events.raw(seq)
        return self.events[seq]

    def texts(self, seqs: Iterable[int]) -> dict[int, str]:
        """`message_text` of these events, by seq (each decoded once per log, together
        with its message's source and the tools it calls: see `source_of`, `tools`; of a
        packed log's tool results, whether they failed too, in `cache["failed"]`)."""
        known: dict[int, str] = self.cache.setdefault("texts", {})
        sources: dict[int, Any] = self.cache.setdefault("sources", {})
        tools: dict[int, frozenset[str]] = self.cache.setdefault("tools", {})
        missing = sorted({s for s in seqs if s not in known})
        if missing:
            if isinstance(self.events, LogEvents):
                for seq, (text, source, called) in zip(missing, self.events.message_parts(
                        missing, keep=self.cache.get("message_lines"),
                        failed=self.cache.setdefault("failed", {})), strict=True):
                    known[seq], sources[seq], tools[seq] = text, source, called
            else:
                for seq in missing:
                    event = self.events[seq]
                    known[seq] = message_text(event)
                    tools[seq] = frozenset(tool_names([event]))
        return known

    def keep_message_lines(self) -> None:
        """From now on `texts` keeps each assistant message's line, decoded typed, in
        `cache["message_lines"]` (by seq) until the surface entries' reader takes it
        (`evidence.read_entries`): the audit reads every entry's text first and the
        assistant messages' calls after, of one decode."""
        self.cache.setdefault("message_lines", {})

    def sources(self, seqs: Iterable[int]) -> dict[int, Any]:
        """The `source` of these events' messages, by seq, where the log is kept packed
        (decoded with their texts: see `texts`); empty for a log in memory."""
        self.texts(seqs)
        sources: dict[int, Any] = self.cache["sources"]
        return sources

    def tools(self, seqs: Iterable[int]) -> dict[int, frozenset[str]]:
        """The names of the tools each of these events calls, by seq (see `texts`)."""
        self.texts(seqs)
        return cast(dict[int, frozenset[str]], self.cache["tools"])

    def source_of(self, seq: int) -> Mapping[str, Any]:
        """The `source` of event `seq`'s message ({} when it has none)."""
        if isinstance(self.events, LogEvents):
            known = self.cache.get("sources", {})
            if seq not in known:  # (asked per entry: decode only what is not known yet)
                self.texts([seq])
                known = self.cache["sources"]
            source = known.get(seq)
            return source if isinstance(source, Mapping) else {}
        return mapping_at(message_of(self.events[seq]), "source")

    def types_of(self, seqs: Iterable[int]) -> list[str]:
        """The types of these events."""
        if isinstance(self.events, LogEvents):
            codes = self.events.type_codes
            return [TYPE_NAMES[codes[s]] for s in seqs]
        return [str(self.events[s]["type"]) for s in seqs]


def shows_progress(progress: bool) -> bool:
    """Whether a progress bar is shown, decided the same way for the Python API and the
    commands: never with `progress=False`; with `progress=True` only where a person
    watches, that is when stderr is a terminal or in a Jupyter kernel (tqdm draws its
    widget there), not in a pipe, a log file or CI. The environment variable
    `SURFACE_LAB_PROGRESS=1` forces bars anywhere, `=0` hides them everywhere."""
    if not progress:
        return False
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in ("1", "true", "yes", "always"):
        return True
    if forced in ("0", "false", "no", "never"):
        return False
    import sys

    stderr = sys.stderr
    try:
        terminal = stderr is not None and stderr.isatty()
    except (AttributeError, ValueError, OSError):  # a replaced or closed stream
        terminal = False
    return terminal or _in_jupyter_kernel(sys.modules.get("IPython"))


def _in_jupyter_kernel(ipython: Any) -> bool:
    """Running in a Jupyter kernel (tqdm.autonotebook's test), without importing IPython."""
    try:
        shell = ipython.get_ipython() if ipython is not None else None
        return shell is not None and "IPKernelApp" in shell.config
    except Exception:  # an IPython of another shape: no kernel we know
        return False


class _NoBar:
    """What `step_bar` gives when progress is off."""

    def update(self, n: int = 1) -> None:
        pass


@contextmanager
def step_bar(desc: str, total: int, progress: bool, unit: str = " replaces"
             ) -> Iterator[Any]:
    """One progress bar for one step of an analysis (tqdm, a widget in a notebook), shown
    only once the step has taken a second, and gone when it ends; only where
    `shows_progress(progress)` says a person watches."""
    if total <= 0 or not shows_progress(progress):
        yield _NoBar()
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit=unit, delay=PROGRESS_DELAY, leave=False) as bar:
        yield bar


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
            bar = tqdm(total=total, unit=" lines", desc=f"reading {path.name}",
                       delay=PROGRESS_DELAY, leave=False)
        if bar.disable:  # closed: the read is done
            return
        bar.update(done - bar.n)
        if done >= total:
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
            source = read_log(path, progress=_progress_bar(path) if shows_progress(progress)
                              else None)
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
