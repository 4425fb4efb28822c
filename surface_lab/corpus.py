"""Corpus scale: many sessions to a date-partitioned Parquet dataset, queried with DuckDB on
one machine and with Dask beyond it (see ../shared/notes/CORPUS.md).

The build is one engine-neutral function, `write_chunk(task, out)`: it reads a chunk of
whole sessions of one UTC date with surface_lab's own code and writes every table with
pyarrow under deterministic names, so a retried or re-run task overwrites instead of
duplicating. The manifest, written last by the driver, is the commit point: readers go
through it. pyarrow, duckdb and dask are imported only here, and only when used.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import MISSING, asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import SurfaceLabError
from .reading.codec import read_log_bytes
from .reading.paths import (
    LOG_NAMES,
    LOG_SUFFIXES,
    discover,
    is_sqlite,
    log_format,
    refusal,
)
from .storage.sqlite import ReadOnlyConnection

__all__ = ["SCHEMA_VERSION", "Corpus", "Task", "events", "map_sessions", "open_corpus",
           "plan_tasks", "to_parquet", "write_chunk"]

SCHEMA_VERSION = 4  # 2: session_key and source in every table; 3: lost_evidence;
# 4: requests (tokens and dollars), the build's fingerprints in the manifest
TABLES = ("sessions", "events", "replaces", "replace_members", "mentions", "lost_evidence",
          "requests")
MANIFEST = "manifest.json"
LOCK = ".build.lock"  # held by the build writing the folder (see _build_lock)


@dataclass(frozen=True)
class SessionRef:
    """One session to read: a file (and a session id inside a database or store)."""

    path: str
    session_id: str | None
    date: str
    size: int
    # the session id the planner could see (a JSONL header's, a database row's): copies
    # of one id are planned into one task, where the build keeps one of them
    id: str | None = None
    # what tells a rebuild the source changed: its size in bytes and modification time
    # (for a folder: the total and the latest of its files)
    stamp: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Task:
    """Whole sessions of one UTC date, written as `part-<date>-<index>` of every table."""

    date: str
    index: int
    sessions: tuple[SessionRef, ...]

    @property
    def name(self) -> str:
        return f"part-{self.date}-{self.index:04d}"

    @property
    def fingerprint(self) -> str:
        """What the task reads (each source's path, session, size and modification time),
        the corpus schema and the code and price versions, hashed: a task of the same
        fingerprint writes the same rows, so a rebuild reuses its files, and its files'
        names carry it, so a new build never overwrites a file the previous manifest
        names."""
        import hashlib

        text = json.dumps([SCHEMA_VERSION, _code_versions(), self.date, [
            [r.path, r.session_id, list(r.stamp)] for r in self.sessions]])
        return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:16]

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.fingerprint}.parquet"


@functools.cache
def _code_versions() -> list[str]:
    """What else decides a task's rows: this package's version and the price table's (a
    new release, or new prices, rebuilds every task)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("surface-lab", "genai-prices"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} none")
    return found


# -- planning ----------------------------------------------------------------------------


def _expand(sources: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files and folders to plan (`reading.paths`): a name or a glob's match is taken
    as it is (reading it reports what is wrong), a folder is walked for every agent's logs
    (a Claude Code session's subagent files go with it; a store gives its session files)."""
    found: list[Path] = []
    for source in sources:
        text = str(source)
        if any(ch in text for ch in "*?[") and not os.path.lexists(text):
            matched = [Path(p) for p in sorted(glob.glob(text, recursive=True))]
        else:
            matched = [Path(text)]
        for path in matched:
            found += _below(path)
    # one entry per real file; a dangling symlink keeps its own name, which its problem
    # row then shows (its target's name would mean nothing to whoever wrote the glob)
    return list(dict.fromkeys(p.resolve() if p.exists() else p.absolute() for p in found))


def check_sources(sources: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Refuse, before anything is written, a source that does not exist (a glob that
    matches nothing) or holds no log: a build of the wrong folder must not replace an
    earlier dataset with an empty or partial one.

    Returns:
        The files and folders the sources give (`_expand`'s), so the walk is done once.

    Raises:
        SurfaceLabError: `source-missing` or `source-empty`, naming the source.
    """
    found: list[Path] = []
    for source in sources:
        text = str(source)
        is_glob = any(ch in text for ch in "*?[") and not os.path.lexists(text)
        if not is_glob and not os.path.lexists(text):
            raise SurfaceLabError(f"{text}: no such file or folder; nothing written",
                                  code="source-missing", path=text)
        paths = _expand([source])
        if not paths:
            what = "matches no file" if is_glob else "holds no session log"
            raise SurfaceLabError(f"{text}: {what} (looked for {', '.join(LOG_SUFFIXES)} "
                                  f"files, SQLite databases and other agents' logs); "
                                  f"nothing written", code="source-empty", path=text)
        found += paths
    return list(dict.fromkeys(found))

def _below(path: Path) -> list[Path]:
    """The sources `path` gives: itself (a file, or a folder that is one source: a
    session folder, an OpenHands conversation), or those `discover`ed below a folder (a
    store gives its session files). A FIFO or a device is never opened here: reading
    refuses it, and its row says why."""
    if not path.is_dir() or refusal(path) is not None or log_format(path) not in (
            None, "store"):
        return [path]
    try:
        logs = discover(path)
    except SurfaceLabError:
        return [path]  # its row then says why
    found: list[Path] = []
    for item in logs:
        if item.format == "store":
            # glob.glob, not Path.glob: a dangling link named as a session file is kept
            # (Path.glob drops it), and its row says why
            found += sorted(Path(p) for name in LOG_NAMES
                            for p in glob.glob(os.path.join(glob.escape(str(item.path)), "*",
                                                            "*", name)))
        else:
            found.append(item.path)
    return found


def _date(millis: Any) -> str:
    value = millis if isinstance(millis, int) and not isinstance(millis, bool) else 0
    return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d")


def _refs(path: Path) -> list[SessionRef]:
    """The sessions a file holds, with their dates (read cheaply, never written). Never
    raises for a bad source: what cannot be planned is one session whose reading reports
    the problem."""
    if path.is_file() and is_sqlite(path):
        return _database_refs(path)
    try:
        size = (sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            if path.is_dir() else path.stat().st_size)
    except OSError:  # a dangling symlink, a file gone since the glob: reading says which
        size = 0
    created: Any = 0
    session_id: Any = None
    try:
        if path.is_file() and not path.name.endswith(".json"):
            with open(path, "rb") as f:
                first = f.readline(1 << 20)
            if path.name.endswith(".zstd"):
                data, _ = read_log_bytes(path)
                first = data.split(b"\n", 1)[0]
            header = json.loads(first)
            if isinstance(header, dict):
                created, session_id = header.get("createdAt"), header.get("id")
                if created is None and isinstance(header.get("timestamp"), str):
                    from .importers.common import parse_time

                    created = parse_time(header["timestamp"])
    except (OSError, ValueError, RecursionError, SurfaceLabError):
        created = 0
    if not created and path.is_file() and path.suffix == ".jsonl":
        from .importers.common import first_record_time  # another agent's log: its own time

        created = first_record_time(path) or 0
    return [SessionRef(str(path), None, _date(created), size,
                       session_id if isinstance(session_id, str) else None)]


def _database_refs(path: Path) -> list[SessionRef]:
    """Every session of a surface_lab database; a database the store refuses (another
    schema: a view in place of a table, say) is one session that fails to read."""
    from .storage.sqlite import SqliteStore

    unreadable = [SessionRef(str(path), None, _date(0), path.stat().st_size)]
    try:
        with SqliteStore(path, read_only=True):  # checks the schema before any query
            pass
        db = ReadOnlyConnection(path)
        try:
            rows = db.look(lambda c: c.execute(
                "SELECT s.id, s.created_at, coalesce(sum(length(e.data)), 0) FROM sessions s "
                "LEFT JOIN events e ON e.session_id = s.id GROUP BY s.id ORDER BY s.id"
            ).fetchall())
        finally:
            db.close()
    except (SurfaceLabError, sqlite3.Error):
        return unreadable
    return [SessionRef(str(path), sid, _date(created), int(size), sid) for sid, created, size
            in rows]


def _stamp(path: Path) -> tuple[int, int]:
    """(size, modification time in ns) of a file, or the total size and latest time of a
    folder's files; (0, 0) for what cannot be seen (reading then says why)."""
    try:
        if path.is_dir():
            stats = [p.stat() for p in path.rglob("*") if p.is_file()]
            return (sum(st.st_size for st in stats), max((st.st_mtime_ns for st in stats),
                                                         default=0))
        st = path.stat()
        return st.st_size, st.st_mtime_ns
    except OSError:
        return 0, 0


# Without a task size, tasks are sized from the corpus: the power of two of MB that gives
# at least TASKS_WANTED tasks, between TASK_MB_MIN and TASK_MB_MAX. Several tasks a worker
# is what lets a cluster balance them (one 64 MB task a date left two workers one or two
# tasks of a small corpus); a power of two moves only when the corpus doubles, and the
# cuts of one size are a subset of the next smaller size's (see plan_tasks).
TASKS_WANTED = 64
TASK_MB_MIN = 1.0
TASK_MB_MAX = 64.0


def auto_task_mb(total_bytes: int) -> float:
    """The task size for a corpus of `total_bytes` (what `task_mb=None` plans with)."""
    import math

    per_task = total_bytes / TASKS_WANTED / (1024 * 1024)
    if per_task <= TASK_MB_MIN:
        return TASK_MB_MIN
    return min(TASK_MB_MAX, float(2 ** math.floor(math.log2(per_task))))


def plan_tasks(sources: Iterable[str | os.PathLike[str]], *, task_mb: float | None = None,
               known: dict[str, list[SessionRef]] | None = None,
               expanded: list[Path] | None = None) -> list[Task]:
    """Group the sessions of `sources` into tasks of one date and about `task_mb` each
    (None: `auto_task_mb` of the corpus size), in a deterministic order. `known` (a
    previous build's sessions by source) spares opening a source whose size and
    modification time are unchanged."""
    import dataclasses

    refs: list[SessionRef] = []
    for path in _expand(sources) if expanded is None else expanded:
        stamp = _stamp(path)
        before = (known or {}).get(str(path))
        if before and stamp != (0, 0) and all(r.stamp == stamp for r in before):
            refs += before
        else:
            refs += [dataclasses.replace(r, stamp=stamp) for r in _refs(path)]
    refs.sort(key=lambda r: (r.date, r.id or "", r.path, r.session_id or ""))
    tasks: list[Task] = []
    if task_mb is None:
        task_mb = auto_task_mb(sum(r.size for r in refs))
    elif not task_mb > 0:  # also NaN
        raise SurfaceLabError(f"task_mb must be a positive size in MB, not {task_mb!r}",
                              code="usage")
    limit = task_mb * 1024 * 1024
    # Content-defined cuts (as rsync and backup tools chunk files): a task ends after a
    # session with a chance of its size over `limit`, decided by a hash of its file's name
    # and session id (so tasks hold about `limit` on average, and the cuts do not move
    # with the folder the sources sit in), or before passing twice `limit`. A session
    # added, grown or gone then changes its own task (and at most the next), not every
    # later task of its date, so a rebuild reuses the rest. A smaller `limit` only raises
    # the threshold, so it keeps every cut of a larger one and adds more (but for the
    # twice-`limit` rule).
    current: list[SessionRef] = []
    size = 0
    for ref in refs:
        copy = bool(current) and ref.id is not None and (ref.id, ref.date) == (
            current[-1].id, current[-1].date)
        cut = bool(current) and (
            _hash(_cut_key(current[-1])) % (1 << 32) < current[-1].size / limit * (1 << 32)
            or size + ref.size > 2 * limit)
        if current and (ref.date != current[0].date or cut) and not copy:
            tasks.append(Task(current[0].date, _next_index(tasks, current[0].date),
                              tuple(current)))
            current, size = [], 0
        current.append(ref)
        size += ref.size
    if current:
        tasks.append(Task(current[0].date, _next_index(tasks, current[0].date),
                          tuple(current)))
    return tasks


def _cut_key(ref: SessionRef) -> str:
    return f"{Path(ref.path).name}#{ref.session_id}"


def _hash(text: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "backslashreplace"),
                                          digest_size=8).digest(), "big")


def _next_index(tasks: list[Task], date: str) -> int:
    return sum(1 for t in tasks if t.date == date)


# -- one task ----------------------------------------------------------------------------


@functools.cache
def _schemas() -> dict[str, Any]:
    """Every table's Arrow schema (made once a process: read it, never change it)."""
    import pyarrow as pa

    text, integer, flag = pa.string(), pa.int64(), pa.bool_()
    return {
        "sessions": pa.schema([
            ("session_id", text), ("session_key", text), ("source", text), ("format", text),
            ("created_at", integer),
            ("events", integer), ("surface_entries", integer), ("replaces", integer),
            ("problems", integer), ("problem_code", text), ("problem", text),
            ("problem_line", integer)]),
        "events": pa.schema([
            ("session_id", text), ("session_key", text), ("source", text), ("seq", integer),
            ("type", text), ("time", integer),
            ("ts", pa.timestamp("ms", tz="UTC")), ("turn", integer), ("step", integer),
            ("line", integer), ("surface_op", text), ("replace_start", integer),
            ("replace_end", integer), ("n_sources", integer), ("on_surface", flag),
            ("shadowed_by", integer), ("role", text), ("message_id", text), ("text", text),
            ("chars", integer), ("tokens", integer), ("data_bytes", integer),
            ("tool", text)]),
        "replaces": pa.schema([
            ("session_id", text), ("session_key", text), ("source", text), ("seq", integer),
            ("type", text), ("kind", text),
            ("start", integer), ("end", integer), ("n_shadowed", integer),
            ("n_removed", integer), ("n_restored", integer), ("chars_before", integer),
            ("tokens_before", integer), ("chars_after", integer), ("tokens_after", integer),
            ("plugin", text), ("compaction_id", text), ("shadows_replacement", flag),
            ("recorded_matches", flag), ("n_at_risk", integer)]),
        "replace_members": pa.schema([
            ("session_id", text), ("session_key", text), ("source", text),
            ("replace_seq", integer), ("shadowed_seq", integer),
            ("restored", flag)]),
        "mentions": pa.schema([
            ("session_id", text), ("session_key", text), ("source", text),
            ("replace_seq", integer), ("ident", text)]),
        "lost_evidence": _lost_evidence_schema(pa),
        "requests": pa.schema([
            ("session_id", text), ("session_key", text), ("source", text),
            ("request_id", text), ("file", text), ("line", integer), ("time", integer),
            ("model", text), ("provider", text), ("agent", text), ("on_path", flag),
            ("calls", integer), *((name, integer) for name in _FIGURES),
            ("tokens_source", text), ("cost_usd", pa.float64()), ("priced_model", text),
            ("cost_source", text), ("cost_problem", text),
            ("recorded_cost_usd", pa.float64())]),
    }


_FIGURES = ("input_uncached", "cache_read", "cache_write", "cache_write_5m",
            "cache_write_1h", "output", "reasoning", "input_total")


def _read_session(ref: SessionRef) -> tuple[Any, str, str, list[Any], int | None]:
    """(LogData, session id, format, problems, createdAt) of one session; a package error
    becomes the session's problem (with the readable prefix, when there is one). The
    LogData's `cache["billed"]` is the session's billed requests (`analysis.requests`):
    read from another agent's own files, or from a surface log's recorded usage."""
    from .analysis.source import LogData, load_source
    from .importers import detect_format, import_any
    from .problems import Problem
    from .storage.read import read_log

    path = Path(ref.path)
    fmt = "surface"
    try:
        foreign = None if ref.session_id is not None else detect_format(path)
        if foreign is not None:
            fmt = foreign
            result = import_any(path, fmt=foreign)
            log = load_source(list(result.events), strict=False, progress=False)
            log.session_id = str(result.header["id"])
            log.cache["billed"] = _billed_foreign(path, foreign, result)
            return (log, log.session_id, fmt, list(result.problems),
                    int(result.header["createdAt"]))
        reading = read_log(path, session_id=ref.session_id)
        log = load_source(reading, strict=False, progress=False)
        log.cache["billed"] = _billed_events(log, str(path))
        return (log, reading.session_id, fmt, log.problems,
                int(reading.header["createdAt"]))
    except SurfaceLabError as err:
        problem = Problem.from_error(err, path=str(path))
        log = LogData(ref.session_id or ref.id or _unread_id(path), [])
        if path.is_file() and ref.session_id is None:
            with contextlib.suppress(SurfaceLabError):  # the readable prefix of a damaged file
                log = load_source(str(path), strict=False, progress=False)
        if not log.problems:
            log.problems.append(problem)
        return log, ref.session_id or log.session_id, fmt, log.problems, None


def _billed_foreign(path: Path, fmt: str, result: Any) -> list[Any]:
    """Another agent's billed requests, from its own files (every branch, its subagents',
    the summarizer's), each marked on the imported path or not."""
    from .analysis.requests import RequestsError, mark_on_path, read_requests

    try:
        return mark_on_path(read_requests(path, fmt=fmt), result.events, result.origins)
    except RequestsError:
        return []


def _billed_events(log: Any, path: str) -> list[Any]:
    from .analysis.requests import requests_from_events

    return requests_from_events(log.events, file=path)


_PRICES: list[Any] = []


def _price_table() -> Any:
    """genai-prices' bundled table (once a process), or no prices without the extra."""
    from .analysis.prices import BundledPrices, RateTable

    if not _PRICES:
        try:
            _PRICES.append(BundledPrices())
        except ModuleNotFoundError:
            _PRICES.append(RateTable({}, name="none (install surface-lab[prices])"))
    return _PRICES[0]


def _add_requests(table: dict[str, Any], billed: list[Any], ids: dict[str, str]) -> None:
    """The `requests` rows of one session: its billed requests with their tokens as
    recorded and their dollars (`requests_df`'s columns)."""
    from .analysis.prices import price_requests

    costs = price_requests(billed, _price_table()) if billed else []
    for r, c in zip(billed, costs, strict=True):
        values = {"tokens_source": r.source, "cost_usd": c.usd,
                  "priced_model": c.priced_model, "cost_source": c.source,
                  "cost_problem": c.problem, "recorded_cost_usd": r.recorded_cost}
        for column in table:
            table[column].append(ids[column] if column in _KEYS else values[column]
                                 if column in values else getattr(r, column))


def _unread_id(path: Path) -> str:
    """The id of a session that could not be read: its file's name, or its session
    folder's for a store's `session.jsonl` (two unreadable ones are not one session)."""
    return (path.parent.name if path.name in ("session.jsonl", "session.jsonl.zstd")
            else path.name)


def _clean(text: str) -> str:
    """Text Parquet can hold: a lone surrogate (from a JSON escape) as a backslash escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def session_key(source: str, session_id: str) -> str:
    """The corpus-wide key of a session: `<source>#<session id>` (ids repeat across
    sources: a log and its converted copy, or two tools' ids)."""
    return f"{source}#{session_id}"


def _session_columns(ref: SessionRef, box: list[Any], session_id: str, fmt: str,
                     problems: list[Any], created: int | None,
                     spill: _Spill, facts: _TaskFacts
                     ) -> tuple[dict[str, dict[str, Any]], list[Any]]:
    """Every table's columns for one session but the events, and the spill's parts of
    its events (all the fallible work, before any row is added to a task's tables)."""
    log = box.pop()  # the only reference: the log is let go once its tables are made
    from .analysis.audit import facts_at_risk_by_replace
    from .analysis.brackets import replacement_columns
    from .analysis.events import event_slices
    from .gcpause import gc_paused

    key, source = session_key(ref.path, session_id), ref.path
    tables: dict[str, dict[str, Any]] = {
        name: {c: [] for c in schema.names} for name, schema in _schemas().items()
        if name != "events"}
    # The events go to the spill a slice at a time, before the other tables are worked
    # out: a slice's columns (numpy, then Arrow) are all that is held of them, never the
    # session's whole events table beside its reading (memory: `_event_slice`)
    ids = {"session_id": session_id, "session_key": key, "source": source}
    events: list[Any] = []
    for seqs in event_slices(log, ROW_GROUP):
        events += spill.write("events", _event_slice(log, seqs, ids))
    rep = replacement_columns(log)
    at_risk: dict[int, list[str]] = {}
    if rep["seq"]:
        with gc_paused():  # many acyclic texts
            try:
                at_risk = facts_at_risk_by_replace(log, facts.rules, memo=facts.memo)
            finally:
                facts.memo.session.clear()  # the session's texts are let go with it
    # the evidence walk reads again only the texts the facts did not decode; then what
    # the audit kept for its own later questions (texts, brackets, ledger) is let go
    _add_lost_evidence(tables["lost_evidence"], log, ids)
    billed = log.cache.get("billed") or []
    log.cache.clear()
    first = problems[0] if problems else None
    sessions = tables["sessions"]
    for column, value in (("session_id", session_id), ("session_key", key),
                          ("source", source), ("format", fmt), ("created_at", created),
                          ("events", len(log.events)),
                          ("surface_entries", len(log.fold.nodes)),
                          ("replaces", len(rep["seq"])), ("problems", len(problems)),
                          ("problem_code", first.code if first else None),
                          ("problem", _clean(str(first)) if first else None),
                          ("problem_line", first.line if first else None)):
        sessions[column].append(value)
    _add_requests(tables["requests"], billed, ids)
    del log
    replaces = tables["replaces"]
    for i, seq in enumerate(rep["seq"]):
        for column in replaces:
            if column in _KEYS:
                replaces[column].append(ids[column])
            elif column == "n_removed":
                replaces[column].append(len(rep["removed_seqs"][i]))
            elif column == "n_restored":
                replaces[column].append(len(rep["restored_seqs"][i]))
            elif column == "n_at_risk":
                replaces[column].append(len(at_risk.get(seq, [])))
            else:
                replaces[column].append(rep[column][i])
        restored = set(rep["restored_seqs"][i])
        for shadowed in rep["shadowed_seqs"][i]:
            for column, value in (*ids.items(), ("replace_seq", seq),
                                  ("shadowed_seq", shadowed),
                                  ("restored", shadowed in restored)):
                tables["replace_members"][column].append(value)
        for ident in at_risk.get(seq, []):
            for column, value in (*ids.items(), ("replace_seq", seq), ("ident", ident)):
                tables["mentions"][column].append(value)
    return tables, events


class _TextMemo(MutableMapping[tuple[str, str], Any]):
    """`texts_at_risk`'s memo of the default rules, for every session a process builds:
    each distinct hidden (text, author) is matched once, not once a session (sessions of
    one project hide the same file reads, instructions and tool outputs). Keyed by a
    128-bit digest of the text, so it holds the mentions found, never the texts; at most
    about `_MEMO_BYTES` of them (counted by their text's length), then forgotten
    together, as the rules' own memos are: a bound of its own, whatever the corpus. In
    front of it, `session`: the session's own memo by text (what the audit keeps for one
    log, unbounded as there), emptied once the session's facts are found."""

    def __init__(self) -> None:
        self._found: dict[tuple[bytes, str], Any] = {}
        self._held = 0
        # the session's own memo in front, by text, unbounded as the audit's own is: a
        # large session's repeats stay matched once when the bound empties the rest
        self.session: dict[tuple[str, str], Any] = {}

    @staticmethod
    def _key(key: tuple[str, str]) -> tuple[bytes, str]:
        import hashlib

        text, author = key
        return (hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                digest_size=16).digest(), author)

    def __getitem__(self, key: tuple[str, str]) -> Any:
        found = self.session.get(key)
        if found is None:
            found = self.session[key] = self._found[self._key(key)]
        return found

    def __setitem__(self, key: tuple[str, str], value: Any) -> None:
        self.session[key] = value
        size = _MEMO_ENTRY + sum(_MEMO_ENTRY + len(mention) for mention, _, _ in value)
        if self._held + size > _MEMO_BYTES:
            self._found.clear()
            self._held = 0
        self._found[self._key(key)] = value
        self._held += size

    def __delitem__(self, key: tuple[str, str]) -> None:
        self.session.pop(key, None)
        del self._found[self._key(key)]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        raise TypeError("a _TextMemo holds digests, not texts: it cannot list its keys")

    def __len__(self) -> int:
        return len(self._found)


_MEMO_BYTES = 1 << 22  # about what the memo of hidden texts may hold (4 MB)
_MEMO_ENTRY = 120  # about what an entry or a mention costs beside its text, in bytes


@dataclass(frozen=True)
class _TaskFacts:
    """What a task's sessions share to find their facts: the rules and the memo."""

    rules: Any
    memo: _TextMemo


_MEMOS: list[tuple[Any, _TextMemo]] = []


def _hidden_texts(rules: Any) -> _TextMemo:
    """The process's memo of hidden texts for `rules` (the same rules every task, a
    copy of `DEFAULT_RULES`): kept from task to task of a build (a serial build starts
    with an empty one; a Dask worker keeps its own); other rules, a new memo."""
    if not _MEMOS or _MEMOS[0][0] != rules:
        _MEMOS[:] = [(rules, _TextMemo())]
    return _MEMOS[0][1]


def _task_facts() -> _TaskFacts:
    """The default fact rules, as a copy of their own for one task, and the memo of
    hidden texts (`_hidden_texts`): the rules remember texts they stripped and words
    they matched (up to 65k of each, kept from every session that used them), which in a
    build of thousands of sessions made the peak grow with the corpus; a copy's memos go
    with its task (a copy for each session cost a fifth more time, the memo no longer
    shared by its task's sessions). The same rules, the same facts. The memo of hidden
    texts holds no text and has a bound in bytes of its own, so it is kept."""
    import dataclasses

    from .analysis.facts import DEFAULT_RULES

    rules = dataclasses.replace(DEFAULT_RULES)
    return _TaskFacts(rules, _hidden_texts(rules))


def _event_slice(log: Any, seqs: range, ids: dict[str, str]) -> Any:
    """The `events` rows of `seqs` of a session, as an Arrow table of the held schema
    (`_HELD`): from `analysis.events.event_arrays`' numpy arrays, each let go once it
    is in Arrow."""
    import pyarrow as pa

    from .analysis.events import event_arrays

    ev = event_arrays(log, seqs)
    n = len(seqs)
    schema = _held_schemas()["events"]
    tools = _tool_names(log, ev["type"], seqs)
    columns: dict[str, Any] = {}
    for column in schema.names:
        if column in _KEYS:
            columns[column] = _repeat(ids[column], n)
        elif column == "n_sources":
            columns[column] = pa.array([len(s) if s is not None else None
                                        for s in ev.pop("source_event_seqs")],
                                       type=pa.int64())
        elif column == "tool":
            columns[column] = tools
        else:  # each numpy column is let go once it is in Arrow (memory: one copy)
            columns[column] = _arrow(ev.pop(column) if column != "type" else ev[column],
                                     schema.field(column).type)
    return pa.Table.from_pydict(columns, schema=schema)


def _tool_names(log: Any, types: Any, seqs: range) -> Any:
    """The tool each `tool/call` event of `seqs` names (`data.name`), null elsewhere:
    what a query needs to tell an edit from a read (`types`: those events' types)."""
    import numpy as np
    import pyarrow as pa

    from .analysis.events import Coded
    from .reading.sequences import LogEvents

    n = len(seqs)
    if isinstance(types, Coded):
        names = list(types.categories)
        if "tool/call" not in names:
            return pa.nulls(n, pa.string())
        calls = np.flatnonzero(np.asarray(types.codes) == names.index("tool/call")).tolist()
    else:
        calls = [i for i, t in enumerate(types) if t == "tool/call"]
    tools = np.full(n, None, dtype=object)
    events = log.events
    read = events.raw if isinstance(events, LogEvents) else events.__getitem__  # unfrozen
    for i in calls:
        data = read(seqs.start + i).get("data")
        name = data.get("name") if isinstance(data, dict) else None
        tools[i] = _clean(name) if isinstance(name, str) else None
    return pa.array(tools, type=pa.string())


def _repeat(value: str, n: int) -> Any:
    """One string `n` times, as a dictionary-encoded column (cast to the schema's string
    only a row group at a time, when written: `_HELD`)."""
    import numpy as np
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype="int32")),
                                          pa.array([value], type=pa.string()))


def _arrow(values: Any, kind: Any) -> Any:
    """A column of `analysis.events.event_arrays` as an Arrow array, from its numpy arrays
    (no Python list between): `Masked` integers with their null mask, `Coded` categories
    taken from their names."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .analysis.events import Coded, Masked

    if isinstance(values, Masked):
        return pa.array(np.asarray(values.values), mask=np.asarray(values.missing),
                        type=kind)
    if isinstance(values, Coded):
        codes = np.asarray(values.codes)
        index = pa.array(codes.astype("int32"), mask=codes < 0)
        names = pa.array(list(values.categories), type=pa.string())
        if pa.types.is_dictionary(kind):  # held as codes, cast when written (`_HELD`)
            return pa.DictionaryArray.from_arrays(index, names)
        return pc.take(names, index).cast(kind)
    if isinstance(values, np.ndarray) and values.dtype != object:
        if pa.types.is_timestamp(kind):
            return pa.array(values.astype("int64"), type=pa.int64()).cast(kind)
        return pa.array(values, type=kind)
    return pa.array(list(values), type=kind)


def _lost_evidence_schema(pa: Any) -> Any:
    text, integer = pa.string(), pa.int64()
    return pa.schema([
        ("session_id", text), ("session_key", text), ("source", text), ("seq", integer),
        ("kind", text), ("replace_seq", integer), ("hidden_seq", integer),
        ("turn", integer), ("tool", text), ("detail", text), ("events_after", integer)])


def _add_lost_evidence(table: dict[str, Any], log: Any, ids: dict[str, str]) -> None:
    """The `lost_evidence` rows of one session: each action after a replace that shows
    the agent needed what it hid (`surface_lab.analysis.evidence`)."""
    from .analysis.evidence import find_lost_evidence

    if not log.fold.replacements:
        return
    # the texts and sources the facts decoded (`LogData.texts`), as the walk takes them
    known = {"texts": log.cache["texts"], "sources": log.cache.get("sources")} if (
        "texts" in log.cache) else {}
    for found in find_lost_evidence(log.events, log.plans, **known):
        for column in table:
            table[column].append(ids[column] if column in _KEYS else getattr(found, column))


_KEYS = ("session_id", "session_key", "source")
# The events' columns of few distinct strings (the keys, the type, the role, the op) are
# held dictionary-encoded until written, a row group at a time, as the schema's strings:
# a million events' source paths would be a hundred megabytes as strings, a few as codes.
_HELD = (*_KEYS, "type", "surface_op", "role")


@functools.cache
def _held_schemas() -> dict[str, Any]:
    """`_schemas()` as a task holds its tables before writing (`_HELD`)."""
    import pyarrow as pa

    schemas = dict(_schemas())
    events = schemas["events"]
    for name in _HELD:
        events = events.set(events.get_field_index(name),
                            pa.field(name, pa.dictionary(pa.int32(), pa.string())))
    schemas["events"] = events
    return schemas


@dataclass
class _SessionTables:
    """One session's rows of every table, as Arrow tables, and what picks among copies."""

    session_id: str
    key: str
    errors: int
    events: int
    tables: dict[str, Any]
    problem: dict[str, Any] | None


def _session_tables(ref: SessionRef, spill: _Spill, facts: _TaskFacts) -> _SessionTables:
    """Read one session into `spill` (its tables as the spill's parts). Never
    raises: whatever goes wrong costs this session only and is reported as its problem
    (the events it had spilled are then never taken back)."""

    from .analysis.source import LogData
    from .problems import Problem

    schemas = _held_schemas()
    try:
        log, session_id, fmt, problems, created = _read_session(ref)
        box = [log]
        del log  # `_session_columns` holds the only reference
        columns, events = _session_columns(ref, box, session_id, fmt, problems, created,
                                           spill, facts)
        tables = {name: _table(columns[name], schemas[name]) for name in columns}
    except Exception as err:
        # One source's surprise (a reader's bug, data Arrow refuses) must not abort a build
        # of thousands: the session becomes a row with the error's type and text
        # (`session-unreadable`), never hidden.
        text = _clean(f"{type(err).__name__}: {err}")
        problems = [Problem("error", "session-unreadable",
                            text if len(text) <= 300 else f"{text[:300]}...", ref.path)]
        session_id = _clean(ref.session_id or ref.id or _unread_id(Path(ref.path)))
        columns, events = _session_columns(ref, [LogData(session_id, [])], session_id,
                                           "surface", problems, None, spill, facts)
        tables = {name: _table(columns[name], schemas[name]) for name in columns}
    row = {name: values[0] for name, values in columns["sessions"].items()}
    problem = None
    if row["problem_code"]:
        problem = {"session_id": row["session_id"], "session_key": row["session_key"],
                   "source": row["source"], "code": row["problem_code"],
                   "problem": row["problem"], "line": row["problem_line"]}
    errors = sum(1 for p in problems if getattr(p, "severity", "error") == "error")
    return _SessionTables(row["session_id"], row["session_key"], errors, row["events"],
                          {**spill.put(tables), "events": events}, problem)


def _table(columns: dict[str, list[Any]], schema: Any) -> Any:
    """One session's rows of a table as Arrow (none: the schema's empty table, made once)."""
    import pyarrow as pa

    if not next(iter(columns.values())):
        return _empty(schema)
    return pa.Table.from_pydict(columns, schema=schema)


@functools.cache
def _empty(schema: Any) -> Any:
    return schema.empty_table()


def _best(copies: list[_SessionTables]) -> _SessionTables:
    """The copy of a session the corpus keeps: the fewest errors, then the most events,
    then the first session key (source path) in order."""
    return min(copies, key=lambda c: (c.errors, -c.events, c.key))


def _cast_held(table: Any, schema: Any) -> Any:
    """`table.cast(schema)` for a table of the held schema (`_HELD`): only the columns
    held as codes are cast (a table's cast casts every column, a call each)."""
    for i, (held, wanted) in enumerate(zip(table.schema, schema, strict=True)):
        if held.type != wanted.type:
            table = table.set_column(i, wanted, table.column(i).cast(wanted.type))
    return table.replace_schema_metadata(schema.metadata)


class _Spill:
    """A task's sessions set aside as they are read: each table's rows kept as Arrow
    batches while they come to less than `SPILL_HELD_BYTES`, past that in an Arrow IPC
    file (memory: one session's work and the held batches, not the task's tables),
    cast to the schema's strings a row group at a time, and taken back session by
    session in the files' order once every copy of every id is known."""

    def __init__(self, folder: Path) -> None:
        self._paths = {name: folder / f"{name}.arrow" for name in TABLES}
        # a table's file is made with its first batch past the held bytes: a task of
        # small sessions makes none
        self._writers: dict[str, Any] = {}
        self._batches = dict.fromkeys(TABLES, 0)
        self._held = 0

    def write(self, name: str, table: Any) -> list[Any]:
        """Add `table` (of the held schema) to table `name`, cast to the schema's strings
        a row group at a time; its parts: each batch itself while few bytes are held
        (small sessions' rows never go through the file), else its number in the file."""
        schema = _schemas()[name]
        same = table.schema.equals(schema)  # only the events hold codes (`_HELD`)
        parts: list[Any] = []
        for start in range(0, table.num_rows, ROW_GROUP):
            part = table.slice(start, ROW_GROUP)
            for batch in (part if same else _cast_held(part, schema)).to_batches():
                size = batch.get_total_buffer_size()  # a slice holds its whole buffers
                if self._held + size <= SPILL_HELD_BYTES:
                    self._held += size
                    parts.append(batch)
                    continue
                if name not in self._writers:
                    import pyarrow as pa

                    self._writers[name] = pa.ipc.new_file(str(self._paths[name]), schema)
                self._writers[name].write_batch(batch)
                parts.append(self._batches[name])
                self._batches[name] += 1
        return parts

    def put(self, tables: dict[str, Any]) -> dict[str, list[Any]]:
        """Set aside a session's `tables`; the parts each took."""
        return {name: self.write(name, table) for name, table in tables.items()}

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()

    def tables(self, name: str, kept: list[_SessionTables]) -> Iterator[Any]:
        """The kept sessions' `name` rows in `kept`'s order, as tables: a session's whole
        (sorted by the table's key) or, for the events (in order already), a batch at a
        time."""
        import pyarrow as pa

        schema = _schemas()[name]
        with contextlib.ExitStack() as stack:
            spill: Any = None
            if name in self._writers:  # read, not mapped: pages let go
                spill = pa.ipc.open_file(stack.enter_context(
                    pa.OSFile(str(self._paths[name]))))

            def batch(part: Any) -> Any:
                return spill.get_batch(part) if isinstance(part, int) else part

            for k in kept:
                if name == "events":
                    for part in k.tables[name]:
                        yield pa.Table.from_batches([batch(part)], schema=schema)
                    continue
                if not k.tables[name]:
                    continue  # no rows (most sessions' mentions, say): nothing to read
                table = pa.Table.from_batches([batch(p) for p in k.tables[name]],
                                              schema=schema)
                # each session sorted, the sessions in (session_id, session_key) order and
                # the sort stable: the task's table sorted whole
                yield table.sort_by(_sort_key(name)) if table.num_rows > 1 else table


# What a task's spill keeps in memory, in Arrow bytes, before it writes to its file: a
# task of small sessions (most) then never round-trips them through the file, which
# cost a tenth of the build; a large session's tables go to the file as before.
SPILL_HELD_BYTES = 1 << 23


def _task_tables(task: Task, spill: _Spill) -> tuple[list[_SessionTables],
                                                     list[dict[str, Any]]]:
    """Read a task's sessions into `spill`: the sessions kept (in the files' order) and
    the copies of one id resolved."""
    kept: list[_SessionTables] = []
    duplicates: list[dict[str, Any]] = []
    groups: dict[str, list[_SessionTables]] = {}
    facts = _task_facts()
    try:
        for ref in task.sessions:
            read = _session_tables(ref, spill, facts)
            groups.setdefault(read.session_id, []).append(read)
    finally:
        spill.close()
    for session_id, copies in groups.items():
        best = _best(copies)
        kept.append(best)
        if len(copies) > 1:
            duplicates.append({"session_id": session_id, "kept": best.key,
                               "dropped": sorted(c.key for c in copies if c is not best)})
    kept.sort(key=lambda k: (k.session_id, k.key))  # the files' order
    return kept, duplicates


def _sort_key(name: str) -> list[tuple[str, str]]:
    keys = {"sessions": [], "events": ["seq"], "replaces": ["seq"],
            "replace_members": ["replace_seq", "shadowed_seq"],
            "mentions": ["replace_seq", "ident"],
            "lost_evidence": ["seq", "replace_seq"],
            "requests": ["time", "request_id", "file"]}[name]
    return [(k, "ascending") for k in ["session_id", "session_key", *keys]]


# Rows a Parquet row group holds at most: small sessions are gathered up to it (few row
# groups for a query to open), a large one is written in groups of it (the writer holds
# one group's pages, not the session's).
ROW_GROUP = 1 << 16
# ... and at most about this many bytes of Arrow data: the rows of a group are held
# until it is written, so a task of many small sessions holds one group's bytes (a full
# 64k-row group of short sessions' events was about 26 MB), whatever the task's size
ROW_GROUP_BYTES = 1 << 23


def _write_table(path: Path, name: str, tables: Iterable[Any]) -> int:
    """Write one table of a task from its sessions' tables, in order; the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 0
    pending: list[Any] = []
    held = held_bytes = 0
    with pq.ParquetWriter(path, _schemas()[name], compression="zstd") as writer:
        for table in tables:
            rows += table.num_rows
            pending.append(table)
            held += table.num_rows
            held_bytes += table.nbytes
            if held >= ROW_GROUP or held_bytes >= ROW_GROUP_BYTES:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP)
                pending, held, held_bytes = [], 0, 0
        if pending or not rows:
            writer.write_table(pa.concat_tables(pending) if pending
                               else _schemas()[name].empty_table())
    return rows


@contextlib.contextmanager
def _malloc_pool() -> Iterator[None]:
    """Arrow allocates from the C library's malloc while a task runs, not from its default
    pool (mimalloc here), which kept the pages of every row group it had written: 30 MB
    after writing 12k events, and more as tasks grew. Arrays made before keep their own
    pool; the default is back once the task is done."""
    import pyarrow as pa

    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)


def write_chunk(task: Task, out: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one task's sessions and write every table of it (deterministic file names,
    written to a temporary name and renamed, so a retry overwrites). Returns the rows of
    the manifest for this task.

    Memory is one session's work, not the task's: each session's tables are set aside on
    disk as it is read (`_Spill`), then each table is streamed to Parquet session by
    session."""
    import tempfile

    root = Path(out)
    files = {}
    written: list[tuple[Path, Path]] = []
    try:
        with _malloc_pool(), tempfile.TemporaryDirectory(prefix="surface-lab-task-") as folder:
            spill = _Spill(Path(folder))
            kept, duplicates = _task_tables(task, spill)
            for name in TABLES:
                target = root / name / f"date={task.date}" / task.file_name
                target.parent.mkdir(parents=True, exist_ok=True)
                temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
                written.append((temporary, target))
                rows = _write_table(temporary, name, spill.tables(name, kept))
                files[name] = {"path": str(target.relative_to(root)), "rows": rows}
    except BaseException:
        for temporary, _ in written:
            temporary.unlink(missing_ok=True)
        raise
    for temporary, target in written:
        os.replace(temporary, target)
    return {"task": task.name, "date": task.date, "fingerprint": task.fingerprint,
            "inputs": [asdict(r) for r in task.sessions], "files": files,
            "problems": [k.problem for k in kept if k.problem is not None],
            "sessions": len(kept), "duplicates": duplicates,
            "keys": [[k.session_id, k.key] for k in kept]}


# -- the build ---------------------------------------------------------------------------


@dataclass
class Manifest:
    """What a build wrote: the commit point of a dataset."""

    schema_version: int
    tables: dict[str, list[dict[str, Any]]]
    sessions: int
    events: int
    problems: list[dict[str, Any]] = field(default_factory=list)
    tasks: int = 0
    engine: str = "serial"
    # one session id in several sources: {"session_id", "kept": [keys], "dropped": [keys]}
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    # each task's own manifest rows (`write_chunk`'s), with its fingerprint and inputs:
    # what the next build reuses
    results: list[dict[str, Any]] = field(default_factory=list)
    # what this build found against the previous one: tasks whose files it kept, and the
    # sources new, grown (larger), otherwise changed, and gone since
    reused: int = 0
    added: list[str] = field(default_factory=list)
    grown: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, out: str | os.PathLike[str]) -> Manifest:
        """The manifest of a finished build.

        Raises:
            SurfaceLabError: `corpus-missing` when `out` does not exist,
                `corpus-unfinished` without a manifest, `schema-unsupported`
                for another schema version, `corpus-damaged` for a manifest that is not
                what a build writes (every file it names must be inside `out`).
        """
        path = Path(out) / MANIFEST
        if not os.path.lexists(out):
            raise SurfaceLabError(f"{out}: no such corpus (build one with surface-lab corpus "
                                  f"build SRC... {out})", code="corpus-missing",
                                  path=str(out))
        if not path.is_file():
            raise SurfaceLabError(f"{out}: no {MANIFEST}: not a finished corpus build",
                                  code="corpus-unfinished", path=str(out))

        def damaged(why: str) -> SurfaceLabError:
            return SurfaceLabError(f"{path}: damaged manifest: {why}; rebuild the corpus",
                                   code="corpus-damaged", path=str(path))

        try:
            data = json.loads(path.read_bytes())
        except OSError as err:
            raise SurfaceLabError(f"{path}: cannot read the manifest: {err.strerror}",
                                  code="corpus-damaged", path=str(path)) from err
        except (ValueError, RecursionError) as err:  # JSON or UTF-8 errors, deep nesting
            raise damaged(f"not JSON ({type(err).__name__})") from None
        if not isinstance(data, dict):
            raise damaged(f"a JSON {type(data).__name__}, not an object")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise SurfaceLabError(f"{out}: corpus schema version {data.get('schema_version')!r}"
                                  f", expected {SCHEMA_VERSION}", code="schema-unsupported",
                                  path=str(out))
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        missing = [f.name for f in fields(cls) if f.default is MISSING
                   and f.default_factory is MISSING and f.name not in data]
        if unknown or missing:
            raise damaged(f"unknown fields {unknown}, missing fields {missing}")
        manifest = cls(**data)
        manifest._check(damaged)
        return manifest

    def _check(self, damaged: Callable[[str], SurfaceLabError]) -> None:
        if not isinstance(self.tables, dict) or not all(
                isinstance(files, list) for files in self.tables.values()):
            raise damaged("`tables` is not a map of file lists")
        for table, files in self.tables.items():
            for f in files:
                where = f.get("path") if isinstance(f, dict) else None
                if not isinstance(where, str) or not isinstance(f.get("rows"), int):
                    raise damaged(f"a file of table {table!r} has no path or row count")
                if Path(where).is_absolute() or ".." in Path(where).parts:
                    raise damaged(f"file {where!r} is outside the corpus folder")
        for name in ("sessions", "events", "tasks"):
            if not isinstance(getattr(self, name), int):
                raise damaged(f"`{name}` is not a count")
        if not isinstance(self.problems, list) or not isinstance(self.duplicates, list):
            raise damaged("`problems` or `duplicates` is not a list")
        if not isinstance(self.results, list) or not all(
                isinstance(r, dict) for r in self.results):
            raise damaged("`results` is not a list of task rows")
        for name in ("added", "grown", "changed", "vanished"):
            if not isinstance(getattr(self, name), list):
                raise damaged(f"`{name}` is not a list")

    def files(self, out: str | os.PathLike[str], table: str) -> list[str]:
        return [str(Path(out) / f["path"]) for f in self.tables.get(table, [])]


def _largest_first(tasks: list[Task]) -> list[Task]:
    """The order to hand tasks to parallel workers: largest input first (longest
    processing time first), so no large task starts last and leaves the other workers
    idle at the end; ties in plan order."""
    return sorted(tasks, key=lambda t: -sum(r.size for r in t.sessions))


def _run(tasks: list[Task], out: Path, engine: str, client: Any, workers: int | None,
         on_done: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    if engine != "serial":
        tasks = _largest_first(tasks)
    if engine == "serial":
        for task in tasks:
            results.append(write_chunk(task, out))
            on_done(results[-1])
    elif engine == "processes":
        with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
            futures = [pool.submit(write_chunk, task, out) for task in tasks]
            for future in as_completed(futures):
                results.append(future.result())
                on_done(results[-1])
    elif engine == "dask":
        import importlib

        distributed: Any = importlib.import_module("dask.distributed")
        own = cluster = None
        if client is None:  # like `Client()`: a local cluster, one process per core
            # (the fold holds the GIL, so never threads: Dask's threaded default is slower
            # than one process); Dask sizes it to the cores this process may use
            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                               processes=True, dashboard_address=None)
            own = client = distributed.Client(cluster)
        elif isinstance(client, str):
            own = client = distributed.Client(client)
        try:
            futures = client.map(write_chunk, tasks, out=str(out), pure=False, retries=2)
            for future in distributed.as_completed(futures):
                results.append(future.result())
                on_done(results[-1])
        finally:
            if own is not None:
                own.close()
            if cluster is not None:
                cluster.close()
    else:
        raise SurfaceLabError(f"unknown engine {engine!r}; use serial, processes or dask",
                              code="usage")
    return results


def _duplicates(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every session id held by several sources: the copies one task resolved (one kept),
    and ids kept more than once because their copies were in different tasks (another
    date, or other agents' logs the planner cannot see into), told apart by key."""
    found = [{"session_id": d["session_id"], "kept": [d["kept"]], "dropped": d["dropped"]}
             for r in results for d in r["duplicates"]]
    keys: dict[str, list[str]] = {}
    for r in results:
        for session_id, key in r["keys"]:
            keys.setdefault(session_id, []).append(key)
    resolved = {d["session_id"]: d for d in found}
    for session_id, kept in keys.items():
        if len(kept) > 1:
            if session_id in resolved:
                resolved[session_id]["kept"] = sorted(kept)
            else:
                found.append({"session_id": session_id, "kept": sorted(kept), "dropped": []})
    return sorted(found, key=lambda d: d["session_id"])


def to_parquet(sources: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
               out: str | os.PathLike[str], *, engine: str = "serial", client: Any = None,
               workers: int | None = None, task_mb: float | None = None,
               progress: bool = False) -> Manifest:
    """Build a Parquet dataset of `sessions`, `events`, `replaces`, `replace_members`,
    `mentions` (facts at risk), `lost_evidence` (evidence of loss) and `requests` (billed
    requests with tokens and dollars) from many logs. Built again into the same `out`,
    it reuses every task whose sources did not change (the manifest says which, and what
    was added, grew, changed or vanished); until its manifest replaces the previous one,
    the previous dataset stays whole and readable.

    Args:
        sources: paths, globs, folders and SQLite databases; other agents' logs are
            imported. A bad session becomes a row with its problem, never a failed build.
        out: the output folder (`<table>/date=YYYY-MM-DD/part-*.parquet`, `manifest.json`).
        engine: "serial", "processes" (a local process pool) or "dask" (a
            `dask.distributed` cluster given as `client`, a Client or a scheduler address;
            without one, a `LocalCluster` of one single-threaded worker per core).
        workers: processes for the process engine, or workers of the local Dask cluster
            (default: the CPU count).
        task_mb: about how much input one task reads (tasks hold whole sessions of one
            date); None: `auto_task_mb` of the corpus size (a power of two from 1 to 64
            MB giving at least 64 tasks, so parallel workers get several each).
        progress: show a progress bar over tasks.

    Returns:
        The manifest. One session id in several sources is resolved as docs/corpus.md
        says; `manifest.duplicates` lists each case.

    Raises:
        SurfaceLabError: `corpus-empty` when the sources hold no log (nothing is written).
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    sources = list(sources)
    expanded = check_sources(sources)
    root = Path(out)
    previous = _previous(root)
    before = _inputs(previous.results) if previous is not None else {}
    tasks = plan_tasks(sources, task_mb=task_mb, known=before, expanded=expanded)
    if not tasks:
        named = ", ".join(str(s) for s in sources[:3]) + (", ..." if len(sources) > 3 else "")
        raise SurfaceLabError(f"no session logs in {named or 'no sources'} (looked for "
                              f"{', '.join(LOG_SUFFIXES)} files, SQLite databases and other "
                              f"agents' logs); nothing written", code="corpus-empty")
    root.mkdir(parents=True, exist_ok=True)
    with _build_lock(root):
        return _build(root, tasks, previous, before, engine, client, workers, progress)


@contextlib.contextmanager
def _build_lock(root: Path) -> Iterator[None]:
    """One build at a time into `root`: a second would delete the first's files in
    progress. An advisory lock on `root/.build.lock` (POSIX `flock`, released by the
    system when the build's process dies, so a killed build never leaves it held)."""
    try:
        import fcntl
    except ImportError:  # no flock here (Windows): builds are not serialised
        yield
        return
    with open(root / LOCK, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SurfaceLabError(f"{root}: another corpus build is writing this folder; "
                                  f"nothing written (run one build at a time, or give "
                                  f"another output folder)", code="corpus-busy",
                                  path=str(root)) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(root: Path, tasks: list[Task], previous: Manifest | None,
           before: dict[str, list[SessionRef]], engine: str, client: Any,
           workers: int | None, progress: bool) -> Manifest:
    """`to_parquet` once the plan is made and the folder is this build's alone."""
    _MEMOS.clear()  # a build's memo of hidden texts starts empty (its figures, its memory)
    for stale in root.rglob(".part-*.tmp-*"):
        stale.unlink()
    # the previous manifest stays the commit point until this build's replaces it: its
    # files are never overwritten (a new task's file names carry its fingerprint), so a
    # build killed midway leaves the earlier dataset readable
    # a task of the same fingerprint (same date, sources and stamps) keeps its files,
    # under whatever index the plan now gives it
    reusable = {r.get("fingerprint"): r for r in previous.results
                if _intact(root, r)} if previous is not None else {}
    kept = [{**reusable[t.fingerprint], "task": t.name} for t in tasks
            if t.fingerprint in reusable]
    todo = [t for t in tasks if t.name not in {r["task"] for r in kept}]
    bar: Any = None
    from .analysis.source import shows_progress  # bars only where a person watches

    if todo and shows_progress(progress):
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), unit=" tasks", desc="corpus build")
    results = _run(todo, root, engine, client, workers,
                   lambda _: bar.update(1) if bar is not None else None) if todo else []
    if bar is not None:
        bar.close()
    expected = {t.name for t in todo}
    written = {r["task"] for r in results}
    if written != expected:
        raise SurfaceLabError(f"corpus build incomplete: tasks {sorted(expected - written)}",
                              code="corpus-unfinished", path=str(root))
    results = sorted(kept + results, key=lambda r: r["task"])
    now = {path: refs[0].stamp for path, refs in _inputs(results).items()}
    then = {path: refs[0].stamp for path, refs in before.items()}
    manifest = Manifest(
        schema_version=SCHEMA_VERSION,
        tables={name: [r["files"][name] for r in results] for name in TABLES},
        sessions=sum(r["sessions"] for r in results),
        events=sum(r["files"]["events"]["rows"] for r in results),
        problems=[p for r in results for p in r["problems"]], tasks=len(tasks), engine=engine,
        duplicates=_duplicates(results), results=results, reused=len(kept),
        added=sorted(set(now) - set(then)) if previous is not None else [],
        grown=sorted(p for p in set(now) & set(then) if now[p][0] > then[p][0]),
        changed=sorted(p for p in set(now) & set(then)
                       if now[p] != then[p] and now[p][0] <= then[p][0]),
        vanished=sorted(set(then) - set(now)))
    temporary = root / f".{MANIFEST}.tmp"
    temporary.write_text(json.dumps(asdict(manifest), indent=1))
    os.replace(temporary, root / MANIFEST)
    _collect(root, manifest)
    return manifest


def _previous(root: Path) -> Manifest | None:
    """The manifest of the build already in `root`, or None (none, another schema version,
    a damaged one: the new build then writes every task)."""
    if not (root / MANIFEST).is_file():
        return None
    try:
        return Manifest.load(root)
    except SurfaceLabError:
        return None


def _inputs(results: list[dict[str, Any]]) -> dict[str, list[SessionRef]]:
    """The sessions the tasks of `results` read, by source path."""
    found: dict[str, list[SessionRef]] = {}
    for result in results:
        for item in result.get("inputs") or []:
            try:
                ref = SessionRef(**{**item, "stamp": tuple(item["stamp"])})
            except (TypeError, KeyError, ValueError):
                continue  # not what a build writes: that source is planned afresh
            found.setdefault(ref.path, []).append(ref)
    return found


def _intact(root: Path, result: dict[str, Any]) -> bool:
    """Whether a previous task's files are all there to reuse (and inside `root`)."""
    files = result.get("files")
    if not isinstance(files, dict) or set(files) != set(TABLES):
        return False
    for f in files.values():
        where = f.get("path") if isinstance(f, dict) else None
        if (not isinstance(where, str) or Path(where).is_absolute()
                or ".." in Path(where).parts or not (root / where).is_file()):
            return False
    return True


def _collect(root: Path, manifest: Manifest) -> None:
    """Delete the table files no manifest names any more (an earlier build's, or those of
    a build killed before its manifest), once the new manifest is in place."""
    named = {f["path"] for files in manifest.tables.values() for f in files}
    for table in TABLES:
        for path in (root / table).glob("date=*/part-*.parquet"):
            if str(path.relative_to(root)) not in named:
                path.unlink(missing_ok=True)
        for folder in (root / table).glob("date=*"):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty


# -- querying ----------------------------------------------------------------------------

_READ_STATEMENTS = frozenset({"SELECT", "EXPLAIN"})


class Corpus:
    """DuckDB views over a built dataset: `.sql(query)` returns pandas; each table is also a
    lazy relation (`.events`, `.sessions`, `.replaces`, `.replace_members`, `.mentions`).

    Queries are read-only (one or more SELECT statements) and, unless `allow_external`,
    reach no file outside the corpus folder: DuckDB's external access is off (no COPY,
    ATTACH, INSTALL or LOAD, no reader of another file) and its configuration is locked,
    so no query can turn either back on."""

    def __init__(self, out: str | os.PathLike[str], *, memory_limit: str | None = None,
                 allow_external: bool = False) -> None:
        import duckdb

        self.root = Path(out)
        self.manifest = Manifest.load(out)
        self.db = duckdb.connect(":memory:")
        if memory_limit:
            self.db.execute("SET memory_limit = ?", [memory_limit])
        root = self.root.resolve()
        for table in TABLES:
            files = self.manifest.files(root, table)
            if files:  # paths come from our own manifest; DuckDB takes them as a parameter
                relation = self.db.read_parquet(files, hive_partitioning=True)
                relation.create_view(table)
        if not allow_external:
            self.db.execute("SET allowed_directories = ?", [[f"{root}{os.sep}"]])
            self.db.execute("SET enable_external_access = false")
        self.db.execute("SET lock_configuration = true")

    def sql(self, query: str) -> Any:
        """Run read-only SQL over the views and return a pandas DataFrame.

        Raises:
            SurfaceLabError: `query-refused`, a statement other than SELECT.
            duckdb.Error: the query failed (DuckDB's own message).
        """
        for statement in self.db.extract_statements(query):
            kind = statement.type.name
            if kind not in _READ_STATEMENTS:
                raise SurfaceLabError(
                    f"only SELECT queries are run on a corpus (read-only); got {kind}: "
                    f"{statement.query.strip()[:80]}", code="query-refused")
        return self.db.sql(query).df()

    def table(self, name: str) -> Any:
        return self.db.table(name)

    def __getattr__(self, name: str) -> Any:
        if name in TABLES:
            return self.db.table(name)
        raise AttributeError(name)

    def close(self) -> None:
        self.db.close()


def open_corpus(out: str | os.PathLike[str], **options: Any) -> Corpus:
    """Open a built dataset for queries on one machine."""
    return Corpus(out, **options)


def events(out: str | os.PathLike[str], *, engine: str = "dask") -> Any:
    """The events table as a lazy Dask DataFrame (or pandas with engine="pandas")."""
    manifest = Manifest.load(out)
    files = manifest.files(out, "events")
    if engine == "pandas":
        import pandas as pd

        return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    import dask.dataframe as dd

    return dd.read_parquet(files)


def _apply(func: Callable[[Any], Any], path: str) -> list[Any]:
    import pandas as pd

    frame = pd.read_parquet(path)
    return [func(group) for _, group in frame.groupby("session_id", sort=True)]


def map_sessions(func: Callable[[Any], Any], out: str | os.PathLike[str], *,
                 engine: str = "serial", client: Any = None,
                 workers: int | None = None) -> list[Any]:
    """Apply `func(events of one session as pandas)` to every session; sessions never span
    files, so each file is one partition-local unit of work."""
    files = Manifest.load(out).files(out, "events")
    parts: Iterator[list[Any]] | Sequence[list[Any]]
    if engine == "serial":
        parts = [_apply(func, f) for f in files]
    elif engine == "processes":
        with ProcessPoolExecutor(max_workers=workers or os.cpu_count()) as pool:
            parts = list(pool.map(_apply, [func] * len(files), files))
    elif engine == "dask":
        if client is None:
            raise SurfaceLabError("engine='dask' needs a client", code="usage")
        parts = client.gather(client.map(_apply, [func] * len(files), files))
    else:
        raise SurfaceLabError(f"unknown engine {engine!r}", code="usage")
    return [result for part in parts for result in part]
