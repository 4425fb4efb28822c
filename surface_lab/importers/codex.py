"""Codex CLI rollout JSONL (IMPORTERS.md section 4): response items as surface events;
each `compacted` replacement history is diffed against the surface and planned; each
`token_count` becomes the usage of the model request it follows."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..events import mapping_at
from .common import (
    Builder,
    ImportFailure,
    ImportResult,
    compact_json,
    no_foreign_errors,
    parse_time,
    read_jsonl,
)
from .planner import Keep, New

__all__ = ["import_codex", "looks_like_codex"]

CONTEXTUAL = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
              "<INSTRUCTIONS>", "<user_shell_command>", "<turn_aborted>",
              "<subagent_notification>", "<skill>")
SUMMARY_PREFIX = "Another language model started to solve this problem"
CALLS = {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
OUTPUTS = {"function_call_output", "custom_tool_call_output", "tool_search_output"}
SERVER = {"web_search_call", "image_generation_call"}
OPAQUE = {"compaction", "context_compaction"}
IDENTITY_SKIP = {"id", "metadata", "internal_chat_message_metadata_passthrough", "status"}
# event_msg records that write events: a model request still held back is written first
WRITING_EVENTS = {"task_started", "turn_started", "task_complete", "turn_complete",
                  "turn_aborted", "thread_rolled_back"}


def looks_like_codex(records: list[dict[str, Any]]) -> bool:
    return any(r.get("type") == "session_meta" and "payload" in r for r in records[:20])


def _key(item: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in item.items() if k not in IDENTITY_SKIP},
                      sort_keys=True, separators=(",", ":"))


def _parts(item: Mapping[str, Any]) -> list[Any]:
    parts = item.get("content")
    return parts if isinstance(parts, list) else []


def _text(item: Mapping[str, Any]) -> str:
    parts = _parts(item)
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping)
                     and "text" in p)


def _blocks(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for part in _parts(item):
        if isinstance(part, Mapping) and "text" in part:
            out.append({"type": "text", "text": str(part["text"])})
        elif isinstance(part, Mapping):
            out.append({**part, "type": f"openai:{part.get('type')}"})
    return out


def _call_block(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "custom_tool_call":
        arguments = compact_json(item.get("input", ""))
    elif kind == "local_shell_call":
        arguments = compact_json(item.get("action", {}))
    elif kind == "tool_search_call":
        arguments = compact_json(item.get("arguments", item.get("query", {})))
    else:
        raw = item.get("arguments", "{}")
        arguments = raw if isinstance(raw, str) else compact_json(raw)
    return {"type": "tool-call", "id": str(item.get("call_id") or item.get("id") or ""),
            "name": str(item.get("name") or kind), "arguments": arguments}


def _output_content(item: Mapping[str, Any]) -> tuple[Any, bool]:
    output = item.get("output")
    if isinstance(output, Mapping):
        failed = output.get("success") is False
        inner = output.get("content", output.get("text", ""))
        return (inner if isinstance(inner, (str, list)) else json.dumps(inner)), failed
    if isinstance(output, list):
        return [{"type": "text", "text": str(p.get("text", p))} if isinstance(p, Mapping)
                else {"type": "text", "text": str(p)} for p in output], False
    return ("" if output is None else str(output)), False


def classify(item: Mapping[str, Any]) -> str | None:
    """What a response item becomes: user, context, summary, assistant, output, opaque, or
    None for items the model does not see."""
    kind, role = item.get("type"), item.get("role")
    if kind == "message":
        if role == "system":
            return None
        if role == "developer":
            return "developer"
        if role == "assistant":
            return "assistant"
        text = _text(item)
        if text.startswith(SUMMARY_PREFIX):
            return "summary"
        return "contextual" if text.lstrip().startswith(CONTEXTUAL) else "user"
    if kind == "reasoning" or kind in CALLS or kind in SERVER:
        return "assistant"
    if kind in OUTPUTS:
        return "output"
    if kind in OPAQUE:
        return "opaque"
    if kind == "agent_message":
        return "agent"
    return None


def codex_usage(last: Mapping[str, Any]) -> tuple[dict[str, int], bool]:
    """A `last_token_usage` in the surface's usage keys, and whether it adds up. Codex's
    `input_tokens` includes the cached reads and the cache writes; `inputTokens` is the
    rest, so that input + cache reads + cache writes is the prompt (as Anthropic reports
    it). When the cache figures exceed the input, the input is kept whole, unsplit."""
    def count(key: str) -> int | None:
        value = last.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    given, cached, written = (count("input_tokens"), count("cached_input_tokens"),
                              count("cache_write_input_tokens"))
    out = {name: n for key, name in (("output_tokens", "outputTokens"),
                                     ("reasoning_output_tokens", "reasoningTokens"))
           if (n := count(key)) is not None}
    if given is None:
        return out, True
    split = (cached or 0) + (written or 0) <= given
    if split:
        out["inputTokens"] = given - (cached or 0) - (written or 0)
        out |= {name: n for name, n in (("cacheReadTokens", cached),
                                        ("cacheWriteTokens", written)) if n is not None}
    else:
        out["inputTokens"] = given
    return out, split


def _assistant_blocks(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    kind = item.get("type")
    if kind == "message":
        return _blocks(item)
    if kind == "reasoning":
        text = _text(item) or "\n".join(
            str(s.get("text", "")) for s in item.get("summary") or [] if isinstance(s, Mapping))
        block: dict[str, Any] = {"type": "reasoning", "text": text}
        if item.get("encrypted_content"):
            block["redacted"] = True
        return [block]
    if kind in CALLS:
        return [_call_block(item)]
    return [{**{k: v for k, v in item.items() if k != "type"}, "type": f"openai:{kind}"}]


class _Codex:
    def __init__(self, b: Builder, path: Path) -> None:
        self.b, self.path = b, path
        self.provider, self.model = "openai", "unknown"
        self.identity: dict[int, tuple[str | None, str]] = {}
        self.step_key = 0
        self.last_model = False
        self.open_calls: set[str] = set()
        self.has_task_events = False
        # the model request being read: its units wait for the token_count that follows
        # them (Codex writes it after the request's items) to be appended with its usage
        self.request: list[dict[str, Any]] = []
        self.last_total: Any = None

    def origin(self, line: int, item: Mapping[str, Any], index: int | None = None) -> dict[
            str, Any]:
        item_id = item.get("id") if isinstance(item.get("id"), str) else None
        suffix = f"#{index}" if index is not None else ""
        return {"file": str(self.path), "line": line,
                "id": item_id or f"codex:L{line}{suffix}"}

    def add(self, item: Mapping[str, Any], line: int) -> None:
        b = self.b
        what = classify(item)
        origin = self.origin(line, item)
        mid = str(origin["id"])
        seq: int | None = None
        if what not in (None, "assistant"):
            self.flush()
        if what in ("user", "summary"):
            if not self.has_task_events or not b.turn_open:
                seq = int(b.user(mid, _blocks(item), origin)["seq"])
            else:
                b.close_step()
                seq = int(b.append("user/message", {"id": mid, "role": "user",
                                                    "content": _blocks(item),
                                                    "source": {"kind": "user"}}, origin,
                                   surface_op="append")["seq"])
            self.last_model = False
        elif what in ("contextual", "developer", "agent"):
            name = {"contextual": "contextual-user", "developer": "developer",
                    "agent": "agent-message"}[what]
            seq = int(b.context(mid, _blocks(item) or _text(item), name, origin)["seq"])
            self.last_model = False
        elif what == "assistant":
            if not (self.last_model or self.open_calls):
                self.step_key += 1
            blocks = _assistant_blocks(item)
            item_id = item.get("id") if isinstance(item.get("id"), str) else None
            self.request.append({"id": mid, "blocks": blocks, "model": self.model,
                                 "step_key": self.step_key, "origin": origin,
                                 "time": b.time, "identity": (item_id, _key(item))})
            self.open_calls.update(x["id"] for x in blocks if x["type"] == "tool-call")
            self.last_model = True
            return
        elif what == "output":
            call_id = str(item.get("call_id", ""))
            content, failed = _output_content(item)
            seq = int(b.tool_result(mid, call_id, content, failed, origin)["seq"])
            self.open_calls.discard(call_id)
            self.last_model = False
        elif what == "opaque":
            b.note("opaque-summary", "an encrypted compaction item outside a replacement "
                   "history is kept as an opaque context message", line=line)
            seq = int(b.context(mid, [self.opaque_block(item)], "opaque-compaction",
                                origin)["seq"])
        else:
            b.omit("not-model-visible", f"response_item:{item.get('type')}", line=line,
                   id=item.get("id"))
            return
        item_id = item.get("id") if isinstance(item.get("id"), str) else None
        self.identity[seq] = (item_id, _key(item))

    def flush(self, usage: Mapping[str, int] | None = None,
              usage_line: int | None = None) -> None:
        """Append the units of the model request being read, each with its own time and
        `usage` (the request's, as Claude Code's records of one response each carry it);
        the origin of each names the token_count line as `usageLine`."""
        b, now = self.b, self.b.time
        for unit in self.request:
            b.at(unit["time"])
            origin = {**unit["origin"], **({"usageLine": usage_line} if usage else {})}
            # the step key's turn is read as each unit is written, as when nothing waited
            step_key = (b.turn, unit["step_key"])
            seq = int(b.assistant(unit["id"], unit["blocks"], provider=self.provider,
                                  model=unit["model"], step_key=step_key, origin=origin,
                                  usage=usage)["seq"])
            self.identity[seq] = unit["identity"]
        self.request = []
        b.at(now)

    def token_count(self, payload: Mapping[str, Any], line: int) -> None:
        """A `token_count` measures the request read just before it: it is written with
        that usage. Left out (`usage-not-attached`) when it has no usage (`info: null`),
        repeats the last count (Codex re-sends it with rate-limit updates: the same
        running total), or follows no unwritten model output."""
        b = self.b
        info = payload.get("info")
        last = mapping_at(info, "last_token_usage") if isinstance(info, Mapping) else {}
        total = (info.get("total_token_usage") or last) if isinstance(info, Mapping) else None
        usage, adds_up = codex_usage(last)
        why = ("no-usage" if not usage else "repeat" if total == self.last_total
               else None if self.request else "no-request")
        if usage:
            self.last_total = total
        if why is not None:
            b.omit("usage-not-attached", f"token_count:{why}", line=line)
            return
        if not adds_up:
            b.note("usage-inconsistent", "a token_count's cached and cache-write tokens "
                   "exceed its input tokens; the input is kept unsplit", line=line)
        self.flush(usage, line)

    def opaque_block(self, item: Mapping[str, Any]) -> dict[str, Any]:
        encrypted = item.get("encrypted_content")
        return {"type": "opaque-summary", "provider": "openai", "itemType": item.get("type"),
                "encryptedBytes": len(encrypted) if isinstance(encrypted, str) else 0}

    def new(self, item: Mapping[str, Any], line: int, index: int,
            compaction_id: str) -> New | None:
        """A replacement-history item that matches nothing on the surface."""
        b = self.b
        what = classify(item)
        origin = self.origin(line, item, index)
        mid = str(origin["id"])
        if what in ("summary", "opaque"):
            content = _blocks(item) if what == "summary" else [self.opaque_block(item)]
            return New("user/message", {"id": mid, "role": "user", "content": content,
                                        "source": {"kind": "plugin", "plugin": "compact",
                                                   "compactionId": compaction_id,
                                                   "importedFrom": "codex"}}, origin=origin)
        if what == "user":
            return New("user/message", {"id": mid, "role": "user", "content": _blocks(item),
                                        "source": {"kind": "user"}}, origin=origin)
        if what in ("contextual", "developer", "agent"):
            return New("context/message", {
                "id": mid, "role": "user", "content": _blocks(item) or [
                    {"type": "text", "text": _text(item)}],
                "source": {"kind": "harness", "harness": "codex",
                           "origin": {"contextual": "contextual-user",
                                      "developer": "developer", "agent": "agent-message"}[
                               what]}}, origin=origin)
        if what == "assistant":
            return New("assistant/message", {"turn": b.turn, "step": 0, "message": {
                "id": mid, "role": "assistant", "content": _assistant_blocks(item),
                "source": {"kind": "model", "provider": self.provider, "model": self.model}}},
                origin=origin)
        if what == "output":
            content, failed = _output_content(item)
            return New("tool/result", b.tool_result_data(mid, str(item.get("call_id", "")),
                                                         content, failed), origin=origin)
        return None

    def compacted(self, payload: Mapping[str, Any], line: int) -> None:
        self.flush()
        b = self.b
        compaction_id = f"codex:L{line}"
        history = payload.get("replacement_history")
        surface = b.surface()
        if not isinstance(history, list):
            b.note("legacy-compaction-rebuilt", "a compaction without replacement_history is "
                   "rebuilt as Codex does (initial context, recent user messages, summary)",
                   line=line)
            history = self.legacy_history(surface, str(payload.get("message", "")))
        ids = [self.identity.get(s, (None, ""))[0] for s in surface]
        unique_ids = {i for i in ids if i is not None and ids.count(i) == 1}
        used: set[int] = set()
        target: list[Keep | New] = []
        for index, item in enumerate(history):
            if not isinstance(item, Mapping) or classify(item) is None:
                continue
            item_id = item.get("id") if isinstance(item.get("id"), str) else None
            key = _key(item)
            match = next((s for s in surface if s not in used and (
                (item_id in unique_ids and self.identity.get(s, (None, ""))[0] == item_id)
                or (item_id not in unique_ids and self.identity.get(s, (None, ""))[1] == key))),
                None)
            if match is not None:
                used.add(match)
                target.append(Keep(match))
                continue
            new = self.new(item, line, index, compaction_id)
            if new is not None:
                target.append(new)
        message = str(payload.get("message") or "")
        row = b.compaction(compaction_id, target,
                           summary=[{"type": "text", "text": message}] if message else [],
                           origin={"file": str(self.path), "line": line,
                                   "id": compaction_id},
                           imported={"line": line, "windowNumber": payload.get("window_number"),
                                     "windowId": payload.get("window_id"),
                                     "previousWindowId": payload.get("previous_window_id"),
                                     "firstWindowId": payload.get("first_window_id"),
                                     "hasReplacementHistory": isinstance(
                                         payload.get("replacement_history"), list)})
        if not message:
            b.note("opaque-summary", f"{compaction_id}: the summary is not readable text",
                   line=line)
        for seq in b.surface():
            if seq not in self.identity:
                event = b.event(seq)
                data = event["data"]
                message_data = data.get("message", data) if isinstance(data, Mapping) else {}
                self.identity[seq] = (None, str(message_data.get("id")))
        for original, copy in row["copied"].items():
            self.identity[copy] = self.identity.get(original, (None, ""))
        self.last_model = False
        self.open_calls.clear()

    def legacy_history(self, surface: list[int], message: str) -> list[dict[str, Any]]:
        from ..messages import message_text

        b = self.b
        head: list[dict[str, Any]] = []
        users: list[str] = []
        for seq in surface:
            event = b.event(seq)
            text = message_text(event)
            if event["type"] == "context/message" and not users:
                head.append({"type": "message", "role": "developer",
                             "content": [{"type": "input_text", "text": text}]})
            elif event["type"] == "user/message" and event["data"]["source"].get(
                    "kind") == "user":
                users.append(text)
        chosen, budget = [], 20_000 * 4
        for text in reversed(users):
            if budget <= 0:
                break
            chosen.append(text[:budget])
            budget -= len(text)
        rebuilt = head + [{"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": t}]}
                          for t in reversed(chosen)]
        summary = {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": f"{SUMMARY_PREFIX}\n{message}"}]}
        return [*rebuilt, summary]

    def rollback(self, turns: int, line: int) -> None:
        b = self.b
        surface = b.surface()
        openers = [i for i, s in enumerate(surface) if b.event(s)["type"] == "user/message"
                   and b.event(s)["data"]["source"].get("kind") == "user"]
        if len(openers) < turns or turns <= 0:
            b.problem("rollback-unresolved", f"rollback of {turns} turn(s) but only "
                      f"{len(openers)} on the surface", line=line)
            if not openers:
                return
            turns = min(max(turns, 1), len(openers))
        cut = openers[-turns]
        while cut > 0 and b.event(surface[cut - 1])["type"] == "context/message":
            cut -= 1
        b.compaction(f"codex:L{line}", [Keep(s) for s in surface[:cut]], summary=[],
                     imported={"line": line, "turns": turns}, kind="rollback",
                     origin={"file": str(self.path), "line": line, "id": f"codex:L{line}"})


@no_foreign_errors
def import_codex(source: str | Path, *, until: int | None = None, tombstones: bool = False,
                 strict: bool = False) -> ImportResult:
    """Import a Codex CLI rollout.

    Args:
        source: the `rollout-*.jsonl` file.
        until: stop after this line (the state at that moment).
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
    """
    path = Path(source)
    b = Builder("codex", str(path), tombstones=tombstones)
    lines = read_jsonl(path, b)
    if until is not None:
        for number, record in lines:
            if number > until:
                b.omit("after-until", record.get("type"), line=number)
        lines = [(n, r) for n, r in lines if n <= until]
    if not looks_like_codex([r for _, r in lines]):
        raise ImportFailure(f"{path}: not a Codex rollout (no session_meta line)",
                            code="format-unsupported", path=str(path))
    codex = _Codex(b, path)
    codex.has_task_events = any(r.get("type") == "event_msg" and isinstance(
        r.get("payload"), Mapping) and r["payload"].get("type") in ("task_started",
                                                                    "turn_started")
        for _, r in lines)
    meta = next(r["payload"] for _, r in lines if r.get("type") == "session_meta"
                and isinstance(r.get("payload"), Mapping))
    b.at(parse_time(meta.get("timestamp")) or next(
        (t for _, r in lines if (t := parse_time(r.get("timestamp")))), 0))
    cwd = meta.get("cwd")
    b.start({"version": 0, "id": str(meta.get("id") or path.stem), "createdAt": b.time,
             **({"cwd": cwd} if isinstance(cwd, str) and cwd.startswith("/") else {})})
    codex.provider = str(meta.get("model_provider") or "openai")
    b.note("step-grouping-heuristic", "rollouts carry no response ids: model items are "
           "grouped into steps by position", once=True)
    metas = 0
    finished = False
    for number, record in lines:
        kind = record.get("type")
        payload = mapping_at(record, "payload")
        origin = {"file": str(path), "line": number, "id": f"codex:L{number}"}
        b.at(parse_time(record.get("timestamp")))
        if kind == "session_meta":
            metas += 1
            if metas > 1:
                b.problem("extra-session-meta", "a later session_meta line is ignored (as "
                          "Codex does)", line=number)
                b.omit("not-model-visible", kind, line=number)
            continue
        if kind == "turn_context":
            codex.model = str(payload.get("model") or codex.model)
            b.omit("not-model-visible", kind, line=number)
            continue
        if kind == "event_msg":
            event = payload.get("type")
            if event == "token_count":
                codex.token_count(payload, number)
                continue
            if event in WRITING_EVENTS:
                codex.flush()
            if event in ("task_started", "turn_started"):
                b.open_turn(origin)
                codex.step_key += 1
                finished = False
            elif event in ("task_complete", "turn_complete"):
                if not b.turn_open:
                    b.problem("turn-end-without-start", f"{event} with no open turn",
                              line=number)
                    b.omit("not-model-visible", f"event_msg:{event}", line=number)
                b.close_turn("completed", origin=origin)
                finished = True
            elif event == "turn_aborted":
                reason = payload.get("reason")
                if not b.turn_open:
                    b.omit("not-model-visible", f"event_msg:{event}", line=number)
                if reason == "interrupted":
                    b.close_turn("interrupted", origin=origin)
                else:  # Codex's other abort reasons: replaced, review_ended
                    b.close_turn("aborted", origin=origin, reason={
                        "kind": str(reason) if isinstance(reason, str) and reason
                        else "unknown"})
                finished = True
            elif event == "thread_rolled_back":
                codex.rollback(int(payload.get("num_turns") or 0), number)
            else:
                b.omit("not-model-visible", f"event_msg:{event}", line=number)
            continue
        if kind == "compacted":
            codex.compacted(payload, number)
            continue
        if kind == "response_item":
            codex.add(payload, number)
            finished = False
            continue
        if kind == "world_state":
            b.note("approximate-rendering", "world_state is rendered into context by Codex at "
                   "request time; it is not on the surface", once=True)
        b.omit("not-model-visible", kind, line=number)
    codex.flush()
    return b.result([path], {"until": until}, finished=finished, strict=strict)
