"""mini-swe-agent `.traj.json` files (IMPORTERS.md 8.2): `trajectory_format`
`mini-swe-agent-1` (hand-formatted chat messages) and `mini-swe-agent-1.1` (the model's
native messages plus `extra`).

mini-swe-agent has no context management: every call sends all messages so far, so the
surface is the message list in order. Each assistant message's `extra.response.usage` is
the provider's count for that call; `info.model_stats` is mini-swe-agent's own running
total (noted, not attached to any request).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .common import (
    Builder,
    ImportFailure,
    ImportResult,
    compact_json,
    load_json,
    no_foreign_errors,
    parse_time,
)

__all__ = ["import_mini_swe_agent", "looks_like_mini_swe_agent"]

FORMATS = ("mini-swe-agent-1", "mini-swe-agent-1.1")


def looks_like_mini_swe_agent(document: Any) -> bool:
    return isinstance(document, Mapping) and str(document.get(
        "trajectory_format", "")).startswith("mini-swe-agent") and isinstance(
        document.get("messages"), list)


def _map(value: Any, key: str) -> Mapping[str, Any]:
    found = value.get(key) if isinstance(value, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(response: Mapping[str, Any]) -> dict[str, int]:
    """A response's `usage` in the surface's keys, from Chat Completions names
    (`prompt_tokens`, `prompt_tokens_details.cached_tokens`, `completion_tokens`) or
    Responses names (`input_tokens`, `input_tokens_details`, `output_tokens`):
    `inputTokens` is the prompt minus its cached part, which is `cacheReadTokens`."""
    usage = _map(response, "usage")
    prompt = _count(usage.get("prompt_tokens", usage.get("input_tokens")))
    completion = _count(usage.get("completion_tokens", usage.get("output_tokens")))
    cached = _count((_map(usage, "prompt_tokens_details") or _map(
        usage, "input_tokens_details")).get("cached_tokens"))
    reasoning = _count((_map(usage, "completion_tokens_details") or _map(
        usage, "output_tokens_details")).get("reasoning_tokens"))
    out: dict[str, int] = {}
    if prompt is not None:
        if cached is not None and 0 < cached <= prompt:
            out |= {"inputTokens": prompt - cached, "cacheReadTokens": cached}
        else:
            out["inputTokens"] = prompt
    if completion is not None:
        out["outputTokens"] = completion
    if reasoning:
        out["reasoningTokens"] = reasoning
    return out


def _output_blocks(items: Any) -> list[dict[str, Any]]:
    """The `output` items of a Responses API response as blocks: messages as text,
    function calls as tool calls, reasoning as reasoning (its summary)."""
    blocks: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            blocks += [p for p in _parts(item.get("content")) if p.get("type") != "text"
                       or p.get("text")]
        elif kind == "function_call":
            arguments = item.get("arguments", "")
            blocks.append({"type": "tool-call", "id": str(item.get("call_id") or ""),
                           "name": str(item.get("name") or ""),
                           "arguments": arguments if isinstance(arguments, str)
                           else compact_json(arguments)})
        elif kind == "reasoning":
            parts = item.get("summary")
            blocks.append({"type": "reasoning", "text": "".join(
                str(p.get("text", "")) for p in (parts if isinstance(parts, list) else [])
                if isinstance(p, Mapping)), **(
                {"redacted": True} if item.get("encrypted_content") else {})})
        else:
            blocks.append({**item, "type": f"mini-swe-agent:{kind}"})
    return blocks


def _parts(content: Any) -> list[dict[str, Any]]:
    """Message content as blocks: strings and text parts as text, other parts kept under
    their own type."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, Mapping) and part.get("type") in ("text", "input_text",
                                                                "output_text"):
            out.append({"type": "text", "text": str(part.get("text", ""))})
        elif isinstance(part, Mapping):
            out.append({**part, "type": f"mini-swe-agent:{part.get('type')}"})
        elif part is not None:
            out.append({"type": "text", "text": str(part)})
    return out


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        function = _map(call, "function")
        arguments = function.get("arguments", "")
        out.append({"type": "tool-call", "id": str(call.get("id") or ""),
                    "name": str(function.get("name") or ""),
                    "arguments": arguments if isinstance(arguments, str)
                    else compact_json(arguments)})
    return out


@no_foreign_errors
def import_mini_swe_agent(source: str | Path, *, tombstones: bool = False,
                          strict: bool = False) -> ImportResult:
    """Import a mini-swe-agent `.traj.json` file.

    Args:
        source: the `.traj.json` file.
        tombstones: unused (mini-swe-agent never rewrites its history).
        strict: raise on the first problem.
    """
    path = Path(source)
    document = load_json(path)
    if not looks_like_mini_swe_agent(document):
        raise ImportFailure(f"{path}: not a mini-swe-agent trajectory (no trajectory_format "
                           f"mini-swe-agent-...)", code="format-unsupported", path=str(path))
    return _import(path, document, tombstones=tombstones, strict=strict)


def _time(message: Mapping[str, Any]) -> int | None:
    extra = _map(message, "extra")
    for value in (extra.get("timestamp"), message.get("timestamp"),
                  _map(extra, "response").get("created"), message.get("created_at")):
        found = parse_time(value)
        if found is not None:
            return found
    return None


def _import(path: Path, document: Mapping[str, Any], *, tombstones: bool,
            strict: bool) -> ImportResult:
    b = Builder("mini-swe-agent", str(path), tombstones=tombstones)
    fmt = str(document.get("trajectory_format"))
    if fmt not in FORMATS:
        b.note("format-version-unknown", f"trajectory_format {fmt!r} is newer than "
               f"{FORMATS[-1]}; read as {FORMATS[-1]}")
    info = _map(document, "info")
    config_model = _map(_map(info, "config"), "model")
    default_model = str(config_model.get("model_name") or "unknown")
    messages = list(document["messages"])
    b.at(next((t for m in messages if isinstance(m, Mapping) and (t := _time(m))), 0))
    b.start({"version": 0, "id": str(document.get("instance_id") or path.name.removesuffix(
        ".traj.json")), "createdAt": b.time})
    last_assistant = max((i for i, m in enumerate(messages) if isinstance(m, Mapping)
                          and m.get("role") == "assistant"), default=-1)
    task_seen = False
    assistants = 0
    no_usage = 0
    for index, message in enumerate(messages):
        item_id = f"m{index}"
        origin = {"file": str(path), "line": None, "id": item_id}
        if not isinstance(message, Mapping):
            b.problem("message-invalid", f"message {index} is not an object")
            b.omit("unparsable", "not-an-object", id=item_id)
            continue
        b.at(_time(message))
        role = message.get("role")
        kind = message.get("type")
        extra = _map(message, "extra")
        if role == "system" or role == "developer":
            b.omit("system-prompt", f"message:{role}", id=item_id)
            continue
        whole = message.get("object") == "response"  # a Responses API response
        if role == "assistant" or whole or kind in ("function_call", "reasoning") or (
                kind == "message" and role == "assistant"):
            assistants += 1
            response = message if whole else _map(extra, "response")
            blocks: list[dict[str, Any]] = (_output_blocks(message.get("output"))
                                            if whole else [])
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                blocks.append({"type": "reasoning", "text": reasoning})
            if kind == "reasoning":
                parts = message.get("summary")
                summary = "".join(str(p.get("text", "")) for p in (
                    parts if isinstance(parts, list) else []) if isinstance(p, Mapping))
                blocks.append({"type": "reasoning", "text": summary, **(
                    {"redacted": True} if message.get("encrypted_content") else {})})
            elif kind == "function_call":
                arguments = message.get("arguments", "")
                blocks.append({"type": "tool-call", "id": str(message.get("call_id") or ""),
                               "name": str(message.get("name") or ""),
                               "arguments": arguments if isinstance(arguments, str)
                               else compact_json(arguments)})
            elif not whole:
                blocks += [p for p in _parts(message.get("content"))
                           if p.get("type") != "text" or p.get("text")]
                blocks += _calls(message)
            usage = usage_of(response)
            if not usage:
                no_usage += 1
            name = str(response.get("model") or default_model)
            provider, _, model = name.partition("/")
            if not model:
                provider, model = str(response.get("provider") or "unknown"), name
            b.assistant(item_id, blocks, provider=provider, model=model,
                        step_key=response.get("id") or item_id, origin=origin,
                        usage=usage or None, responseId=response.get("id"))
            continue
        if role == "tool" or kind == "function_call_output":
            call_id = str(message.get("tool_call_id") or message.get("call_id") or "")
            content = _parts(message.get("content") if role == "tool"
                             else message.get("output"))
            returncode = extra.get("returncode")
            b.tool_result(item_id, call_id, content, isinstance(returncode, int) and
                          not isinstance(returncode, bool) and returncode != 0, origin)
            continue
        if role == "exit" or (role == "user" and index > last_assistant and task_seen):
            b.context(item_id, _parts(message.get("content")), "exit", origin)
            continue
        if role == "user" and not task_seen:
            task_seen = True
            b.user(item_id, _parts(message.get("content")), origin)
            continue
        if role == "user":
            b.context(item_id, _parts(message.get("content")), "observation", origin,
                      in_step=b.step_open)
            continue
        b.problem("message-invalid", f"message {index}: role {role!r} is not one "
                  f"mini-swe-agent writes; kept as context")
        b.context(item_id, _parts(message.get("content")), f"role:{role}", origin)
    if no_usage:
        b.note("usage-missing", f"{no_usage} of {assistants} assistant message(s) carry no "
               f"usage in extra.response")
    stats = _map(info, "model_stats")
    selection: dict[str, Any] = {"trajectory_format": fmt, "assistant_messages": assistants}
    if stats:
        counted = {k: v for k, v in stats.items() if isinstance(v, (int, float, str))}
        selection["model_stats"] = {**counted, "countedBy": "mini-swe-agent (local count)"}
        b.note("local-model-stats", "info.model_stats is mini-swe-agent's own running total, "
               "not a request's usage: " + ", ".join(f"{k}={v}" for k, v in counted.items()))
        calls = _count(stats.get("api_calls"))
        if calls is not None and calls != assistants:
            b.note("api-calls-differ", f"model_stats counts {calls} API call(s); the file "
                   f"holds {assistants} assistant message(s)")
    exit_status = info.get("exit_status")
    if exit_status:
        selection["exit_status"] = str(exit_status)
    # 1.1 writes the last message's exit status, "" while the run is not over
    return b.result([path], selection, finished=bool(exit_status), strict=strict)
