"""What every importer shares (IMPORTERS.md section 2): the result, and a builder that
writes a valid surface log through a `Session` with dsh-shaped turns and steps,
tool-call bookkeeping, origins, notes and problems, and compaction brackets."""

from __future__ import annotations

import contextvars
import functools
import hashlib
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from ..errors import SurfaceLabError
from ..events import Event
from ..jsonvalue import FrozenDict, loads, thaw
from ..problems import Problem
from ..session import Session
from .planner import TOMBSTONE, Keep, New, Replace, plan

__all__ = ["OMISSIONS", "Builder", "ImportFailure", "ImportResult", "SubagentLink",
           "first_record_time", "parse_time", "printable", "sha256_file"]

P = ParamSpec("P")
R = TypeVar("R")
MAX_SOURCE_LINE = 64 * 1024 * 1024
# Why a source record can be left out of an import; each reason is also the code of the
# note that counts it (a user must never lose content silently).
OMISSIONS = {
    "not-model-visible": "the model never saw them (metadata, UI and bookkeeping records)",
    "off-branch": "not on the imported branch (another leaf: pick it with --leaf)",
    "sidechain": "a subagent's records (import its leaf as a session of its own)",
    "api-error-notice": "Claude Code's own API error notices (keep_api_errors=True keeps "
                        "them)",
    "duplicate": "earlier copies of a repeated id (the last copy is imported)",
    "system-prompt": "the system prompt, which is not a surface item",
    "excluded-from-context": "excluded from the model's context by the tool itself",
    "subagent-reference": "references to subagent trajectories, not spliced in",
    "unparsable": "lines that could not be read (see the line-unparsable problems)",
    "after-until": "after the line given as until=",
    "in-response": "actions whose call is already in their model response's assistant "
                   "message (OpenHands V0 writes one action per call)",
    "usage-not-attached": "token counts that measure no request of their own (Codex "
                          "`info: null`, a repeat of the last count, or no model output "
                          "before them)",
}
SHOWN_PLACES = 5


class ImportFailure(SurfaceLabError):
    """A source the importer cannot read at all (its code names the reason)."""


# What a bug in an importer looks like when odd input reaches it (a field of another
# type than the format says); the package's own errors pass through untouched. MemoryError
# is not one: it says nothing about the file.
FOREIGN_ERRORS = (TypeError, KeyError, AttributeError, ValueError, IndexError,
                  ArithmeticError, RecursionError)
# The builders of the guarded import running now (innermost call last), so that a foreign
# exception can say how far the import got.
_BUILDERS: contextvars.ContextVar[list[Builder] | None] = contextvars.ContextVar(
    "surface_lab_import_builders", default=None)
# The importers wearing the guard (a test checks every entry of `FORMATS` is one).
GUARDED: set[Callable[..., Any]] = set()


def no_foreign_errors(importer: Callable[P, R]) -> Callable[P, R]:
    """The one guard every importer's entry point wears (`FORMATS` in `importers`):

    * a foreign exception that escapes the importer's own checks (a record of a shape no
      check foresaw) becomes an `ImportFailure` with code `importer-error` naming the
      file, the exception and the last source record imported before it, chained to it;
    * an error of the package's own without a place (the session refusing an event the
      importer built) gets the source file as its place, keeping its code;
    * one with a place passes through untouched."""

    @functools.wraps(importer)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        source = args[0] if args else kwargs.get("source")
        builders: list[Builder] = []
        token = _BUILDERS.set(builders)
        try:
            return importer(*args, **kwargs)
        except SurfaceLabError as err:
            if err.path is not None:
                raise
            raise ImportFailure(printable(f"{source}: {err.message}"), code=err.code,
                                path=str(source)) from err
        except FOREIGN_ERRORS as err:
            what = ("RecursionError (records nested too deep)"
                    if isinstance(err, RecursionError) else f"{type(err).__name__} ({err})")
            place = next((b.last_place for b in reversed(builders) if b.last_place), None)
            where = (f" after {place}, the last record imported" if place
                     else " before any record was imported")
            raise ImportFailure(printable(
                f"{source}: cannot import: {what} on a record of an unexpected shape"
                f"{where}; nothing imported; please report it with the file"),
                code="importer-error", path=str(source)) from err
        finally:
            _BUILDERS.reset(token)

    GUARDED.add(guarded)
    return guarded


def _place(origin: Mapping[str, Any] | None, line: Any = None, id: Any = None) -> str | None:
    """How an error names a source record: its line, else its id."""
    if origin:
        line, id = origin.get("line"), origin.get("id")
    if isinstance(line, int) and not isinstance(line, bool):
        return f"line {line}"
    return None if id is None else f"record {str(id)[:80]!r}"


def compact_json(value: Any) -> str:
    """Tool-call arguments as the surface keeps them: compact JSON, non-ASCII kept."""
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def printable(text: Any) -> str:
    """`text` safe to print on a terminal: control characters escaped (log content is
    untrusted)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse_time(value: Any) -> int | None:
    """Epoch ms of an ISO 8601 string or an epoch number (seconds or ms); None if not one.
    Naive times are read as UTC."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or not 0 <= value <= 10**17:  # NaN, inf, no date
            return None
        return int(value if value > 10**11 else value * 1000)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def first_record_time(path: Path, *, max_bytes: int = 1 << 20) -> int | None:
    """Epoch ms of the first top-level `timestamp` among the first lines of a JSONL source
    (Claude Code and Codex records carry ISO strings there; Claude's first line is often
    an undated `file-history-snapshot`); None when none is found. Reads at most
    `max_bytes`; never raises for a bad file."""
    import orjson

    try:
        with open(path, "rb") as f:
            head = f.read(max_bytes)
    except OSError:
        return None
    for line in head.splitlines():
        try:
            record = orjson.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and (time := parse_time(record.get("timestamp"))):
            return time
    return None


@dataclass
class SubagentLink:
    """A subagent transcript of a session (`<session>/subagents/agent-*.jsonl`) and what
    started it."""

    path: str
    agent_id: str
    role: str
    """`task` (started by a Task/Agent tool call) or `compaction` (the summarizer of a
    compaction, `agent-acompact-*`)."""
    call_id: str | None = None
    """The tool call that started it (role `task`), when found."""
    call_seq: int | None = None
    """That call's `tool/call` seq in the session's import (None when off the path)."""
    compaction_id: str | None = None
    """The compaction it summarized (role `compaction`), when found."""
    matched_by: str | None = None
    """How the link was found: `agentId` (the call's result names the agent), `prompt`
    (the subagent's first prompt is the call's), `time` (a compaction's), or None."""
    result: ImportResult | None = None
    """The subagent imported as a session of its own, when asked for."""


@dataclass
class ImportResult:
    """An imported session: a valid surface log and what the import knows about it."""

    format: str
    header: FrozenDict
    events: list[Event]
    sources: list[dict[str, Any]] = field(default_factory=list)
    selection: dict[str, Any] = field(default_factory=dict)
    origins: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: list[Problem] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    omitted: list[dict[str, Any]] = field(default_factory=list)
    """One row per source record the import left out: `{reason, kind, file, line, id}`
    (`reason` is a key of `OMISSIONS`)."""
    subagents: list[SubagentLink] = field(default_factory=list)
    """The session's subagent files and the calls that started them (Claude Code)."""

    @property
    def is_empty(self) -> bool:
        """True when nothing the model saw was imported (no message on the surface ever)."""
        return not any(str(e["type"]).endswith("/message") or e["type"] == "tool/result"
                       for e in self.events)

    def omitted_summary(self) -> dict[str, dict[str, Any]]:
        """Per reason: `{count, why, kinds: {kind: n}}`."""
        out: dict[str, dict[str, Any]] = {}
        for row in self.omitted:
            entry = out.setdefault(row["reason"], {"count": 0, "why": OMISSIONS.get(
                row["reason"], row["reason"]), "kinds": Counter()})
            entry["count"] += 1
            entry["kinds"][row["kind"]] += 1
        for entry in out.values():
            entry["kinds"] = dict(entry["kinds"].most_common())
        return out

    def session(self) -> Session:
        return Session(str(self.header["id"]), seed=self.events, header=self.header)


def read_jsonl(path: Path, builder: Builder) -> list[tuple[int, dict[str, Any]]]:
    """The JSON object lines of a source file with their 1-based line numbers; bad lines
    are reported (`line-unparsable`) and skipped."""
    import orjson

    out: list[tuple[int, dict[str, Any]]] = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            if len(line) > MAX_SOURCE_LINE:
                builder.problem("line-unparsable", f"line longer than {MAX_SOURCE_LINE} bytes "
                                "skipped", line=number)
                builder.omit("unparsable", "too-long", line=number)
                continue
            try:
                record = loads(line)
            except orjson.JSONDecodeError as err:
                builder.problem("line-unparsable", f"not JSON: {err}", line=number)
                builder.omit("unparsable", "not-json", line=number)
                continue
            if isinstance(record, dict):
                out.append((number, record))
            else:
                builder.problem("line-unparsable", "not a JSON object", line=number)
                builder.omit("unparsable", "not-an-object", line=number)
    return out


def load_json(path: Path) -> Any:
    """One JSON document (ATIF trajectory, OpenHands event). A string that is not valid
    Unicode (a lone surrogate escape) is refused with its line, like any bad JSON: it
    could be neither stored nor printed.

    Raises:
        ImportFailure: `line-unparsable`, with the file and line.
    """
    import json

    import orjson

    if path.stat().st_size > MAX_SOURCE_LINE:
        raise ImportFailure(f"{path}: larger than {MAX_SOURCE_LINE} bytes",
                            code="line-unparsable", path=str(path))
    raw = path.read_bytes()
    try:
        return loads(raw)
    except orjson.JSONDecodeError as err:
        if "surrogate" in str(err) or "UTF-8" in str(err):
            raise ImportFailure(f"{path}: not valid JSON text: {err}", code="line-unparsable",
                                path=str(path), line=err.lineno) from None
        try:  # what orjson refuses but JSON readers accept: NaN, integers over 64 bits
            return json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # nested deeper than either reader goes
            raise ImportFailure(f"{path}: not JSON: {err}", code="line-unparsable",
                                path=str(path), line=err.lineno) from None


def image_block(data: Any, media_type: Any) -> dict[str, Any]:
    """An image with its bytes identified by hash (the bytes themselves are not kept)."""
    import base64
    import binascii

    attachment: dict[str, Any] = {"attachmentId": "unavailable", "mediaType": media_type}
    if isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=True)
            attachment = {"attachmentId": "sha256:" + hashlib.sha256(raw).hexdigest(),
                          "mediaType": media_type, "bytes": len(raw)}
        except (binascii.Error, ValueError):
            pass
    return {"type": "image", "attachment": attachment}


def text_blocks(content: Any) -> list[dict[str, Any]]:
    """A string as one text block; lists are kept (blocks of unknown types are allowed)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [dict(b) if isinstance(b, Mapping) else {"type": "text", "text": str(b)}
                for b in content]
    return [] if content is None else [{"type": "text", "text": str(content)}]


class Builder:
    """Writes an imported log event by event; every event is checked as it is appended."""

    def __init__(self, fmt: str, path: str, *, tombstones: bool = False) -> None:
        self.format = fmt
        self.path = path
        self.tombstones = tombstones
        self.time = 0
        self.session: Session | None = None
        self._pending: list[tuple[str, Any, dict[str, Any]]] = []
        self.turn = 0
        self.turn_open = False
        self.step = 0
        self.step_open = False
        self.step_key: Any = None
        self.call_seq: dict[str, int] = {}
        self.call_place: dict[str, tuple[int, int]] = {}
        self.answered: set[str] = set()
        self.origins: dict[int, dict[str, Any]] = {}
        self.notes: list[Problem] = []
        self.problems: list[Problem] = []
        self.compactions: list[dict[str, Any]] = []
        self.note_counts: Counter[str] = Counter()
        self.omitted: list[dict[str, Any]] = []
        self.last_place: str | None = None  # the last source record imported (see above)
        active = _BUILDERS.get()
        if active is not None:
            active.append(self)

    # -- findings ------------------------------------------------------------------

    def note(self, code: str, message: str, *, line: int | None = None,
             once: bool = False) -> None:
        if once and self.note_counts[code]:
            return
        self.note_counts[code] += 1
        self.notes.append(Problem("note", code, message, self.path, line))

    def problem(self, code: str, message: str, *, line: int | None = None) -> None:
        self.problems.append(Problem("error", code, message, self.path, line))

    def omit(self, reason: str, kind: Any, *, line: int | None = None, id: Any = None,
             file: str | None = None) -> None:
        """Record a source record the import leaves out, and why (a key of OMISSIONS)."""
        self.omitted.append({"reason": reason, "kind": str(kind), "file": file or self.path,
                             "line": line, "id": None if id is None else str(id)})
        if file is None:
            self.last_place = _place(None, line, id) or self.last_place

    def _omission_notes(self) -> None:
        """One note per reason: how many records, of which kinds, and where."""
        by_reason: dict[str, list[dict[str, Any]]] = {}
        for row in self.omitted:
            by_reason.setdefault(row["reason"], []).append(row)
        for reason, rows in by_reason.items():
            kinds = Counter(r["kind"] for r in rows).most_common()
            places = [f"line {r['line']}" if r["line"] is not None else str(r["id"])
                      for r in rows[:SHOWN_PLACES]]
            more = ", ..." if len(rows) > SHOWN_PLACES else ""
            self.note(reason, printable(
                f"{len(rows)} record(s) left out: {OMISSIONS.get(reason, reason)}; "
                f"{', '.join(f'{k} x{n}' for k, n in kinds)}; at {', '.join(places)}{more}"))

    # -- writing -------------------------------------------------------------------

    def start(self, header: Mapping[str, Any]) -> None:
        self.session = Session(str(header["id"]), header={
            **header, "delegationDepth": header.get("delegationDepth", 0)},
            clock=lambda: self.time)

    def append(self, kind: str, data: Any, origin: Mapping[str, Any] | None = None,
               **fields: Any) -> Event:
        """Append one event (`Session.append`'s checks and `fields`), remembering the
        source record it came from (`origin`)."""
        assert self.session is not None, "start() first"
        event = self.session.append(kind, data, **fields)
        if origin:
            self.origins[int(event["seq"])] = dict(origin)
            self.last_place = _place(origin) or self.last_place
        return event

    def at(self, time: int | None) -> None:
        """Advance the clock to a record's time (records without one keep the last)."""
        if time is not None:
            self.time = time

    def open_turn(self, origin: Mapping[str, Any] | None = None) -> None:
        self.close_turn("completed")
        self.turn += 1
        self.turn_open = True
        self.step = 0
        self.append("turn/start", {"turn": self.turn}, origin)

    def close_step(self) -> None:
        if self.step_open:
            self.append("step/end", {"turn": self.turn, "step": self.step})
            self.step_open = False
            self.step_key = None

    def close_turn(self, kind: str = "completed", *,
                   origin: Mapping[str, Any] | None = None, **reason: Any) -> None:
        """End the open turn; an `aborted` end needs its cause as `reason={"kind": ...}`
        (SPEC 7.3: a bare `aborted` reads as a legacy record)."""
        self.close_step()
        if self.turn_open:
            self.append("turn/end", {"turn": self.turn, "reason": {"kind": kind, **reason}},
                        origin)
            self.turn_open = False

    def user(self, message_id: str, content: Any, origin: Mapping[str, Any]) -> Event:
        """A real user prompt: a turn opener."""
        self.open_turn()
        return self.append("user/message", {"id": message_id, "role": "user",
                                            "content": text_blocks(content),
                                            "source": {"kind": "user"}}, origin,
                           surface_op="append")

    def context(self, message_id: str, content: Any, harness_origin: str,
                origin: Mapping[str, Any], *, in_step: bool = False) -> Event:
        """Context the other tool injected (a `harness` source)."""
        if not in_step:
            self.close_step()
        return self.append("context/message", {
            "id": message_id, "role": "user", "content": text_blocks(content),
            "source": {"kind": "harness", "harness": self.format, "origin": harness_origin}},
            origin, surface_op="append")

    def assistant(self, message_id: str, content: list[dict[str, Any]], *, provider: str,
                  model: str, step_key: Any, origin: Mapping[str, Any],
                  usage: Mapping[str, Any] | None = None, **source: Any) -> Event:
        """One assistant unit; consecutive units with one `step_key` share a step. Each
        tool-call block is followed by its `tool/call`."""
        if not self.turn_open:
            self.open_turn()
        if not self.step_open or step_key != self.step_key:
            self.close_step()
            self.step += 1
            self.step_open = True
            self.step_key = step_key
            self.append("step/start", {"turn": self.turn, "step": self.step})
        data: dict[str, Any] = {"turn": self.turn, "step": self.step, "message": {
            "id": message_id, "role": "assistant", "content": content,
            "source": {"kind": "model", "provider": provider or "unknown",
                       "model": model or "unknown",
                       **{k: v for k, v in source.items() if v is not None}}}}
        if usage:
            data["usage"] = dict(usage)
        event = self.append("assistant/message", data, origin, surface_op="append")
        for block in content:
            if block.get("type") == "tool-call":
                call = self.append("tool/call", {"turn": self.turn, "step": self.step,
                                                 "callId": block["id"],
                                                 "name": block.get("name", ""),
                                                 "arguments": block.get("arguments", "")})
                self.call_seq[block["id"]] = int(call["seq"])
                self.call_place[block["id"]] = (self.turn, self.step)
        return event

    def tool_result_data(self, message_id: str, call_id: str, content: Any,
                         is_error: bool) -> dict[str, Any]:
        turn, step = self.call_place.get(call_id, (self.turn, self.step))
        block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id,
                                 "content": text_blocks(content)}
        if is_error:
            block["isError"] = True
        return {"turn": turn, "step": step, "message": {
            "id": message_id, "role": "user", "source": {"kind": "tool", "callId": call_id},
            "content": [block]}}

    def tool_result(self, message_id: str, call_id: str, content: Any, is_error: bool,
                    origin: Mapping[str, Any]) -> Event:
        if not self.turn_open:
            self.open_turn()
        data = self.tool_result_data(message_id, call_id, content, is_error)
        self.answered.add(call_id)
        if call_id in self.call_seq:
            return self.append("tool/result", data, origin, surface_op="append",
                               source_event_seqs=[self.call_seq[call_id]])
        self.problem("orphan-tool-result", f"a result for call {call_id!r}, which was never "
                     f"seen", line=origin.get("line"))
        return self.append("tool/result", data, origin, surface_op="append")

    def lost_results(self, found: Mapping[str, Mapping[str, Any]]) -> None:
        """`tool-result-lost` for each tool call written whose result the source holds
        (`found`: call id -> `{file, line, id}` of the source record with the result) but
        which no `tool/result` answers."""
        for call_id in self.call_seq:
            where = found.get(call_id)
            if where is None or call_id in self.answered:
                continue
            self.problems.append(Problem("error", "tool-result-lost", printable(
                f"record {where.get('id')}: the result of tool call {call_id!r} is in the "
                f"source but not on the imported surface"),
                str(where.get("file") or self.path), where.get("line")))

    def _unanswered(self) -> None:
        """`unanswered-tool-call` for each call still without its result at a request
        point (contract.unanswered_tool_calls), located at the call's source record."""
        from ..contract import unanswered_tool_calls

        assert self.session is not None
        for finding in unanswered_tool_calls(self.session.events):
            at = finding.related if finding.related is not None else finding.seq
            origin = self.origins.get(at) or {}
            self.problems.append(Problem(
                "error", finding.rule, printable(
                    f"record {origin.get('id')}: {finding.message}"),
                str(origin.get("file") or self.path), origin.get("line"), finding.seq,
                "assistant/message"))

    # -- compactions ---------------------------------------------------------------

    def surface(self) -> list[int]:
        assert self.session is not None
        return list(self.session.surface.nodes)

    def event(self, seq: int) -> Event:
        assert self.session is not None
        return self.session.events[seq]

    def copy(self, seq: int) -> New:
        original = self.event(seq)
        return New(str(original["type"]), thaw(original["data"]), copy_of=seq,
                   origin=self.origins.get(seq, {}))

    def compaction(self, compaction_id: str, target: Sequence[Keep | New], *,
                   summary: list[dict[str, Any]] | None, imported: Mapping[str, Any],
                   kind: str = "summary",
                   origin: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Write one bracket: start (its origin the source record that states the
        manipulation), summary trace, the planned replaces and appends, end. Returns its
        row for `ImportResult.compactions`."""
        self.close_step()
        turn = self.turn if self.turn_open else None
        before = self.surface()
        start = self.append("compaction/start", {"compactionId": compaction_id, "turn": turn},
                            origin)
        ops = plan(before, target, self.copy, tombstones=self.tombstones)
        # The replaces address disjoint runs of the surface as it is now.
        shadowed = [s for op in ops if isinstance(op, Replace)
                    for s in before[before.index(op.start) : before.index(op.end) + 1]]
        restored = [op.item.copy_of for op in ops if op.item.copy_of is not None
                    and op.item.copy_of in shadowed]
        first = next((op for op in ops if isinstance(op, Replace)), None)
        summary_event = self.append("compaction/summary", {
            "compactionId": compaction_id, "summary": summary or [],
            "shadowedRange": {"start": first.start, "end": first.end} if first else None,
            "shadowedSeqs": shadowed, "shadowedTokenCount": None, "provider": None,
            "model": None, "restoredSeqs": restored,
            "imported": {"format": self.format, "kind": kind, **imported}})
        cite = [int(start["seq"]), int(summary_event["seq"])]
        tombstones = 0
        copied: dict[int, int] = {}
        for op in ops:
            item = op.item
            if item is TOMBSTONE:
                tombstones += 1
                item = New("assistant/message", {
                    "turn": self.turn, "step": 0, "message": {
                        "id": f"tombstone:{compaction_id}:"
                              f"{op.start if isinstance(op, Replace) else 0}",
                        "role": "assistant", "content": [],
                        "source": {"kind": "model", "provider": "surface-lab-import",
                                   "model": "tombstone"}}})
            sources = list(cite)
            if item.copy_of is not None:
                sources.append(item.copy_of)
            if isinstance(op, Replace):
                now = self.surface()
                run = now[now.index(op.start) : now.index(op.end) + 1]
                sources += [s for s in run if s not in sources]
                written = self.append(item.type, item.data, item.origin, surface_op={
                    "op": "replace", "start": op.start, "end": op.end},
                    source_event_seqs=sources)
            else:
                written = self.append(item.type, item.data, item.origin,
                                      surface_op="append", source_event_seqs=sources)
            if item.copy_of is not None:
                copied[item.copy_of] = int(written["seq"])
        self.append("compaction/end", {"compactionId": compaction_id, "turn": turn})
        copies = sum(1 for op in ops if op.item.copy_of is not None)
        if copies:
            self.note("restored-by-copy", f"{compaction_id}: {copies} kept item(s) re-appended "
                      f"as copies")
        if tombstones:
            self.note("tombstone", f"{compaction_id}: {tombstones} tombstone(s) stand in for "
                      f"deleted runs")
        row = {"compaction_id": compaction_id, "kind": kind, "start_seq": int(start["seq"]),
               "shadowed_seqs": shadowed, "restored_seqs": restored, "replaces": sum(
                   isinstance(op, Replace) for op in ops), "copies": copies,
               "tombstones": tombstones, "copied": copied,
               **{f"imported_{k}": v for k, v in imported.items()
                  if isinstance(v, (str, int, float, bool))}}
        self.compactions.append(row)
        return row

    # -- result --------------------------------------------------------------------

    def result(self, sources: list[Path], selection: Mapping[str, Any], *,
               finished: bool, strict: bool = False,
               empty_reason: str | None = None) -> ImportResult:
        """The import's result; with `strict`, its first problem is raised instead. An
        import that puts nothing on the surface carries an `empty-import` problem saying
        why (`empty_reason`, else the omission counts)."""
        assert self.session is not None
        if finished:
            self.close_turn("completed")
        elif self.turn_open:
            self.note("final-turn-open", "the source does not show the last turn finished; "
                      "read_log shows closers for it")
        self._omission_notes()
        self._unanswered()
        result = ImportResult(
            self.format, self.session.header, list(self.session.events),
            sources=[{"path": str(p), "sha256": sha256_file(p)} for p in sources],
            selection=dict(selection), origins=self.origins, notes=self.notes,
            problems=self.problems, compactions=self.compactions, omitted=self.omitted)
        if result.is_empty:
            self.problem("empty-import", empty_reason or self._empty_reason())
        if strict and self.problems:
            first = self.problems[0]
            raise ImportFailure(first.message, code=first.code, path=self.path,
                                line=first.line)
        return result

    def _empty_reason(self) -> str:
        kinds = Counter(r["reason"] for r in self.omitted).most_common()
        if not kinds:
            return "the source holds no record the model saw; nothing to import"
        left = ", ".join(f"{n} {reason}" for reason, n in kinds)
        return (f"no record of the source reaches the model ({left} record(s) left out); "
                f"nothing to import")
