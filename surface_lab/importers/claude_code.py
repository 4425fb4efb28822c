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
    ImportError_,
    ImportResult,
    compact_json,
    image_block,
    parse_time,
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
    """The chain records of one file, with Claude Code's loader rules."""

    def __init__(self, b: Builder, lines: list[tuple[int, dict[str, Any]]]) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.line: dict[str, int] = {}
        self.metadata = 0
        duplicates = 0
        for number, record in lines:
            uuid = record.get("uuid")
            if record.get("type") not in CHAIN_TYPES or not isinstance(uuid, str):
                self.metadata += 1
                continue
            if uuid in self.records:
                duplicates += 1
            self.records[uuid] = record  # last wins, as Claude Code's map-based loader
            self.line[uuid] = number
        if duplicates:
            b.problem("duplicate-id", f"{duplicates} chain record(s) repeat an earlier uuid; "
                      f"the last line of each is used")
        self.children: set[str] = set()
        for record in self.records.values():
            if isinstance(record.get("parentUuid"), str):
                self.children.add(record["parentUuid"])

    def parent(self, uuid: str) -> str | None:
        """The parent, bridging legacy progress records."""
        seen = {uuid}
        parent = self.records[uuid].get("parentUuid")
        while isinstance(parent, str) and parent in self.records \
                and self.records[parent].get("type") == "progress" and parent not in seen:
            seen.add(parent)
            parent = self.records[parent].get("parentUuid")
        return parent if isinstance(parent, str) else None


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


def _path(g: _Graph, b: Builder, leaf: str) -> list[str]:
    boundaries = {u: r for u, r in g.records.items() if r.get("subtype") == "compact_boundary"}
    kept = {u: _kept(g, b, r) for u, r in boundaries.items()}
    heads = {k[0][0]: (u, k[1]) for u, k in kept.items() if k[0]}
    walk: list[str] = []
    crossed: set[str] = set()
    seen: set[str] = set()
    at: str | None = leaf
    while at is not None:
        if at in seen:
            b.problem("cycle", f"record {at} is its own ancestor", line=g.line.get(at))
            break
        if at not in g.records:
            b.problem("dangling-parent", f"parent {at} is not in the file")
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
            at = logical if isinstance(logical, str) else g.parent(at)
            if at is None:
                b.problem("boundary-without-logical-parent", f"boundary {record['uuid']}: the "
                          f"history before it is not in this file", line=g.line.get(
                              record["uuid"]))
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


def _default_leaf(g: _Graph) -> tuple[str | None, list[dict[str, Any]]]:
    candidates: dict[str, tuple[int, int]] = {}
    for uuid in g.records:
        if uuid in g.children:
            continue
        at, seen = uuid, set()
        while at in g.records and g.records[at].get("type") not in ("user", "assistant") \
                and at not in seen:
            seen.add(at)
            parent = g.parent(at)
            if parent is None:
                break
            at = parent
        record = g.records.get(at)
        if record is None or record.get("type") not in ("user", "assistant") \
                or record.get("isSidechain"):
            continue
        candidates[at] = (parse_time(record.get("timestamp")) or 0, g.line[at])
    leaves = [{"uuid": u, "time": t, "line": n} for u, (t, n) in candidates.items()]
    if not candidates:
        return None, leaves
    return max(candidates, key=lambda u: candidates[u]), leaves


def import_claude_code(source: str | Path, *, leaf: str | None = None,
                       tombstones: bool = False, strict: bool = False,
                       keep_api_errors: bool = False) -> ImportResult:
    """Import a Claude Code session transcript.

    Args:
        source: the `<sessionId>.jsonl` file.
        leaf: a record uuid; by default Claude Code's resume rule (the latest
            non-sidechain user or assistant leaf).
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
        keep_api_errors: keep Claude Code's own API error notices as assistant messages.
    """
    path = Path(source)
    b = Builder("claude-code", str(path), tombstones=tombstones)
    lines = read_jsonl(path, b)
    if not looks_like_claude_code([r for _, r in lines]):
        raise ImportError_(f"{path}: not a Claude Code transcript (no uuid/parentUuid/"
                           f"sessionId records)", code="format-unsupported", path=str(path))
    g = _Graph(b, lines)
    chosen, leaves = _default_leaf(g)
    if leaf is not None:
        if leaf not in g.records:
            raise ImportError_(f"{path}: no record {leaf!r} to use as the leaf",
                               code="leaf-unknown", path=str(path))
        chosen = leaf
    uuids = _path(g, b, chosen) if chosen is not None else []
    b.note("leaf-choice", f"imported the path to {chosen} ({len(uuids)} records); "
           f"{max(len(leaves) - 1, 0)} other leaf candidate(s)")
    session_id = str(g.records[chosen].get("sessionId") if chosen else "") or path.stem
    cwd = g.records[chosen].get("cwd") if chosen else None
    b.at(next((t for u in uuids if (t := parse_time(g.records[u].get("timestamp")))), 0))
    b.start({"version": 0, "id": session_id, "createdAt": b.time,
             **({"cwd": cwd} if isinstance(cwd, str) and cwd.startswith("/") else {})})
    unit: dict[str, int] = {}
    pending: dict[str, Any] | None = None
    dropped = 0
    attachments = 0
    last: dict[str, Any] | None = None
    for uuid in uuids:
        record = g.records[uuid]
        number = g.line[uuid]
        origin = {"file": str(path), "line": number, "id": uuid}
        b.at(parse_time(record.get("timestamp")))
        kind = record.get("type")
        message = mapping_at(record, "message")
        if kind == "system" and record.get("subtype") == "compact_boundary":
            if pending is not None:
                _flush_boundary(b, g, pending, unit, None)
            kept_list, anchor, where = _kept(g, b, record)
            pending = {"record": record, "kept": kept_list, "anchor": anchor, "where": where}
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
            dropped += 1
            continue
        if kind == "attachment":
            attachment = mapping_at(record, "attachment")
            a_type = str(attachment.get("type", "unknown"))
            if a_type in NO_OP_ATTACHMENTS:
                dropped += 1
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
                dropped += 1
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
            dropped += 1
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
    if dropped or g.metadata:
        b.note("not-model-visible", f"{dropped} chain record(s) and {g.metadata} metadata "
               f"record(s) the model never saw were skipped")
    if attachments:
        b.note("approximate-attachment", f"{attachments} attachment(s) rendered as "
               f"approximate context messages")
    stop = (last or {}).get("message", {}).get("stop_reason") if last else None
    if last is not None and last.get("type") == "assistant" and stop in ENDING:
        b.close_turn(ENDING[str(stop)])
    return b.result([path], {"leaf": chosen, "leaves": leaves}, finished=False, strict=strict)


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
    b.compaction(str(boundary or summary_uuid), target, summary=summary_blocks, imported={
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
    for seq in sorted(on_surface):
        event = b.event(seq)
        if event["type"] != "tool/result":
            continue
        call_id = event["data"]["message"]["source"]["callId"]
        if call_id not in ids:
            continue
        b.close_step()
        b._append("compaction/prune", {"shadowedRange": {"start": seq, "end": seq},
                                       "shadowedSeqs": [seq], "shadowedTokenCount": None,
                                       "imported": {"format": "claude-code",
                                                    "kind": "microcompact",
                                                    "boundaryUuid": record.get("uuid")}})
        data = thaw(event["data"])
        data["message"]["content"][0]["content"] = [
            {"type": "text", "text": "[Old tool result content cleared]"}]
        b._append("tool/result", data, origin, surface_op={"op": "replace", "start": seq,
                                                           "end": seq},
                  source_event_seqs=[seq])
