"""pi session JSONL (IMPORTERS.md section 5): the root-to-leaf path, with pi's own rule
that only the last compaction on the path shapes the context."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..events import mapping_at
from .common import (
    Builder,
    ImportFailure,
    ImportResult,
    compact_json,
    image_block,
    no_foreign_errors,
    parse_time,
    printable,
    read_jsonl,
    text_blocks,
)
from .planner import Keep, New

__all__ = ["import_pi", "is_pi_header"]

SUMMARY_PREFIX = ("The conversation history before this point was compacted into the "
                  "following summary:\n\n<summary>\n")
SUMMARY_SUFFIX = "\n</summary>"
BRANCH_PREFIX = ("The following is a summary of a branch that this conversation came back "
                 "from:\n\n<summary>\n")
ENDING = {"stop": "completed", "length": "max-tokens", "error": "error", "aborted": "aborted"}


def is_pi_header(record: Any) -> bool:
    """pi's first line: `type: session` like ours, but a version 1 to 3 (pi reads a
    missing version as 1, as version 1 files have none) and a `timestamp` instead of
    `createdAt`."""
    return (isinstance(record, Mapping) and record.get("type") == "session"
            and record.get("version", 1) in (1, 2, 3) and "timestamp" in record
            and "createdAt" not in record
            and ("version" in record or isinstance(record.get("id"), str)))


def _migrate_v1(lines: list[tuple[int, dict[str, Any]]], b: Builder) -> list[
        tuple[int, dict[str, Any]]]:
    """pi's own v1 -> v2 migration: ids chained in file order (`L<line>` here, where pi
    draws random ones), and `firstKeptEntryIndex` (an index into the file's entries, the
    header being 0) becomes the id of the entry at that index."""
    out: list[tuple[int, dict[str, Any]]] = [lines[0]]
    previous: str | None = None
    for number, entry in lines[1:]:
        entry = {**entry, "id": f"L{number}", "parentId": previous}
        previous = entry["id"]
        index = entry.pop("firstKeptEntryIndex", None)
        if (entry.get("type") == "compaction" and isinstance(index, int)
                and not isinstance(index, bool)):
            if 0 < index < len(out):
                entry["firstKeptEntryId"] = out[index][1]["id"]
            else:
                b.problem("first-kept-not-on-path", f"compaction keeps from entry index "
                          f"{index}, which is not an earlier entry; nothing is kept",
                          line=number)
        out.append((number, entry))
    return out


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            out.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "thinking":
            reasoning: dict[str, Any] = {"type": "reasoning",
                                         "text": str(block.get("thinking", ""))}
            if block.get("redacted"):
                reasoning["redacted"] = True
            out.append(reasoning)
        elif kind == "toolCall":
            out.append({"type": "tool-call", "id": str(block.get("id", "")),
                        "name": str(block.get("name", "")),
                        "arguments": compact_json(block.get("arguments", {}))})
        elif kind == "image":
            out.append(image_block(block.get("data"), block.get("mimeType")))
        else:
            out.append({**block, "type": f"pi:{kind}"})
    return out


@no_foreign_errors
def import_pi(source: str | Path, *, leaf: str | None = None, tombstones: bool = False,
              strict: bool = False) -> ImportResult:
    """Import a pi session file.

    Args:
        source: the `.jsonl` file.
        leaf: an entry id; by default the last entry in file order (pi's choice).
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
    """
    path = Path(source)
    b = Builder("pi", str(path), tombstones=tombstones)
    lines = read_jsonl(path, b)
    if not lines or not is_pi_header(lines[0][1]):
        raise ImportFailure(f"{path}: not a pi session (no pi header on line 1)",
                            code="format-unsupported", path=str(path), line=1)
    header = lines[0][1]
    if header.get("version", 1) == 1:
        lines = _migrate_v1(lines, b)
        b.note("pi-v1-migrated", "a version 1 session: entries chained in file order and "
               "firstKeptEntryIndex read as pi's migration does")
    entries: dict[str, tuple[int, dict[str, Any]]] = {}
    order: list[str] = []
    previous: str | None = None
    for number, entry in lines[1:]:
        entry_id = entry.get("id")
        if not isinstance(entry_id, str):  # an entry without an id: chained in file order
            entry = {**entry, "id": f"L{number}", "parentId": previous}
            entry_id = entry["id"]
        if entry_id in entries:
            b.problem("duplicate-id", f"entry {entry_id} appears again; the last one is used",
                      line=number)
            b.omit("duplicate", entries[entry_id][1].get("type"), line=entries[entry_id][0],
                   id=entry_id)
        else:
            order.append(entry_id)
        entries[entry_id] = (number, entry)
        previous = entry_id
    children = {e.get("parentId") for _, e in entries.values()
                if isinstance(e.get("parentId"), str)}  # a list or an object is no id
    leaves = [i for i in order if i not in children]
    chosen = leaf if leaf is not None else (order[-1] if order else None)
    if chosen is not None and chosen not in entries:
        raise ImportFailure(f"{path}: no entry {chosen!r} to use as the leaf",
                            code="leaf-unknown", path=str(path))
    walk: list[str] = []
    seen: set[str] = set()
    at = chosen
    while at is not None:
        if at in seen:
            b.problem("cycle", f"entry {at} is its own ancestor", line=entries[at][0])
            break
        if at not in entries:
            b.problem("dangling-parent", f"parent {at} is not in the file")
            break
        seen.add(at)
        walk.append(at)
        parent = entries[at][1].get("parentId")
        at = parent if isinstance(parent, str) else None
    path_ids = walk[::-1]
    b.note("leaf-choice", f"imported the path to {chosen} ({len(path_ids)} entries); "
           f"{max(len(leaves) - 1, 0)} other leaf(s)")
    b.at(parse_time(header.get("timestamp")))
    cwd = header.get("cwd")
    b.start({"version": 0, "id": str(header.get("id") or path.stem), "createdAt": b.time,
             **({"cwd": cwd} if isinstance(cwd, str) and cwd.startswith("/") else {})})
    provider, model = "unknown", "unknown"
    unit_seq: dict[str, int] = {}
    last_message: dict[str, Any] | None = None
    for entry_id in path_ids:
        number, entry = entries[entry_id]
        kind = entry.get("type")
        origin = {"file": str(path), "line": number, "id": entry_id}
        b.at(parse_time(entry.get("timestamp")))
        if kind == "model_change":
            provider = str(entry.get("provider") or provider)
            model = str(entry.get("modelId") or model)
            b.omit("not-model-visible", kind, line=number, id=entry_id)
            continue
        if kind == "compaction":
            _compaction(b, entry, path_ids, entries, unit_seq, origin, provider, model)
            continue
        if kind == "branch_summary" and entry.get("summary"):
            text = BRANCH_PREFIX + str(entry["summary"]) + "</summary>"
            unit_seq[entry_id] = int(b.context(entry_id, text, "branch-summary", origin)["seq"])
            continue
        if kind == "custom_message":
            unit_seq[entry_id] = int(b.context(
                entry_id, _blocks(entry.get("content")),
                f"custom:{entry.get('customType')}", origin)["seq"])
            continue
        if kind != "message" or not isinstance(entry.get("message"), Mapping):
            b.omit("not-model-visible", kind, line=number, id=entry_id)
            continue
        message = entry["message"]
        role = message.get("role")
        last_message = message
        if role == "user":
            unit_seq[entry_id] = int(b.user(entry_id, _blocks(message.get("content")),
                                            origin)["seq"])
        elif role == "assistant":
            usage = mapping_at(message, "usage")
            mapped = {k2: usage[k1] for k1, k2 in (("input", "inputTokens"),
                                                   ("output", "outputTokens"),
                                                   ("cacheRead", "cacheReadTokens"),
                                                   ("cacheWrite", "cacheWriteTokens"))
                      if isinstance(usage.get(k1), int)}
            event = b.assistant(entry_id, _blocks(message.get("content")),
                                provider=str(message.get("provider") or provider),
                                model=str(message.get("model") or model), step_key=entry_id,
                                origin=origin, usage=mapped or None,
                                responseId=message.get("responseId"))
            unit_seq[entry_id] = int(event["seq"])
        elif role == "toolResult":
            unit_seq[entry_id] = int(b.tool_result(
                entry_id, str(message.get("toolCallId", "")), _blocks(message.get("content")),
                bool(message.get("isError")), origin)["seq"])
        elif role == "bashExecution":
            if message.get("excludeFromContext"):
                b.omit("excluded-from-context", "bashExecution", line=number, id=entry_id)
                continue
            unit_seq[entry_id] = int(b.context(entry_id, _bash_text(message),
                                               "bash-execution", origin)["seq"])
        elif role in ("custom", "hookMessage"):
            unit_seq[entry_id] = int(b.context(entry_id, _blocks(message.get("content")),
                                               f"custom:{message.get('customType')}",
                                               origin)["seq"])
        else:
            b.omit("not-model-visible", f"message:{role}", line=number, id=entry_id)
    results: dict[str, dict[str, Any]] = {}
    for entry_id in order:
        number, entry = entries[entry_id]
        message = entry.get("message")
        if (entry.get("type") == "message" and isinstance(message, Mapping)
                and message.get("role") == "toolResult"):
            results[str(message.get("toolCallId", ""))] = {"file": str(path), "line": number,
                                                           "id": entry_id}
    b.lost_results(results)
    on_path = set(path_ids)
    for entry_id in order:
        if entry_id not in on_path:
            number, entry = entries[entry_id]
            b.omit("off-branch", entry.get("type"), line=number, id=entry_id)
    finished = (last_message is not None and last_message.get("role") == "assistant"
                and isinstance(last_message.get("stopReason"), str)
                and last_message.get("stopReason") in ENDING)
    if finished and last_message is not None:
        ending = ENDING[str(last_message.get("stopReason"))]
        # pi's "aborted" is the user stopping the response (Escape).
        b.close_turn(ending, **({"reason": {"kind": "user"}} if ending == "aborted" else {}))
    return b.result([path], {"leaf": chosen, "leaves": leaves}, finished=False, strict=strict)


def _bash_text(message: Mapping[str, Any]) -> str:
    text = f"Ran `{message.get('command', '')}`\n"
    output = message.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    if message.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif message.get("exitCode") not in (None, 0):
        text += f"\n\nCommand exited with code {message.get('exitCode')}"
    return text


def _message_item(b: Builder, message: Mapping[str, Any], item_id: str,
                  origin: dict[str, Any], provider: str, model: str) -> New | None:
    """The surface event of one pi message that exists only inside a compaction's
    `retainedTail` (pi's `convertToLlm` roles); None for a role the model never sees."""
    role = message.get("role")
    content = message.get("content")

    def context(blocks: Any, what: str) -> New:
        return New("context/message", {
            "id": item_id, "role": "user", "content": text_blocks(blocks),
            "source": {"kind": "harness", "harness": "pi", "origin": what}}, origin=origin)

    if role == "user":
        return New("user/message", {"id": item_id, "role": "user",
                                    "content": _blocks(content), "source": {"kind": "user"}},
                   origin=origin)
    if role == "assistant":
        source = {"kind": "model", "provider": str(message.get("provider") or provider),
                  "model": str(message.get("model") or model)}
        if isinstance(message.get("responseId"), str):
            source["responseId"] = message["responseId"]
        return New("assistant/message", {"turn": b.turn, "step": b.step, "message": {
            "id": item_id, "role": "assistant", "content": _blocks(content),
            "source": source}}, origin=origin)
    if role == "toolResult":
        return New("tool/result", b.tool_result_data(
            item_id, str(message.get("toolCallId", "")), _blocks(content),
            bool(message.get("isError"))), origin=origin)
    if role == "bashExecution" and not message.get("excludeFromContext"):
        return context(_bash_text(message), "bash-execution")
    if role in ("custom", "hookMessage"):
        return context(_blocks(content), f"custom:{message.get('customType')}")
    if role == "compactionSummary" and message.get("summary"):
        return context(SUMMARY_PREFIX + str(message["summary"]) + SUMMARY_SUFFIX,
                       "compaction-summary")
    if role == "branchSummary" and message.get("summary"):
        return context(BRANCH_PREFIX + str(message["summary"]) + "</summary>",
                       "branch-summary")
    return None


def _retained_tail(b: Builder, entry: dict[str, Any], tail: list[Any], before: list[str],
                   entries: dict[str, tuple[int, dict[str, Any]]],
                   unit_seq: dict[str, int], origin: dict[str, Any], provider: str,
                   model: str) -> list[Keep | New]:
    """pi's context after a compaction with `retainedTail`: the messages it lists, in
    its order. A message equal to an entry's on the path before the compaction keeps that
    entry's event (in order, each entry once); any other is a new event."""
    out: list[Keep | New] = []
    candidates = [e for e in before if entries[e][1].get("type") == "message"]
    at = 0
    made = 0
    for k, message in enumerate(tail):
        if not isinstance(message, Mapping):
            b.problem("retained-tail-invalid", f"compaction {entry['id']}: retainedTail "
                      f"item {k} is not a message", line=origin["line"])
            continue
        match = next((i for i in range(at, len(candidates))
                      if entries[candidates[i]][1].get("message") == message
                      and candidates[i] in unit_seq), None)
        if match is not None:
            out.append(Keep(unit_seq[candidates[match]]))
            at = match + 1
            continue
        item = _message_item(b, message, f"{entry['id']}:tail-{k}", origin, provider, model)
        if item is None:
            b.omit("not-model-visible", f"retainedTail:{message.get('role')}",
                   line=origin["line"], id=f"{entry['id']}:tail-{k}")
            continue
        out.append(item)
        made += 1
    if made:
        b.note("retained-tail-new", f"compaction {entry['id']}: {made} retainedTail "
               f"message(s) match no entry on the path; written as new events",
               line=origin["line"])
    return out


def _compaction(b: Builder, entry: dict[str, Any], path_ids: list[str],
                entries: dict[str, tuple[int, dict[str, Any]]], unit_seq: dict[str, int],
                origin: dict[str, Any], provider: str = "unknown",
                model: str = "unknown") -> None:
    """pi's context after compaction C: [summary] + C's `retainedTail` when it has one
    (newer pi), else the message-like entries from firstKeptEntryId up to C, earlier
    compaction entries contributing nothing."""
    entry_id = entry["id"]
    first_kept = entry.get("firstKeptEntryId")
    here = path_ids.index(entry_id)
    tail = entry.get("retainedTail")
    summary = str(entry.get("summary", ""))
    target: list[Keep | New] = [New("user/message", {
        "id": entry_id, "role": "user",
        "content": [{"type": "text", "text": SUMMARY_PREFIX + summary + SUMMARY_SUFFIX}],
        "source": {"kind": "plugin", "plugin": "compact", "compactionId": entry_id,
                   "importedFrom": "pi"}}, origin=origin)]
    if isinstance(tail, list):
        target += _retained_tail(b, entry, tail, path_ids[:here], entries, unit_seq, origin,
                                 provider, model)
        kept_from = "retainedTail"
    else:
        kept_from = "firstKeptEntryId"
        if isinstance(first_kept, str) and first_kept in path_ids[:here]:
            kept_ids = path_ids[path_ids.index(first_kept) : here]
        else:
            kept_ids = []
            if first_kept is not None:
                b.problem("first-kept-not-on-path", printable(
                    f"compaction {entry_id} keeps from {first_kept}, which is not on the "
                    f"path; nothing is kept"), line=origin["line"])
        target += [Keep(unit_seq[k]) for k in kept_ids if k in unit_seq]
    row = b.compaction(entry_id, target, summary=[{"type": "text", "text": summary}],
                       origin=origin,
                       imported={"entryId": entry_id, "firstKeptEntryId": first_kept
                                 if isinstance(first_kept, str) else None,
                                 "tokensBefore": entry.get("tokensBefore"),
                                 "fromHook": entry.get("fromHook"),
                                 "keptFrom": kept_from})
    for unit, seq in list(unit_seq.items()):
        if seq in row["copied"]:
            unit_seq[unit] = row["copied"][seq]
