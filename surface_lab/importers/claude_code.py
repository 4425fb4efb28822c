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
    compact_json,
    image_block,
    parse_time,
    printable,
    read_jsonl,
)
from .planner import Keep, New

__all__ = ["import_claude_code", "looks_like_claude_code"]

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
            if record.get("type") not in CHAIN_TYPES or not isinstance(uuid, str):
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
        for uuid in sorted(self.records, key=self.order.__getitem__):
            parent = self.parent(uuid)
            if parent is not None:
                self.kids.setdefault(parent, []).append(uuid)
            record = self.records[uuid]
            message_id = mapping_at(record, "message").get("id")
            if record.get("type") == "assistant" and isinstance(message_id, str):
                self._message_ids[uuid] = message_id
                self.by_message.setdefault(message_id, []).append(uuid)

    def parent(self, uuid: str) -> str | None:
        """The parent, bridging legacy progress records."""
        seen = {uuid}
        parent = self.records[uuid].get("parentUuid")
        while (isinstance(parent, str) and parent in self.records
                and self.records[parent].get("type") == "progress" and parent not in seen):
            seen.add(parent)
            parent = self.records[parent].get("parentUuid")
        return parent if isinstance(parent, str) else None

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
    """K_B, the anchor and where K_B came from."""
    meta = mapping_at(boundary, "compactMetadata")
    preserved = meta.get("preservedMessages")
    if isinstance(preserved, Mapping) and isinstance(preserved.get("uuids"), list):
        return ([u for u in preserved["uuids"] if isinstance(u, str)],
                preserved.get("anchorUuid"), "preservedMessages")
    segment = meta.get("preservedSegment")
    if isinstance(segment, Mapping):
        walk, at, seen = [], segment.get("tailUuid"), set()
        while isinstance(at, str) and at in g.records and at not in seen:
            seen.add(at)
            walk.append(at)
            if at == segment.get("headUuid"):
                return walk[::-1], segment.get("anchorUuid"), "preservedSegment"
            at = g.parent(at)
        b.problem("preserved-segment-unresolved", f"boundary {boundary.get('uuid')}: the "
                  f"preserved segment cannot be walked; nothing is kept")
    return [], None, ""


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
            kept_list = kept[at][0]
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
                hint = "" if g.project_dir is not None else (
                    "; project_dir= looks for it in the project's other transcripts")
                b.problem("boundary-without-logical-parent", printable(
                    f"boundary {at}: its logical parent {logical} is not in this file"
                    f"{hint}; the history before it is not imported"), line=g.line.get(at))
                break
            at = g.parent(at)
            if at is None:
                b.problem("boundary-without-logical-parent", printable(
                    f"boundary {record['uuid']}: the history before it is not in this "
                    f"file"), line=g.line.get(record["uuid"]))
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


def _with_parallel_siblings(g: _Graph, path: list[str]) -> tuple[list[str], int]:
    """Claude Code's recovery after its single-parent walk: beside each response on the
    path, the response's other records (same message id) and the tool results hanging
    off them, which the walk does not reach (parallel tool calls). The response's records
    go in file order, then the recovered results in the order of their calls."""
    on = set(path)
    out: list[str] = []
    recovered = 0
    i = 0
    while i < len(path):
        message_id = g.message_id(path[i])
        group = g.by_message.get(message_id or "", [])
        if len(group) < 2:
            out.append(path[i])
            i += 1
            continue
        j = i
        while j < len(path) and g.message_id(path[j]) == message_id:
            j += 1
        side = bool(g.records[path[i]].get("isSidechain"))
        extra = [u for u in group if u not in on
                 and bool(g.records[u].get("isSidechain")) == side]
        members = sorted([*path[i:j], *extra], key=g.order.__getitem__)
        results = [r for m in members for r in g.kids.get(m, [])
                   if r not in on and not g.kids.get(r) and g.is_result(r)]
        on.update(extra)
        on.update(results)
        recovered += len(extra) + len(results)
        out += members + results
        i = j
    return out, recovered


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


def import_claude_code(source: str | Path, *, leaf: str | None = None,
                       tombstones: bool = False, strict: bool = False,
                       keep_api_errors: bool = False,
                       project_dir: str | Path | None = None) -> ImportResult:
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
    uuids, recovered = _with_parallel_siblings(g, uuids)
    if recovered:
        b.note("parallel-tool-results", f"{recovered} record(s) of parallel tool calls "
               f"(sibling blocks and their results, off the parent chain) brought back "
               f"beside their response, as Claude Code does on resume")
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
                b.context(f"{uuid}#extra", _content(extra), "tool-result-extra", origin,
                          in_step=True)
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
    if attachments:
        b.note("approximate-attachment", f"{attachments} attachment(s) rendered as "
               f"approximate context messages")
    stop = (last or {}).get("message", {}).get("stop_reason") if last else None
    if last is not None and last.get("type") == "assistant" and stop in ENDING:
        b.close_turn(ENDING[str(stop)])
    selection = {"leaf": chosen, "leaves": side_leaves if subagent else leaves,
                 "subagents": [] if subagent else side_leaves}
    return b.result([path, *g.extra_files], selection, finished=False, strict=strict,
                    empty_reason=_empty_reason(g, b))


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


def _flush_boundary(b: Builder, g: _Graph, pending: dict[str, Any] | None,
                    unit: dict[str, int], summary: New | None,
                    summary_uuid: str | None = None) -> None:
    """Write the bracket of a boundary (or of a summary without one)."""
    record = (pending or {}).get("record") or {}
    boundary = record.get("uuid")
    kept_list: list[str] = (pending or {}).get("kept", [])
    keeps: list[Keep | New] = [Keep(unit[u]) for u in kept_list if u in unit]
    missing = [u for u in kept_list if u not in unit]
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
