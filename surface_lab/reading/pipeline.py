"""The load pipeline (SPEC 7.3), shared by both backends and by `read_log`: header, legacy
upgrades, known types, closers and a full seed check; stores then repair durably
(`Store.load`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ..errors import AdmissionError, CorruptLogError, StorageError, UnsupportedFormatError
from ..events import KNOWN_TYPES, SURFACE_TYPES, Event, freeze_event
from ..header import check_header
from ..jsonvalue import FrozenDict
from ..legacy import upgrade_events
from ..messages import project_message
from ..problems import Problem
from ..repair import interrupted_turn_closers
from ..session import Session
from ..surface import APPEND, LOG_ONLY, FoldResult, PlanList
from .scan import Scan

__all__ = ["CheckedLog", "check_header_line", "check_log", "note_open_turn"]


@dataclass
class CheckedLog:
    """A scanned log after the load pipeline (nothing written)."""

    path: str
    header: FrozenDict
    events: list[Event]
    lines: list[int]
    form: Literal["stored", "fixture"]
    mode: Literal["surface", "linear"]
    closers: list[Event] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    fold: FoldResult = field(default_factory=FoldResult)
    session: Session | None = None
    plans: PlanList = field(default_factory=lambda: PlanList(bytearray(), {}))


def check_header_line(scan: Scan, *, resume: bool, note: Callable[..., None]) -> FrozenDict:
    """The checked header of a scan (SPEC 7.3 step 1); `note` gets `header-legacy`."""
    raw = scan.header
    kind = raw.get("type") if isinstance(raw, dict) else None
    try:
        if kind is None and isinstance(raw, dict) and not {"version", "id"} & raw.keys():
            keys = ", ".join(repr(k) for k in list(raw)[:4]) + (", ..." if len(raw) > 4
                                                                 else "")
            raise AdmissionError(
                f"not a session log: its first line is a JSON object with no \"type\" "
                f"(keys {keys or 'none'}); a log opens with a session header "
                f"{{\"type\": \"session\", ...}} and no importer recognises this as "
                f"another agent's log", code="header-invalid")
        if kind != "session":
            raise AdmissionError(f"the first line must be a session header "
                                 f"(type 'session'), got type {kind!r}", code="header-invalid")
        header = check_header(raw)
    except UnsupportedFormatError as err:
        err.path, err.line = scan.path, 1
        raise
    except AdmissionError as err:
        raise CorruptLogError(str(err), code=err.code, path=scan.path, line=1) from None
    if "delegationDepth" not in header:
        if resume:
            raise UnsupportedFormatError(
                "the header has no delegationDepth (an older dsh log): it can be read but "
                "not resumed; convert it first", code="header-invalid", path=scan.path, line=1)
        note("header-legacy", "the header has no delegationDepth (an older dsh log); "
             "read as 0", line=1)
    return header


def note_open_turn(note: Callable[..., None], closers: list[Event]) -> None:
    """The `open-turn` note, when repair would append closers."""
    if closers:
        note("open-turn", f"the final turn is open: repair would append {len(closers)} "
             f"closer(s) ({', '.join(c['type'] for c in closers)})", seq=closers[0]["seq"])


def check_log(scan: Scan, *, resume: bool = False) -> CheckedLog:
    """Run the load pipeline over a scan.

    Args:
        scan: what a backend read.
        resume: the stricter rules of a store resuming the session for writing.

    Raises:
        CorruptLogError: `log-corrupt` family, keeping the inner code.
        UnsupportedFormatError: another format version, or an unknown type on resume.
        StorageError: `fixture-read-only` when resuming a snapshot fixture.
    """
    problems = list(scan.problems)

    def note(code: str, message: str, *, line: int | None = None, seq: int | None = None,
             event_type: str | None = None) -> None:
        problems.append(Problem("note", code, message, scan.path, line, seq, event_type))

    header = check_header_line(scan, resume=resume, note=note)
    if scan.form == "fixture":
        if resume:
            raise StorageError(f"{scan.path}: snapshot-fixture logs are read-only; convert "
                               f"first", code="fixture-read-only", path=scan.path)
        note("fixture-form", "snapshot-fixture form: seqs assigned from 0, times from 0; "
             "read-only")
    upgraded = upgrade_events(scan.events, session_id=header["id"])
    if upgraded.applied:
        done = ", ".join(f"{name} x{n}" for name, n in sorted(upgraded.applied.items()))
        note("legacy-upgraded", f"legacy shapes upgraded in memory: {done}")
    events: list[Event] = [freeze_event(e) for e in upgraded.events]
    # Only strings: a type of another kind is an envelope error the seed check reports.
    unknown = Counter(e["type"] for e in events if isinstance(e.get("type"), str)
                      and e["type"] not in KNOWN_TYPES and e.get("ignorable") is not True)
    if unknown:
        first = next(e for e in events if e.get("type") in unknown)
        if resume:
            raise UnsupportedFormatError(
                f"type {first['type']!r} is not in the known vocabulary and not ignorable",
                code="type-unknown", path=scan.path, line=scan.line_of(first["seq"]),
                seq=first["seq"], event_type=first["type"])
        names = ", ".join(f"{t} x{n}" for t, n in sorted(unknown.items()))
        note("type-unknown", f"unknown types kept: {names}", line=scan.line_of(first["seq"]),
             seq=first["seq"], event_type=first["type"])
    checked = CheckedLog(scan.path, header, events, scan.lines, scan.form, "surface",
                         problems=problems)
    has_marks = any("surfaceOp" in e for e in events)
    if not has_marks and any(e["type"] in SURFACE_TYPES for e in events):
        checked.mode = "linear"
        note("linear-fallback", "no event carries surfaceOp: messages come from the legacy "
             "linear scan, without surface checks")
        checked.fold = FoldResult(nodes=[e["seq"] for e in events if e["type"] in SURFACE_TYPES
                                         and project_message(e) is not None])
        on = set(checked.fold.nodes)  # SPEC 10: each message of the linear scan appended
        checked.plans = PlanList(bytearray(APPEND if e["seq"] in on else LOG_ONLY
                                           for e in events), {})
        return checked
    checked.closers = interrupted_turn_closers(events)
    note_open_turn(note, checked.closers)
    try:
        checked.session = Session(header["id"], seed=[*events, *checked.closers], header=header)
    except AdmissionError as err:
        raise CorruptLogError(
            f"corrupt log (session {header['id']!r}): {err.detail}",
            code=err.code, path=scan.path, line=scan.line_of(err.seq), seq=err.seq,
            event_type=err.event_type) from None
    # The seed check already folded every event; closers and the end-seed marker only
    # append after them, so the fold of the events is that surface without them.
    surface = checked.session.surface
    checked.fold = FoldResult([n for n in surface.nodes if n < len(events)],
                              list(surface.replacements))
    checked.plans = surface.plans.prefix(len(events))  # what the seed check planned
    return checked
