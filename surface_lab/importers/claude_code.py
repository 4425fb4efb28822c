"""Claude Code JSONL (IMPORTERS.md section 3): rebuild the path Claude Code resumes from,
across compact boundaries, and write each compaction as one bracket."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..events import mapping_at
from ..jsonvalue import thaw
from .common import (
    Builder,
    ImportFailure,
    ImportResult,
    SubagentLink,
    compact_json,
    image_block,
    no_foreign_errors,
    parse_time,
    printable,
    read_jsonl,
)
from .planner import Keep, New

__all__ = ["import_claude_code", "looks_like_claude_code", "subagent_files"]

CHAIN_TYPES = {"user", "assistant", "system", "attachment", "progress"}
# Attachment types Claude Code renders to nothing for the model (versioned by hand:
# as of Claude Code 2.1.x).
NO_OP_ATTACHMENTS = {"autocheckpointing", "background_task_status", "todo", "task_progress",
                     "ultramemory", "compaction_reminder", "current_session_memory",
                     "companion_intro", "pen_mode_enter", "pen_mode_exit"}
LOCAL_COMMAND = ("<local-command-caveat>", "<local-command-stdout>", "<local-command-stderr>",
                 "<bash-stdout>", "<bash-stderr>")
ENDING = {"end_turn": "completed", "stop_sequence": "completed", "max_tokens": "max-tokens"}


def looks_like_claude_code(records: list[dict[str, Any]]) -> bool:
    return any("uuid" in r and "parentUuid" in r and "sessionId" in r for r in records[:50])


def _content(content: Any, *, assistant: bool = False) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for index, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            out.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "thinking":
            out.append({"type": "reasoning", "text": str(block.get("thinking", ""))})
        elif kind == "redacted_thinking":
            out.append({"type": "reasoning", "text": "", "redacted": True})
        elif kind == "tool_use" and assistant:
            out.append({"type": "tool-call", "id": str(block.get("id") or f"#{index}"),
                        "name": str(block.get("name", "")),
                        "arguments": compact_json(block.get("input", {}))})
        elif kind == "image":
            source = mapping_at(block, "source")
            out.append(image_block(source.get("data"), source.get("media_type")))
        else:
            out.append({**{k: v for k, v in block.items() if k != "type"},
                        "type": f"anthropic:{kind}"})
    return out


def _blocks(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = mapping_at(record, "message").get("content")
    return ([c for c in content if isinstance(c, Mapping)] if isinstance(content, list)
            else [])


def _text_of(record: Mapping[str, Any]) -> str:
    message = mapping_at(record, "message")
    content = message.get("content")
    if isinstance(content, str):
        return content
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            return str(block.get("text", ""))
    return ""


class _Graph:
    """The chain records of one file (and of sibling files pulled in for a cross-file
    continuation), with Claude Code's loader rules."""

    def __init__(self, b: Builder, path: Path, lines: list[tuple[int, dict[str, Any]]],
                 project_dir: Path | None = None) -> None:
        self.b = b
        self.path = path
        self.project_dir = project_dir
        self.records: dict[str, dict[str, Any]] = {}
        self.line: dict[str, int] = {}
        self.file: dict[str, Path] = {}
        self.order: dict[str, int] = {}
        self.metadata: list[tuple[int, str]] = []  # (line, type) of the primary file
        self.duplicates: list[tuple[int, str, str]] = []  # (line, uuid, type) left out
        self.extra_files: list[Path] = []
        self._searched: set[str] = set()
        self._add(path, lines, primary=True)
        if self.duplicates:
            b.problem("duplicate-id", f"{len(self.duplicates)} chain record(s) repeat an "
                      f"earlier uuid; the last line of each is used")

    def _add(self, path: Path, lines: list[tuple[int, dict[str, Any]]], *,
             primary: bool) -> None:
        for number, record in lines:
            uuid = record.get("uuid")
            kind = record.get("type")  # an object or a list is no type (nor hashable)
            if not isinstance(kind, str) or kind not in CHAIN_TYPES or not isinstance(uuid, str):
                if primary:
                    self.metadata.append((number, str(record.get("type"))))
                continue
            if uuid in self.records:
                if not primary and self.file[uuid] != path:
                    continue  # the file being imported wins over a sibling's copy
                if primary:
                    self.duplicates.append((self.line[uuid], uuid,
                                            str(self.records[uuid].get("type"))))
            self.records[uuid] = record  # last wins, as Claude Code's map-based loader
            self.line[uuid] = number
            self.file[uuid] = path
            self.order[uuid] = len(self.order)
        self._index()

    def _index(self) -> None:
        self.kids: dict[str, list[str]] = {}
        self.by_message: dict[str, list[str]] = {}
        self._message_ids: dict[str, str] = {}
        self.calls_of: dict[str, list[str]] = {}  # assistant record -> its tool_use ids
        self.results_for: dict[str, list[str]] = {}  # tool_use id -> result records
        for uuid in sorted(self.records, key=self.order.__getitem__):
            parent = self.parent(uuid)
            if parent is not None:
                self.kids.setdefault(parent, []).append(uuid)
            record = self.records[uuid]
            message = mapping_at(record, "message")
            message_id = message.get("id")
            content = message.get("content")
            blocks = ([c for c in content if isinstance(c, Mapping)]
                      if isinstance(content, list) else [])
            if record.get("type") == "assistant":
                if isinstance(message_id, str):
                    self._message_ids[uuid] = message_id
                    self.by_message.setdefault(message_id, []).append(uuid)
                self.calls_of[uuid] = [str(c["id"]) for c in blocks
                                       if c.get("type") == "tool_use"
                                       and isinstance(c.get("id"), str)]
            elif record.get("type") == "user":
                for call in dict.fromkeys(str(c.get("tool_use_id")) for c in blocks
                                          if c.get("type") == "tool_result"):
                    self.results_for.setdefault(call, []).append(uuid)

    def parent(self, uuid: str) -> str | None:
        """The parent, bridging legacy progress records."""
        seen = {uuid}
        parent = self.records[uuid].get("parentUuid")
        while (isinstance(parent, str) and parent in self.records
                and self.records[parent].get("type") == "progress" and parent not in seen):
            seen.add(parent)
            parent = self.records[parent].get("parentUuid")
        return parent if isinstance(parent, str) else None

    def results_of(self, uuid: str) -> list[str]:
        """The tool_use ids a user record answers."""
        return [str(c.get("tool_use_id")) for c in _blocks(self.records[uuid])
                if c.get("type") == "tool_result"]

    def message_id(self, uuid: str) -> str | None:
        """The API response id of an assistant record (streaming writes one record per
        content block, all with this id)."""
        return self._message_ids.get(uuid)

    def is_result(self, uuid: str) -> bool:
        record = self.records[uuid]
        return record.get("type") == "user" and _is_tool_results(mapping_at(record, "message"))

    def is_parallel_result(self, uuid: str) -> bool:
        """A tool-result record that ends a branch under one block of a response from
        which the conversation went on through another record: a parallel tool call's
        result, which Claude Code brings back beside its response rather than treating
        as a leaf."""
        parent = self.parent(uuid)
        if self.kids.get(uuid) or parent not in self.records or not self.is_result(uuid):
            return False
        group = self.by_message.get(self.message_id(str(parent)) or "", [])
        return len(group) > 1 and any(
            kid != uuid and kid not in group and self.kids.get(kid)
            for member in group for kid in self.kids.get(member, []))

    def continues(self, uuid: str) -> bool:
        """True when a user or assistant record descends from `uuid`: the conversation
        went on from it, so a dead-end record under it (a turn_duration, a hook summary)
        does not make it a leaf."""
        stack, seen = list(self.kids.get(uuid, [])), set()
        while stack:
            kid = stack.pop()
            if kid in seen:
                continue
            seen.add(kid)
            if self.records[kid].get("type") in ("user", "assistant"):
                return True
            stack += self.kids.get(kid, [])
        return False

    def resolve(self, uuid: str) -> bool:
        """Look for a record in the other transcripts of the project folder (a session
        continued in a new file); True when it was found and its file indexed."""
        if self.project_dir is None or uuid in self._searched:
            return uuid in self.records
        self._searched.add(uuid)
        needle = uuid.encode()
        folder = self.project_dir.resolve()
        for other in sorted(self.project_dir.glob("*.jsonl")):
            if (other.is_symlink() or not other.is_file() or other.resolve().parent != folder
                    or other.resolve() == self.path.resolve() or other in self.extra_files):
                continue
            if needle not in other.read_bytes():
                continue
            side = Builder("claude-code", str(other))
            lines = read_jsonl(other, side)
            self.b.problems += side.problems
            self.extra_files.append(other)
            self._add(other, lines, primary=False)
            if uuid in self.records:
                self.b.note("cross-file-continuation", printable(
                    f"the history before {uuid} continues in {other.name}"))
                return True
        return False


def _kept(g: _Graph, b: Builder, boundary: dict[str, Any]) -> tuple[list[str], str | None, str]:
    """K_B, the anchor and where K_B came from. The segment walk (`preservedSegment` tail
    back to head) is the order the model sees; `preservedMessages.allUuids` adds records
    the walk does not reach (results hanging off a parallel block). `preservedMessages.
    uuids` is only a fallback: Claude Code 2.1.15x+ writes a subset there."""
    meta = mapping_at(boundary, "compactMetadata")
    preserved = mapping_at(meta, "preservedMessages")
    every = ([u for u in preserved.get("allUuids") or [] if isinstance(u, str)]
             if isinstance(preserved.get("allUuids"), list) else [])
    segment = meta.get("preservedSegment")
    if isinstance(segment, Mapping):
        walk: list[str] = []
        at, seen = segment.get("tailUuid"), set()
        while isinstance(at, str) and at in g.records and at not in seen:
            seen.add(at)
            walk.append(at)
            if at == segment.get("headUuid"):
                kept = walk[::-1]
                kept += [u for u in every if u in g.records and u not in seen]
                anchor = segment.get("anchorUuid") or preserved.get("anchorUuid")
                return kept, anchor if isinstance(anchor, str) else None, "preservedSegment"
            at = g.parent(at)
        if not every and not isinstance(preserved.get("uuids"), list):
            b.problem("preserved-segment-unresolved", printable(
                f"boundary {boundary.get('uuid')}: the preserved segment cannot be walked; "
                f"nothing is kept"), line=g.line.get(str(boundary.get("uuid"))))
            return [], None, ""
        # the walk broke (a record re-parented on disk): the listed uuids, in their order
    anchor = preserved.get("anchorUuid")
    if not isinstance(anchor, str) and isinstance(segment, Mapping):
        anchor = segment.get("anchorUuid")
    anchor = anchor if isinstance(anchor, str) else None
    if every:
        return every, anchor, "allUuids"
    if isinstance(preserved.get("uuids"), list):
        return ([u for u in preserved["uuids"] if isinstance(u, str)], anchor,
                "preservedMessages")
    return [], None, ""


def _inferred_parent(g: _Graph, boundary: str) -> str | None:
    """The main chain's last user or assistant record before `boundary` in file order:
    where Claude Code's writer stood when it wrote a boundary whose logical parent is not
    in the file."""
    order = g.order[boundary]
    best: str | None = None
    for uuid, record in g.records.items():
        if (g.file[uuid] != g.file[boundary] or g.order[uuid] >= order
                or record.get("isSidechain") or record.get("type") not in ("user", "assistant")):
            continue
        if best is None or g.order[uuid] > g.order[best]:
            best = uuid
    return best


def _path(g: _Graph, b: Builder, leaf: str, *, subagent: bool) -> list[str]:
    kept: dict[str, tuple[list[str], str | None, str]] = {}

    def index() -> tuple[dict[str, Any], dict[str, Any]]:
        """The boundaries and the preserved heads, again once a sibling file joined."""
        boundaries = {u: r for u, r in g.records.items()
                      if r.get("subtype") == "compact_boundary"}
        for u, r in boundaries.items():
            if u not in kept:
                kept[u] = _kept(g, b, r)
        return boundaries, {k[0][0]: (u, k[1]) for u, k in kept.items() if k[0]}

    boundaries, heads = index()
    walk: list[str] = []
    crossed: set[str] = set()
    seen: set[str] = set()
    at: str | None = leaf
    while at is not None:
        if at in seen:
            b.problem("cycle", f"record {at} is its own ancestor", line=g.line.get(at))
            break
        if subagent and walk and (at not in g.records
                                  or not g.records[at].get("isSidechain")):
            # a subagent's chain starts under its Task call in the parent session
            b.note("subagent-root", printable(
                f"the subagent's first record hangs off {at} in its parent session"))
            break
        if at not in g.records:
            b.problem("dangling-parent", printable(f"parent {at} is not in the file"))
            break
        seen.add(at)
        walk.append(at)
        record = g.records[at]
        if at in boundaries:
            crossed.add(at)
            kept_list = [u for u in kept[at][0] if u in g.records]
            if kept_list:
                # K_B at its pre-compaction place, even if the walk already met a record
                # of it after the boundary (that later copy is dropped below).
                walk += list(reversed(kept_list))
                seen.update(kept_list)
                at = g.parent(kept_list[0])
                continue
            logical = record.get("logicalParentUuid")
            if isinstance(logical, str):
                if logical in g.records:
                    at = logical
                    continue
                if g.resolve(logical):  # a sibling transcript joined the graph
                    boundaries, heads = index()
                    at = logical
                    continue
                inferred = _inferred_parent(g, at)
                if inferred is not None and inferred not in seen:
                    b.note("logical-parent-inferred", printable(
                        f"boundary {at}: its logical parent {logical} is not in the file; "
                        f"it continues the main chain's last record before it, "
                        f"{inferred}"), line=g.line.get(at))
                    at = inferred
                    continue
                hint = "" if g.project_dir is not None else (
                    "; project_dir= looks for it in the project's other transcripts")
                b.problem("boundary-without-logical-parent", printable(
                    f"boundary {at}: its logical parent {logical} is not in this file"
                    f"{hint}; the history before it is not imported"), line=g.line.get(at))
                break
            boundary_uuid = at
            at = g.parent(at)
            if at is None:
                inferred = _inferred_parent(g, boundary_uuid)
                if inferred is not None and inferred not in seen:
                    b.note("logical-parent-inferred", printable(
                        f"boundary {boundary_uuid}: no logical parent; it continues the main "
                        f"chain's last record before it, {inferred}"),
                        line=g.line.get(boundary_uuid))
                    at = inferred
                    continue
                b.problem("boundary-without-logical-parent", printable(
                    f"boundary {boundary_uuid}: the history before it is not in this "
                    f"file"), line=g.line.get(boundary_uuid))
            continue
        if at in heads and heads[at][0] not in crossed and heads[at][1] in g.records:
            at = heads[at][1]  # Claude Code relinks the preserved head to its anchor
            continue
        at = g.parent(at)
    path = walk[::-1]
    # A preserved record sits at its pre-compaction position; a later copy is skipped.
    out, placed = [], set()
    for uuid in path:
        if uuid not in placed:
            out.append(uuid)
            placed.add(uuid)
    return out


def _responses(g: _Graph, path: list[str], until: str | None = None
               ) -> tuple[list[str], int]:
    """Rebuild each response on the path and its results as Claude Code does on resume:
    all records of one `message.id` (one per content block, written in file order) at the
    place of the first one the path meets, then the results of its tool calls by
    `tool_use_id` (the path's own result record when it has one, else the latest in the
    file), wherever progress, hook and attachment records left them in the parentUuid
    chain. With `until` (a leaf the caller picked), nothing written after it in its file
    is brought back. Returns the path and how many records it brought back."""
    on = set(path)

    def written(uuid: str) -> bool:
        return (until is None or uuid in on or g.file[uuid] != g.file[until]
                or g.order[uuid] <= g.order[until])

    out: list[str] = []
    placed: set[str] = set()
    for uuid in path:
        if uuid in placed:
            continue
        message_id = g.message_id(uuid)
        if message_id is None:
            out.append(uuid)
            placed.add(uuid)
            continue
        side = bool(g.records[uuid].get("isSidechain"))
        members = [u for u in g.by_message.get(message_id, [uuid]) if u not in placed
                   and bool(g.records[u].get("isSidechain")) == side and written(u)]
        out += members
        placed.update(members)
        hooked: list[str] = []  # after all the results: a tool result comes first
        for member in members:
            for call in g.calls_of.get(member, []):
                found = [r for r in g.results_for.get(call, [])
                         if bool(g.records[r].get("isSidechain")) == side and written(r)]
                if not found:
                    continue
                chosen = next((r for r in found if r in on), found[-1])
                if chosen not in placed:
                    out.append(chosen)
                    placed.add(chosen)
                    if chosen not in on:
                        hooked += _attachments_under(g, chosen, on, placed)
        out += hooked
    return out, sum(1 for u in out if u not in on)


def _attachments_under(g: _Graph, result: str, on: set[str], placed: set[str]) -> list[str]:
    """The attachment records (hook output, diagnostics) hanging under a result the chain
    does not reach, through progress records: context the model received with it."""
    out: list[str] = []
    stack = list(reversed(g.kids.get(result, [])))
    while stack:
        kid = stack.pop()
        if kid in on or kid in placed or g.records[kid].get("type") != "attachment":
            continue
        out.append(kid)
        placed.add(kid)
        stack += reversed(g.kids.get(kid, []))
    return out


def _default_leaf(g: _Graph) -> tuple[str | None, list[dict[str, Any]],
                                     list[dict[str, Any]]]:
    """Claude Code's resume rule: terminal records walked back to their nearest user or
    assistant record, the latest wins. Parallel tool results are not leaves, nor is a
    record the conversation went on from (reached from a dead-end system record or
    attachment under it). Returns the main leaf, the main candidates and the sidechain
    (subagent) candidates."""
    candidates: dict[str, tuple[int, int]] = {}
    side: dict[str, tuple[int, int]] = {}
    for uuid in g.records:
        if uuid in g.kids or g.file[uuid] != g.path or g.is_parallel_result(uuid):
            continue
        at, seen = uuid, set()
        while (at in g.records and g.records[at].get("type") not in ("user", "assistant")
                and at not in seen):
            seen.add(at)
            parent = g.parent(at)
            if parent is None:
                break
            at = parent
        record = g.records.get(at)
        if (record is None or record.get("type") not in ("user", "assistant")
                or (at != uuid and g.continues(at))):
            continue
        key = (parse_time(record.get("timestamp")) or 0, g.order[at])
        (side if record.get("isSidechain") else candidates)[at] = key

    def rows(found: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
        return [{"uuid": u, "time": t, "line": g.line[u],
                 **({"agentId": g.records[u]["agentId"]} if isinstance(
                     g.records[u].get("agentId"), str) else {})}
                for u, (t, _) in found.items()]

    chosen = max(candidates, key=candidates.__getitem__) if candidates else None
    return chosen, rows(candidates), rows(side)


@no_foreign_errors
def import_claude_code(source: str | Path, *, leaf: str | None = None,
                       tombstones: bool = False, strict: bool = False,
                       keep_api_errors: bool = False,
                       project_dir: str | Path | None = None,
                       subagents: bool = False) -> ImportResult:
    """Import a Claude Code session transcript, or a subagent's.

    Args:
        source: the `<sessionId>.jsonl` file, or a subagent's `agent-<id>.jsonl`.
        leaf: a record uuid; by default Claude Code's resume rule (the latest
            non-sidechain user or assistant leaf; in a file of sidechain records only,
            the latest sidechain leaf). A sidechain leaf imports that subagent as a
            session of its own (`origin: "subagent"`, `parentSession`, depth 1).
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
        keep_api_errors: keep Claude Code's own API error notices as assistant messages.
        project_dir: the project folder of the session (usually the source's folder);
            a compaction whose logical parent is in another transcript there is
            followed into it. By default the walk stops there
            (`boundary-without-logical-parent`).
        subagents: also import each subagent file of the session
            (`<session>/subagents/agent-*.jsonl` beside it) into its
            `ImportResult.subagents` link; the links themselves are always listed.

    Raises:
        ImportFailure: `format-unsupported` for a file that is not a transcript,
            `leaf-unknown` for a leaf that is not in it.
    """
    path = Path(source)
    b = Builder("claude-code", str(path), tombstones=tombstones)
    lines = read_jsonl(path, b)
    if not looks_like_claude_code([r for _, r in lines]):
        raise ImportFailure(f"{path}: not a Claude Code transcript (no uuid/parentUuid/"
                            f"sessionId records)", code="format-unsupported", path=str(path))
    g = _Graph(b, path, lines, Path(project_dir) if project_dir is not None else None)
    chosen, leaves, side_leaves = _default_leaf(g)
    if leaf is not None:
        if leaf not in g.records:
            raise ImportFailure(f"{path}: no record {leaf!r} to use as the leaf",
                                code="leaf-unknown", path=str(path))
        chosen = leaf
    elif chosen is None and side_leaves:
        chosen = max(side_leaves, key=lambda c: (c["time"], g.order[c["uuid"]]))["uuid"]
    subagent = chosen is not None and bool(g.records[chosen].get("isSidechain"))
    uuids = _path(g, b, chosen, subagent=subagent) if chosen is not None else []
    walked = set(uuids)
    uuids, recovered = _responses(g, uuids, chosen if leaf is not None else None)
    if recovered:
        b.note("parallel-tool-results", f"{recovered} record(s) of responses and their tool "
               f"results (blocks and results the parentUuid chain does not reach) brought "
               f"back beside their response, as Claude Code does on resume")
    # a result the rebuild brought back beside its response is no other leaf
    brought = set(uuids) - walked
    leaves = [c for c in leaves if c["uuid"] not in brought]
    side_leaves = [c for c in side_leaves if c["uuid"] not in brought]
    others = len(side_leaves if subagent else leaves) - (1 if chosen else 0)
    b.note("leaf-choice", printable(
        f"imported the path to {chosen} ({len(uuids)} records); {max(others, 0)} other "
        f"leaf candidate(s)" + (f"; {len(side_leaves)} subagent leaf candidate(s) "
                                f"(import one with --leaf UUID)" if side_leaves and not
                                subagent else "")))
    _omissions(g, b, set(uuids), subagent)
    head = g.records[chosen] if chosen else {}
    session_id = str(head.get("sessionId") or "") or path.stem
    cwd = head.get("cwd")
    b.at(next((t for u in uuids if (t := parse_time(g.records[u].get("timestamp")))), 0))
    header: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": b.time}
    if isinstance(cwd, str) and cwd.startswith("/"):
        header["cwd"] = cwd
    if subagent:
        agent = head.get("agentId")
        header["id"] = f"agent-{agent}" if isinstance(agent, str) and agent else path.stem
        header.update(parentSession=session_id, origin="subagent", delegationDepth=1)
        b.note("subagent-session", printable(
            f"imported subagent {header['id']} as a session of its own (parent session "
            f"{session_id})"))
    b.start(header)
    unit: dict[str, int] = {}
    pending: dict[str, Any] | None = None
    attachments = 0
    last: dict[str, Any] | None = None
    for uuid in uuids:
        record = g.records[uuid]
        number = g.line[uuid]
        file = str(g.file[uuid])
        origin = {"file": file, "line": number, "id": uuid}
        b.at(parse_time(record.get("timestamp")))
        kind = record.get("type")
        message = mapping_at(record, "message")
        if kind == "system" and record.get("subtype") == "compact_boundary":
            if pending is not None:
                _flush_boundary(b, g, pending, unit, None)
            kept_list, anchor, where = _kept(g, b, record)
            pending = {"record": record, "kept": kept_list, "anchor": anchor, "where": where,
                       "origin": origin}
            continue
        if kind == "user" and record.get("isCompactSummary"):
            summary = New("user/message", {
                "id": uuid, "role": "user", "content": _content(message.get("content")),
                "source": {"kind": "plugin", "plugin": "compact",
                           "compactionId": (pending or {}).get("record", {}).get("uuid", uuid),
                           "importedFrom": "claude-code"}}, origin=origin)
            _flush_boundary(b, g, pending, unit, summary, summary_uuid=uuid)
            pending = None
            continue
        if kind == "system" and record.get("subtype") == "microcompact_boundary":
            _microcompact(b, record, unit, origin)
            continue
        if kind in ("system", "progress"):
            b.omit("not-model-visible", f"{kind}:{record.get('subtype')}" if kind == "system"
                   else kind, line=number, id=uuid, file=file)
            continue
        if kind == "attachment":
            attachment = mapping_at(record, "attachment")
            a_type = str(attachment.get("type", "unknown"))
            if a_type in NO_OP_ATTACHMENTS:
                b.omit("not-model-visible", f"attachment:{a_type}", line=number, id=uuid,
                       file=file)
                continue
            attachments += 1
            text = f'<attachment type="{a_type}">{compact_json(attachment)}</attachment>'
            unit[uuid] = int(b.context(uuid, text, f"attachment:{a_type}", origin)["seq"])
            continue
        if pending is not None and kind == "user" and not _is_tool_results(message):
            _flush_boundary(b, g, pending, unit, None)
            pending = None
        if kind == "assistant":
            if record.get("isApiErrorMessage") and not keep_api_errors:
                b.omit("api-error-notice", "assistant", line=number, id=uuid, file=file)
                continue
            last = record
            model = str(message.get("model") or "unknown")
            provider = "claude-code" if model == "<synthetic>" else "anthropic"
            content = _content(message.get("content"), assistant=True)
            for block in content:
                if block["type"] == "tool-call" and block["id"].startswith("#"):
                    b.problem("tool-call-without-id", f"record {uuid}: tool_use block "
                              f"{block['id'][1:]} has no id", line=number)
                    block["id"] = f"toolu-missing:{uuid}{block['id']}"
            usage = mapping_at(message, "usage")
            mapped = {k2: usage[k1] for k1, k2 in (
                ("input_tokens", "inputTokens"), ("output_tokens", "outputTokens"),
                ("cache_read_input_tokens", "cacheReadTokens"),
                ("cache_creation_input_tokens", "cacheWriteTokens")) if isinstance(
                    usage.get(k1), int)}
            step_key = message.get("id") or record.get("requestId") or uuid
            unit[uuid] = int(b.assistant(
                uuid, content, provider=provider, model=model, step_key=step_key,
                origin=origin, usage=mapped or None,
                responseId=message.get("id") if isinstance(message.get("id"), str) else None,
                requestId=record.get("requestId") if isinstance(record.get("requestId"),
                                                                str) else None)["seq"])
            for field_name in ("supersedesUuids", "retractedMessageUuids"):
                if record.get(field_name):
                    b.problem("retraction-not-applied", f"record {uuid}: {field_name} is "
                              f"not applied", line=number)
            continue
        if kind != "user":
            b.omit("not-model-visible", kind, line=number, id=uuid, file=file)
            continue
        last = record
        raw = message.get("content")
        if _is_tool_results(message):
            parts: list[Any] = raw if isinstance(raw, list) else []
            results = [c for c in parts if isinstance(c, Mapping)
                       and c.get("type") == "tool_result"]
            many = len(results) > 1
            for k, result_block in enumerate(results):
                block = dict(result_block)
                call_id = str(block.get("tool_use_id") or record.get("sourceToolUseID") or "")
                unit[f"{uuid}#{k}" if many else uuid] = int(b.tool_result(
                    f"{uuid}#{k}" if many else uuid, call_id, _content(block.get("content")),
                    bool(block.get("is_error")), origin)["seq"])
            extra = [c for c in parts if isinstance(c, Mapping)
                     and c.get("type") != "tool_result"]
            if extra:
                unit[f"{uuid}#extra"] = int(b.context(
                    f"{uuid}#extra", _content(extra), "tool-result-extra", origin,
                    in_step=True)["seq"])
            continue
        text = _text_of(record)
        origin_kind = record.get("origin", {}).get("kind") if isinstance(
            record.get("origin"), Mapping) else None
        if record.get("isMeta"):
            unit[uuid] = int(b.context(uuid, _content(raw), "meta", origin)["seq"])
        elif text.startswith(LOCAL_COMMAND):
            unit[uuid] = int(b.context(uuid, _content(raw), "local-command",
                                       origin)["seq"])
        elif origin_kind not in (None, "human"):
            unit[uuid] = int(b.context(uuid, _content(raw), f"origin:{origin_kind}",
                                       origin)["seq"])
        else:
            unit[uuid] = int(b.user(uuid, _content(raw), origin)["seq"])
    if pending is not None:
        _flush_boundary(b, g, pending, unit, None)
    b.lost_results(_source_results(g, subagent))
    if attachments:
        b.note("approximate-attachment", f"{attachments} attachment(s) rendered as "
               f"approximate context messages")
    stop = mapping_at(last, "message").get("stop_reason") if last else None
    if (last is not None and last.get("type") == "assistant" and isinstance(stop, str)
            and stop in ENDING):
        b.close_turn(ENDING[str(stop)])
    selection = {"leaf": chosen, "leaves": side_leaves if subagent else leaves,
                 "subagents": [] if subagent else side_leaves}
    links = [] if subagent else _subagents(g, b, path, imported=subagents)
    result = b.result([path, *g.extra_files], selection, finished=False, strict=strict,
                      empty_reason=_empty_reason(g, b))
    result.subagents = links
    return result


def subagent_files(path: Path) -> list[Path]:
    """The subagent transcripts Claude Code keeps for session file `path`:
    `<session-stem>/subagents/agent-*.jsonl` beside it (regular files inside that folder
    only; a symlink out of it is not followed)."""
    folder = path.parent / path.stem / "subagents"
    if folder.is_symlink() or not folder.is_dir():
        return []
    inside = folder.resolve()
    return [f for f in sorted(folder.glob("agent-*.jsonl"))
            if not f.is_symlink() and f.is_file() and f.resolve().parent == inside]


def _subagents(g: _Graph, b: Builder, path: Path, *, imported: bool) -> list[SubagentLink]:
    """Link each subagent file to what started it, as Claude Code does: the Task call
    whose result names the agent (`toolUseResult.agentId`), else the call whose prompt is
    the subagent's first prompt; a compaction's summarizer (`agent-acompact-*`) to the
    first boundary at or after its start."""
    by_agent: dict[str, str] = {}
    by_prompt: dict[str, str] = {}
    boundaries: list[tuple[int, str]] = []
    for uuid, record in g.records.items():
        if g.file[uuid] != path or record.get("isSidechain"):
            continue
        if record.get("subtype") == "compact_boundary":
            boundaries.append((parse_time(record.get("timestamp")) or 0, uuid))
        agent = mapping_at(record, "toolUseResult").get("agentId")
        if record.get("type") == "user" and isinstance(agent, str):
            for call in g.results_of(uuid):
                by_agent.setdefault(agent, call)
        for block in _blocks(record) if record.get("type") == "assistant" else []:
            prompt = mapping_at(block, "input").get("prompt")
            if (block.get("type") == "tool_use" and isinstance(prompt, str)
                    and isinstance(block.get("id"), str)):
                by_prompt.setdefault(prompt, str(block["id"]))
    links: list[SubagentLink] = []
    for file in subagent_files(path):
        side = Builder("claude-code", str(file))
        lines = read_jsonl(file, side)
        records = [r for _, r in lines if isinstance(r.get("uuid"), str)]
        agent = next((r["agentId"] for r in records if isinstance(r.get("agentId"), str)),
                     file.stem.removeprefix("agent-"))
        link = SubagentLink(str(file), agent, "compaction" if agent.startswith("acompact")
                            else "task")
        if link.role == "compaction":
            start = next((t for r in records if (t := parse_time(r.get("timestamp")))), 0)
            after = sorted(t_u for t_u in boundaries if t_u[0] >= start)
            if after:
                link.compaction_id, link.matched_by = after[0][1], "time"
        else:
            first = next((r for r in records if r.get("type") == "user"), None)
            prompt = _text_of(first) if first is not None else ""
            if agent in by_agent:
                link.call_id, link.matched_by = by_agent[agent], "agentId"
            elif prompt in by_prompt:
                link.call_id, link.matched_by = by_prompt[prompt], "prompt"
            if link.call_id is not None:
                link.call_seq = b.call_seq.get(link.call_id)
        if link.matched_by is None:
            b.note("subagent-unlinked", printable(
                f"subagent file {file.name}: no {link.role} of the session started it"))
        if imported:
            link.result = import_claude_code(file)
        links.append(link)
    if links:
        b.note("subagents", printable(
            f"{len(links)} subagent file(s) beside the session: " + ", ".join(
                f"{Path(k.path).name} ({k.role}"
                + (f", call {k.call_id}" if k.call_id else "")
                + (f", compaction {k.compaction_id}" if k.compaction_id else "") + ")"
                for k in links) + ("" if imported else "; subagents=True imports them")))
    return links


def _source_results(g: _Graph, subagent: bool) -> dict[str, dict[str, Any]]:
    """Every tool result the source holds on the imported side (main chain or
    sidechain), by call id: where the latest record with it is."""
    out: dict[str, dict[str, Any]] = {}
    for call, records in g.results_for.items():
        found = [r for r in records if bool(g.records[r].get("isSidechain")) == subagent]
        if found:
            out[call] = {"file": str(g.file[found[-1]]), "line": g.line[found[-1]],
                         "id": found[-1]}
    return out


def _omissions(g: _Graph, b: Builder, on_path: set[str], subagent: bool) -> None:
    """Every record of the file that is not on the imported path, and why."""
    for number, kind in g.metadata:
        b.omit("not-model-visible", kind, line=number)
    for number, uuid, kind in g.duplicates:
        b.omit("duplicate", kind, line=number, id=uuid)
    for uuid, record in g.records.items():
        if uuid in on_path or g.file[uuid] != g.path:
            continue
        kind = str(record.get("type"))
        if kind == "progress" or (kind == "system"
                                  and record.get("subtype") != "compact_boundary"):
            reason = "not-model-visible"  # never sent, on any branch
        elif bool(record.get("isSidechain")) != subagent:
            reason = "off-branch" if subagent else "sidechain"
        else:
            reason = "off-branch"
        b.omit(reason, kind, line=g.line[uuid], id=uuid)


def _empty_reason(g: _Graph, b: Builder) -> str | None:
    if not g.records:
        return (f"no chain record (only {len(g.metadata)} metadata record(s) such as "
                f"summaries or titles); nothing the model saw is in this file")
    return None


def _is_tool_results(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(c, Mapping) and c.get("type") == "tool_result" for c in content)


def _unit_seqs(unit: Mapping[str, int], uuid: str) -> list[int]:
    """The seqs of the events one record gave (a record with several tool results gave
    `uuid#k`, its other blocks `uuid#extra`)."""
    seqs = [unit[uuid]] if uuid in unit else []
    k = 0
    while f"{uuid}#{k}" in unit:
        seqs.append(unit[f"{uuid}#{k}"])
        k += 1
    if f"{uuid}#extra" in unit:
        seqs.append(unit[f"{uuid}#extra"])
    return seqs


def _with_responses(g: _Graph, kept: list[str]) -> list[str]:
    """A kept list with the other records of each kept response and their tool results:
    Claude Code keeps a response whole."""
    out = list(kept)
    for uuid in kept:
        message_id = g.message_id(uuid) if uuid in g.records else None
        for member in g.by_message.get(message_id or "", []) or [uuid]:
            out.append(member)
            for call in g.calls_of.get(member, []):
                out += g.results_for.get(call, [])
    return list(dict.fromkeys(out))


def _flush_boundary(b: Builder, g: _Graph, pending: dict[str, Any] | None,
                    unit: dict[str, int], summary: New | None,
                    summary_uuid: str | None = None) -> None:
    """Write the bracket of a boundary (or of a summary without one)."""
    record = (pending or {}).get("record") or {}
    boundary = record.get("uuid")
    kept_list: list[str] = (pending or {}).get("kept", [])
    keeps: list[Keep | New] = [Keep(seq) for seq in sorted(
        {seq for u in _with_responses(g, kept_list) for seq in _unit_seqs(unit, u)})]
    missing = [u for u in kept_list if not _unit_seqs(unit, u)]
    if missing:
        b.problem("preserved-uuid-missing", f"boundary {boundary}: preserved record(s) "
                  f"{missing[:3]} are not on the imported path")
    anchor = (pending or {}).get("anchor")
    if summary is None:
        b.problem("compaction-without-summary", f"boundary {boundary}: no summary record "
                  f"follows it; only the deletion is written")
        target: list[Keep | New] = keeps
    elif anchor is not None and anchor == boundary:  # 'from': the prefix is kept
        target = [*keeps, summary]
    else:
        target = [summary, *keeps]
    meta = mapping_at(record, "compactMetadata")
    summary_blocks = summary.data["content"] if summary is not None else []
    b.compaction(str(boundary or summary_uuid), target, summary=summary_blocks,
                 origin=(pending or {}).get("origin"), imported={
        "boundaryUuid": boundary, "summaryUuid": summary_uuid, "trigger": meta.get("trigger"),
        "preTokens": meta.get("preTokens"), "postTokens": meta.get("postTokens"),
        "durationMs": meta.get("durationMs"),
        "logicalParentUuid": record.get("logicalParentUuid"),
        "preservedFrom": (pending or {}).get("where") or None})


def _microcompact(b: Builder, record: dict[str, Any], unit: dict[str, int],
                  origin: dict[str, Any]) -> None:
    """Tool results Claude Code cleared: one prune and one content-only rewrite each."""
    meta = mapping_at(record, "microcompactMetadata")
    ids = set(meta.get("compactedToolIds") or [])
    on_surface = set(b.surface())
    cleared = 0
    for seq in sorted(on_surface):
        event = b.event(seq)
        if event["type"] != "tool/result":
            continue
        call_id = event["data"]["message"]["source"]["callId"]
        if call_id not in ids:
            continue
        b.close_step()
        b.append("compaction/prune", {"shadowedRange": {"start": seq, "end": seq},
                                      "shadowedSeqs": [seq], "shadowedTokenCount": None,
                                      "imported": {"format": "claude-code",
                                                   "kind": "microcompact",
                                                   "boundaryUuid": record.get("uuid")}},
                 origin)
        data = thaw(event["data"])
        data["message"]["content"][0]["content"] = [
            {"type": "text", "text": "[Old tool result content cleared]"}]
        b.append("tool/result", data, origin, surface_op={"op": "replace", "start": seq,
                                                          "end": seq},
                 source_event_seqs=[seq])
        cleared += 1
    if not cleared:
        b.omit("not-model-visible", "system:microcompact_boundary", line=origin["line"],
               id=origin["id"], file=origin["file"])
