"""ATIF trajectories (IMPORTERS.md section 6): a root trajectory and its continuations as
one surface log; a context-management boundary becomes a compaction bracket whose target
is the continuation's copied context."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..events import mapping_at
from ..messages import message_text
from .common import (
    Builder,
    ImportFailure,
    ImportResult,
    compact_json,
    load_json,
    no_foreign_errors,
    parse_time,
    printable,
)
from .planner import Keep, New

__all__ = ["import_atif", "looks_like_atif"]

MAX_FILES = 1000


def looks_like_atif(document: Any) -> bool:
    return isinstance(document, Mapping) and str(document.get("schema_version", "")).startswith(
        "ATIF-")


def _load(path: Path) -> Any:
    return load_json(path)


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        return "\n".join(str(p.get("text", "")) for p in message
                         if isinstance(p, Mapping) and p.get("type") == "text")
    return "" if message is None else json.dumps(message)


def continuation_file(root: Path, current: Path, ref: Any, b: Builder,
                  what: str = "continuation") -> Path | None:
    """Resolve a continuation (or subagent) reference inside the root's folder only."""
    if not isinstance(ref, str) or not ref or Path(ref).is_absolute() or ".." in Path(
            ref).parts or "/" in ref or "\\" in ref:
        b.problem("continuation-missing", f"{what} reference {ref!r} is not a file "
                  f"name inside the trajectory's folder; not followed")
        return None
    folder = root.parent.resolve()
    direct = folder / ref
    if direct.is_file():
        return direct
    stem = current.name.rsplit("trajectory", 1)[0] if "trajectory" in current.name else ""
    prefixed = folder / (stem + ref)
    if stem and prefixed.is_file() and prefixed.resolve().parent == folder:
        b.note("continuation-resolved-by-prefix", f"{ref} resolved as {prefixed.name}")
        return prefixed
    b.problem("continuation-missing", f"{what} {ref!r} is not in {folder}")
    return None


@no_foreign_errors
def import_atif(source: str | Path, *, tombstones: bool = False,
                strict: bool = False) -> ImportResult:
    """Import an ATIF trajectory, following `continued_trajectory_ref` inside its folder.

    Args:
        source: the root trajectory `.json` file.
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
    """
    root = Path(source)
    b = Builder("atif", str(root), tombstones=tombstones)
    document = _load(root)
    if not looks_like_atif(document):
        raise ImportFailure(f"{root}: not an ATIF trajectory (no schema_version ATIF-...)",
                            code="format-unsupported", path=str(root))
    files: list[tuple[Path, Any]] = [(root, document)]
    while len(files) < MAX_FILES:
        ref = files[-1][1].get("continued_trajectory_ref")
        if ref is None:
            break
        nxt = continuation_file(root, files[-1][0], ref, b)
        if nxt is None or any(nxt == f for f, _ in files):
            break
        data = _load(nxt)
        if not looks_like_atif(data):
            b.problem("continuation-missing", f"{nxt.name} is not an ATIF trajectory")
            break
        files.append((nxt, data))
    steps0 = document.get("steps") if isinstance(document.get("steps"), list) else []
    first_time = next((t for s in steps0 if isinstance(s, Mapping)
                       and (t := parse_time(s.get("timestamp")))), 0)
    b.at(first_time)
    b.start({"version": 0, "id": str(document.get("session_id") or root.stem),
             "createdAt": b.time})
    agent = mapping_at(document, "agent")
    default_model = str(agent.get("model_name") or "unknown")
    pending_boundary: tuple[Mapping[str, Any], dict[str, Any]] | None = None
    extra_sources: list[Path] = []
    for index, (path, data) in enumerate(files):
        steps = _objects(b, data.get("steps"), f"{path.name} steps")
        if index > 0:
            boundary = pending_boundary
            if pending_boundary is None:
                b.note("implicit-continuation-boundary", f"{path.name}: no context_management"
                       f" step before it; a boundary is assumed at the end of the previous "
                       f"file")
            copied = []
            while steps and steps[0].get("is_copied_context"):
                copied.append(steps.pop(0))
            _boundary(b, index, boundary, copied, path, default_model)
        pending_boundary = None
        for position, step in enumerate(steps):
            step_id = f"f{index}:step-{step.get('step_id')}"
            origin: dict[str, Any] = {"file": str(path), "line": None, "id": step_id}
            b.at(parse_time(step.get("timestamp")))
            extra = mapping_at(step, "extra")
            source_kind = step.get("source")
            if step.get("is_copied_context"):
                b.problem("copied-context-outside-continuation", f"{path.name} step "
                          f"{step.get('step_id')} is copied context outside a continuation head")
            boundary_step = source_kind == "system" and isinstance(
                extra.get("context_management"), Mapping)
            if boundary_step and position == len(steps) - 1 and index < len(files) - 1:
                pending_boundary = (step, origin)  # its target opens the next file
                continue
            if source_kind == "system" and _summarized_by_subagents(step):
                # terminus-2 without linear history (ATIF v1.5 and later): the reset is
                # this step; the handoff lives in the summarization subagents' files.
                _summarization(b, root, path, step, origin, default_model, extra_sources)
                continue
            if boundary_step:
                _boundary(b, index, (step, origin), [], path, default_model)
                continue
            if source_kind == "system":
                if b.session is not None and not b.session.events and index == 0:
                    b.note("system-prompt-not-on-surface", "the leading system step is the "
                           "system prompt; it is not a surface item")
                    b.omit("system-prompt", "system", id=step_id, file=str(path))
                    continue
                b.context(step_id, _text(step.get("message")), "system", origin)
            elif source_kind == "user":
                b.user(step_id, _text(step.get("message")), origin)
            elif source_kind == "agent":
                _agent(b, step, origin, default_model)
            else:
                b.omit("not-model-visible", f"step:{source_kind}", id=step_id, file=str(path))
    finished = bool(files[-1][1].get("final_metrics"))
    return b.result([*(p for p, _ in files), *extra_sources],
                    {"files": [p.name for p, _ in files]}, finished=finished, strict=strict)


def _usage(metrics: Mapping[str, Any]) -> dict[str, int]:
    """A step's `metrics` in the surface's usage keys. ATIF's `prompt_tokens` includes the
    cached tokens; `inputTokens` is the rest, so that input + cache reads is the prompt
    (as Anthropic reports it, and as the Codex importer splits it). When the cached count
    exceeds the prompt, the prompt is kept whole."""
    def count(key: str) -> int | None:
        value = metrics.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    prompt, cached, completion = (count("prompt_tokens"), count("cached_tokens"),
                                  count("completion_tokens"))
    usage = {} if completion is None else {"outputTokens": completion}
    if prompt is not None and cached is not None and cached <= prompt:
        usage |= {"inputTokens": prompt - cached, "cacheReadTokens": cached}
    elif prompt is not None:
        usage["inputTokens"] = prompt
    elif cached is not None:
        usage["cacheReadTokens"] = cached
    return usage


def _split_model(step: Mapping[str, Any], default: str) -> tuple[str, str]:
    name = str(step.get("model_name") or default)
    provider, _, model = default.partition("/")
    if "/" in name:
        provider, _, model = name.partition("/")
    elif step.get("model_name"):
        model = name
    return (provider if model else "unknown"), (model or name)


def _agent(b: Builder, step: Mapping[str, Any], origin: dict[str, Any], default: str,
           *, copied: bool = False) -> None:
    content: list[dict[str, Any]] = []
    if step.get("reasoning_content"):
        content.append({"type": "reasoning", "text": str(step["reasoning_content"])})
    if step.get("message"):
        content.append({"type": "text", "text": _text(step.get("message"))})
    calls = _objects(b, step.get("tool_calls"), f"step {step.get('step_id')} tool_calls")
    for call in calls:
        content.append({"type": "tool-call", "id": str(call.get("tool_call_id", "")),
                        "name": str(call.get("function_name", "")),
                        "arguments": compact_json(call.get("arguments", {}))})
    provider, model = _split_model(step, default)
    usage = _usage(mapping_at(step, "metrics"))
    b.assistant(origin["id"], content, provider=provider, model=model, step_key=origin["id"],
                origin=origin, usage=usage or None)
    ids = {c.get("tool_call_id") for c in calls}
    observation = mapping_at(step, "observation")
    results = observation.get("results")
    for k, result in enumerate(results if isinstance(results, list) else []):
        if not isinstance(result, Mapping):
            b.problem("record-malformed", printable(
                f"{origin['id']} observation result {k}: {_json_kind(result)}, not an "
                f"object; left out"))
            continue
        if result.get("content") is None:
            if result.get("subagent_trajectory_ref"):
                b.note("subagent-not-imported", "a subagent trajectory is not spliced in")
                b.omit("subagent-reference", "observation", id=f"{origin['id']}:obs-{k}",
                       file=origin["file"])
            continue
        rid = f"{origin['id']}:obs-{k}"
        text = _text(result.get("content"))
        if result.get("source_call_id") in ids and result.get("source_call_id"):
            b.tool_result(rid, str(result["source_call_id"]), text, False, {**origin, "id": rid})
        else:
            b.context(rid, text, "observation", {**origin, "id": rid}, in_step=True)


def _boundary(b: Builder, index: int, boundary: Any, copied: list[Mapping[str, Any]],
              path: Path, default_model: str) -> None:
    """The target: the boundary's observation contents, then the copied context."""
    step, origin = boundary if boundary is not None else (None, None)
    compaction_id = origin["id"] if origin else f"f{index}:implicit-boundary"
    for k, ref in enumerate(_refs(step) if step is not None else []):
        b.omit("subagent-reference", "subagent_trajectory_ref",
               id=f"{compaction_id}:ref-{k}:{ref.get('trajectory_path')}",
               file=origin["file"] if origin else None)
    events = b.session.events if b.session is not None else []
    surface = b.surface()
    target: list[Keep | New] = []
    used: set[int] = set()
    summary_done = False
    items: list[tuple[str, str, str]] = []  # (kind, text, id)
    if step is not None:
        observation = mapping_at(step, "observation")
        for k, result in enumerate(observation.get("results") or []):
            if isinstance(result, Mapping) and result.get("content") is not None:
                items.append(("boundary", _text(result["content"]), f"{compaction_id}:obs-{k}"))
    for step_copied in copied:
        items.append((str(step_copied.get("source")), _text(step_copied.get("message")),
                      f"f{index}:step-{step_copied.get('step_id')}"))
    last_kept = -1
    for kind, text, item_id in items:
        match = next((seq for seq in surface if seq not in used
                      and surface.index(seq) > last_kept
                      and _same(events[seq], kind, text)), None)
        if match is not None:
            used.add(match)
            last_kept = surface.index(match)
            target.append(Keep(match))
            continue
        item_origin = {"file": str(path), "line": None, "id": item_id}
        if kind in ("user", "boundary") and not summary_done:
            summary_done = True
            target.append(New("user/message", {
                "id": item_id, "role": "user", "content": [{"type": "text", "text": text}],
                "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction_id,
                           "importedFrom": "atif"}}, origin=item_origin))
        elif kind == "agent":
            provider, _, model = default_model.partition("/")
            target.append(New("assistant/message", {
                "turn": b.turn, "step": 0, "message": {
                    "id": item_id, "role": "assistant", "content": [{"type": "text",
                                                                     "text": text}],
                    "source": {"kind": "model", "provider": provider if model else "unknown",
                               "model": model or provider}}}, origin=item_origin))
        else:
            target.append(New("context/message", {
                "id": item_id, "role": "user", "content": [{"type": "text", "text": text}],
                "source": {"kind": "harness", "harness": "atif",
                           "origin": "boundary-content" if kind == "boundary"
                           else "copied-context"}}, origin=item_origin))
    summary: list[dict[str, Any]] = next((t.data["content"] for t in target if isinstance(t, New)
                    and t.data.get("source", {}).get("plugin") == "compact"), [])
    b.compaction(compaction_id, target, summary=summary, origin=origin, imported={
        "continuation": path.name, "contextManagement": json.dumps(
            (step or {}).get("extra", {}).get("context_management"))})


def _refs(step: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The subagent trajectory references of a step's observation results."""
    out: list[Mapping[str, Any]] = []
    for result in mapping_at(step, "observation").get("results") or []:
        refs = result.get("subagent_trajectory_ref") if isinstance(result, Mapping) else None
        for ref in refs if isinstance(refs, list) else [refs]:
            if isinstance(ref, Mapping):
                out.append(ref)
    return out


def _objects(b: Builder, items: Any, what: str) -> list[Mapping[str, Any]]:
    """The objects of a list of steps or calls; anything else in it (null, a string, a
    list) is a problem, never left out without a word (it could be the system prompt)."""
    if items is None:
        return []
    if not isinstance(items, list):
        b.problem("record-malformed", f"{what}: a {type(items).__name__}, not a list; "
                  f"none of it imported")
        return []
    kept = [item for item in items if isinstance(item, Mapping)]
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            b.problem("record-malformed", printable(
                f"{what}[{position}]: {_json_kind(item)}, not an object; left out"))
    return kept


def _json_kind(value: Any) -> str:
    """How JSON names a value's type: null, a string, a list, a number, a boolean."""
    return ("null" if value is None else "a boolean" if isinstance(value, bool)
            else "a string" if isinstance(value, str) else "a list" if isinstance(value, list)
            else "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _summarized_by_subagents(step: Mapping[str, Any]) -> bool:
    """A system step whose observation names summarization subagents and carries no
    content of its own (terminus-2's record of a context summarization and handoff)."""
    refs = _refs(step)
    results = [r for r in mapping_at(step, "observation").get("results") or []
               if isinstance(r, Mapping)]
    return bool(refs) and all(r.get("content") is None for r in results) and any(
        "summarization" in str(ref.get("trajectory_path", "")) + str(ref.get("session_id", ""))
        for ref in refs)


def _summarization(b: Builder, root: Path, path: Path, step: Mapping[str, Any],
                   origin: dict[str, Any], default_model: str,
                   extra_sources: list[Path]) -> None:
    """terminus-2's reset after a summarization: the context becomes the first message
    (the task prompt), the question prompt that carries the summary, and the new agent's
    questions; the answers follow as the next user step of this file. The prompt and the
    questions are read from the `...-questions` subagent trajectory."""
    compaction_id = str(origin["id"])
    refs = _refs(step)
    for k, ref in enumerate(refs):
        b.omit("subagent-reference", "subagent_trajectory_ref",
               id=f"{compaction_id}:ref-{k}:{ref.get('trajectory_path')}", file=str(path))
    b.note("subagent-summarization", f"{compaction_id}: a context summarization recorded as "
           f"{len(refs)} subagent trajectories; the context is reset to the task prompt, the "
           f"handoff summary and the new agent's questions, as terminus-2 does")
    questions = next((r for r in refs if str(r.get("trajectory_path", "")).endswith(
        "questions.json") or str(r.get("session_id", "")).endswith("-questions")), None)
    prompt = answer = None
    found = continuation_file(root, path, (questions or {}).get("trajectory_path"), b,
                          what="summarization subagent") if questions is not None else None
    if questions is None:
        b.problem("continuation-missing", f"{compaction_id}: no questions subagent among the "
                  f"references; the handoff the model saw is not known")
    if found is not None:
        extra_sources.append(found)
        data = _load(found)
        own = [s for s in (data.get("steps") or []) if isinstance(s, Mapping)
               and not s.get("is_copied_context")] if isinstance(data, Mapping) else []
        prompt = next((s for s in own if s.get("source") == "user"), None)
        answer = next((s for s in own if s.get("source") == "agent"
                       and (prompt is None or own.index(s) > own.index(prompt))), None)
    surface = b.surface()
    first = surface[0] if surface else None
    target: list[Keep | New] = []
    if first is not None and b.event(first)["type"] == "user/message":
        target.append(Keep(first))
    file = str(found) if found is not None else str(path)
    if prompt is not None:
        pid = f"{compaction_id}:summary"
        target.append(New("user/message", {
            "id": pid, "role": "user",
            "content": [{"type": "text", "text": _text(prompt.get("message"))}],
            "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction_id,
                       "importedFrom": "atif"}}, origin={"file": file, "line": None,
                                                         "id": pid}))
    if answer is not None:
        provider, model = _split_model(answer, default_model)
        qid = f"{compaction_id}:questions"
        target.append(New("assistant/message", {"turn": b.turn, "step": 0, "message": {
            "id": qid, "role": "assistant",
            "content": [{"type": "text", "text": _text(answer.get("message"))}],
            "source": {"kind": "model", "provider": provider, "model": model}}},
            origin={"file": file, "line": None, "id": qid}))
    summary: list[dict[str, Any]] = next((t.data["content"] for t in target if isinstance(
        t, New) and t.type == "user/message"), [])
    if not summary:
        b.problem("compaction-without-summary", f"{compaction_id}: the handoff summary is not "
                  f"available; only the reset is written")
    b.compaction(compaction_id, target, summary=summary, origin=origin, imported={
        "step": step.get("step_id"), "subagents": json.dumps(
            [r.get("trajectory_path") for r in refs])})


def _same(event: Mapping[str, Any], kind: str, text: str) -> bool:
    wanted = {"user": ("user/message",), "agent": ("assistant/message",),
              "boundary": ("user/message", "context/message"),
              "system": ("context/message",)}.get(kind, ())
    return event["type"] in wanted and message_text(event) == text
