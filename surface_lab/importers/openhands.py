"""OpenHands V1 event folders (IMPORTERS.md section 7): the branch to the leaf, with a
shadow copy of OpenHands' `View` so that condensation offsets land where they did."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..events import mapping_at
from .common import Builder, ImportFailure, ImportResult, load_json, parse_time
from .planner import Keep, New

__all__ = ["import_openhands", "looks_like_openhands"]

EVENT_FILE = re.compile(r"event-(\d{5,})-(.+)\.json")
NOT_ON_BRANCH_END = {"ConversationStateUpdateEvent", "ConversationErrorEvent"}
ERROR_PREFIX = "[An error occurred during execution.]\n"


def looks_like_openhands(path: Path) -> bool:
    folder = path / "events"
    return path.is_dir() and folder.is_dir() and any(
        EVENT_FILE.fullmatch(p.name) for p in folder.iterdir())


def _texts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, Mapping) and part.get("type") == "text":
            out.append({"type": "text", "text": str(part.get("text", ""))})
        elif isinstance(part, Mapping):
            out.append({**part, "type": f"openhands:{part.get('type')}"})
    return out


def _load_events(folder: Path, b: Builder) -> list[tuple[int, Path, dict[str, Any]]]:
    found = []
    for path in sorted((folder / "events").iterdir()):
        match = EVENT_FILE.fullmatch(path.name)
        if not match or not path.is_file() or path.is_symlink():
            continue
        try:
            event = load_json(path)
        except ImportFailure as err:
            reason = err.message.removeprefix(f"{path}: ")
            b.problem("line-unparsable", f"{path.name}: {reason}")
            b.omit("unparsable", "event-file", id=path.name, file=str(path))
            continue
        if not isinstance(event, dict) or not isinstance(event.get("id"), str):
            b.problem("line-unparsable", f"{path.name}: not an event object with an id")
            b.omit("unparsable", "event-file", id=path.name, file=str(path))
            continue
        found.append((int(match.group(1)), path, event))
    return sorted(found, key=lambda item: item[0])


def import_openhands(source: str | Path, *, leaf: str | None = None,
                     tombstones: bool = False, strict: bool = False) -> ImportResult:
    """Import an OpenHands V1 conversation folder (`base_state.json` and `events/`).

    Args:
        source: the conversation folder.
        leaf: an event id; by default `base_state.leaf_event_id`, else the last event.
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
    """
    folder = Path(source)
    b = Builder("openhands", str(folder), tombstones=tombstones)
    if not looks_like_openhands(folder):
        raise ImportFailure(f"{folder}: not an OpenHands conversation folder (no events/"
                            f"event-NNNNN-<id>.json)", code="format-unsupported",
                            path=str(folder))
    state: dict[str, Any] = {}
    state_path = folder / "base_state.json"
    if state_path.is_file():
        try:
            loaded = load_json(state_path)
            state = loaded if isinstance(loaded, dict) else {}
        except ImportFailure:
            b.problem("line-unparsable", "base_state.json is not JSON")
    items = _load_events(folder, b)
    by_id = {event["id"]: (index, path, event) for index, path, event in items}
    parent: dict[str, str | None] = {}
    previous: str | None = None
    for _, _, event in items:
        explicit = event.get("parent_id")
        parent[event["id"]] = None if explicit == "__root__" else (
            explicit if isinstance(explicit, str) else previous)
        previous = event["id"]
    chosen = leaf or state.get("leaf_event_id")
    if chosen is None:
        chosen = next((e["id"] for _, _, e in reversed(items)
                       if e.get("kind") not in NOT_ON_BRANCH_END), None)
    if chosen is not None and chosen not in by_id:
        raise ImportFailure(f"{folder}: no event {chosen!r} to use as the leaf",
                            code="leaf-unknown", path=str(folder))
    branch, seen, at = [], set(), chosen
    while at is not None:
        if at in seen or at not in by_id:
            b.problem("cycle" if at in seen else "dangling-parent", f"event {at}")
            break
        seen.add(at)
        branch.append(at)
        at = parent[at]
    branch.reverse()
    b.note("leaf-choice", f"imported the branch to {chosen} ({len(branch)} events)")
    times = [by_id[e][2].get("timestamp") for e in branch]
    if any(isinstance(t, str) and parse_time(t) is not None and not re.search(
            r"(Z|[+-]\d\d:?\d\d)$", t) for t in times):
        b.note("naive-timestamp", "timestamps have no zone; read as UTC")
    b.at(next((t for x in times if (t := parse_time(x))), 0))
    b.start({"version": 0, "id": str(state.get("id") or folder.name), "createdAt": b.time})
    provider, model = _model(state)
    on_branch = set(branch)
    for _, path, event in items:
        if event["id"] not in on_branch:
            b.omit("off-branch", event.get("kind"), id=event["id"], file=str(path))
    view: list[str] = []  # OpenHands' view: LLM-convertible ids, summaries included
    seq_of: dict[str, int] = {}
    last_kind: tuple[str, str] | None = None
    for event_id in branch:
        _, path, event = by_id[event_id]
        kind, source_kind = event.get("kind"), event.get("source")
        origin = {"file": str(path.relative_to(folder)), "line": None, "id": event_id}
        b.at(parse_time(event.get("timestamp")))
        if kind == "SystemPromptEvent":
            view.append(event_id)
            b.note("system-prompt-not-on-surface", "the system prompt is in the view but not "
                   "on the surface", once=True)
            b.omit("system-prompt", kind, id=event_id, file=str(path))
            continue
        if kind == "MessageEvent":
            view.append(event_id)
            message = mapping_at(event, "llm_message")
            content = _texts(message.get("content")) + _texts(event.get("extended_content"))
            if source_kind == "user":
                seq_of[event_id] = int(b.user(event_id, content, origin)["seq"])
            elif source_kind == "agent":
                blocks = ([{"type": "reasoning", "text": str(event["reasoning_content"])}]
                          if event.get("reasoning_content") else []) + content
                seq_of[event_id] = int(b.assistant(
                    event_id, blocks, provider=provider, model=model, step_key=event_id,
                    origin=origin)["seq"])
            else:
                seq_of[event_id] = int(b.context(event_id, content, "environment-message",
                                                 origin)["seq"])
            last_kind = (str(kind), str(source_kind))
            continue
        if kind == "ActionEvent":
            view.append(event_id)
            call = mapping_at(event, "tool_call")
            blocks = ([{"type": "reasoning", "text": str(event["reasoning_content"])}]
                if event.get("reasoning_content") else [])
            blocks += _texts(event.get("thought"))
            call_id = str(event.get("tool_call_id") or call.get("id") or f"call:{event_id}")
            arguments = call.get("arguments", "{}")
            blocks.append({"type": "tool-call", "id": call_id,
                           "name": str(call.get("name") or event.get("tool_name") or ""),
                           "arguments": arguments if isinstance(arguments, str)
                           else json.dumps(arguments)})
            seq_of[event_id] = int(b.assistant(
                event_id, blocks, provider=provider, model=model,
                step_key=event.get("llm_response_id") or event_id, origin=origin)["seq"])
            last_kind = (str(kind), str(source_kind))
            continue
        if kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
            view.append(event_id)
            if kind == "ObservationEvent":
                observation = mapping_at(event, "observation")
                content = _texts(observation.get("content"))
                error = bool(observation.get("is_error"))
                if error:
                    content = [{"type": "text", "text": ERROR_PREFIX}, *content]
            else:
                error = True
                content = _texts(event.get("rejection_reason") or event.get("error") or "")
            seq_of[event_id] = int(b.tool_result(event_id, str(event.get("tool_call_id", "")),
                                                 content, error, origin)["seq"])
            last_kind = (str(kind), str(source_kind))
            continue
        if kind == "Condensation":
            view = _condense(b, event, view, seq_of, origin)
            continue
        b.omit("not-model-visible", kind, id=event_id, file=str(path))
    b.note("view-properties-not-enforced", "the view is folded as during a live run; a "
           "resumed OpenHands conversation may drop more events", once=True)
    finished = last_kind == ("MessageEvent", "agent")
    return b.result([p for _, p, _ in items], {"leaf": chosen}, finished=finished, strict=strict)


def _model(state: Mapping[str, Any]) -> tuple[str, str]:
    """The agent's LLM as `base_state.json` names it (`agent.llm.model`, a LiteLLM name
    such as "anthropic/claude-sonnet-4-5"): provider before the first "/", else
    unknown."""
    name = mapping_at(mapping_at(state, "agent"), "llm").get("model")
    if not isinstance(name, str) or not name:
        return "unknown", "unknown"
    provider, _, model = name.partition("/")
    return (provider, model) if model else ("unknown", name)


def _condense(b: Builder, event: Mapping[str, Any], view: list[str], seq_of: dict[str, int],
              origin: dict[str, Any]) -> list[str]:
    """Apply a Condensation to the view as OpenHands does, and write it as a bracket."""
    condensation_id = str(event["id"])
    forgotten = [i for i in event.get("forgotten_event_ids") or [] if isinstance(i, str)]
    unknown = [i for i in forgotten if i not in view]
    if unknown:
        b.problem("forgotten-id-unknown", f"condensation {condensation_id}: {len(unknown)} "
                  f"forgotten id(s) are not in the view (ignored)")
    reduced = [i for i in view if i not in set(forgotten)]
    summary, offset = event.get("summary"), event.get("summary_offset")
    summary_id = f"{condensation_id}-summary"
    if (summary is None) != (offset is None):
        b.problem("summary-without-offset", f"condensation {condensation_id}: a summary and "
                  f"an offset go together; no summary is inserted")
    elif summary is not None and isinstance(offset, int):
        if offset > len(reduced) or offset < 0:
            b.problem("summary-offset-past-end", f"condensation {condensation_id}: offset "
                      f"{offset} clamped to {len(reduced)}")
            offset = max(0, min(offset, len(reduced)))
        reduced.insert(offset, summary_id)
    target: list[Keep | New] = []
    for item in reduced:
        if item == summary_id:
            target.append(New("user/message", {
                "id": summary_id, "role": "user",
                "content": [{"type": "text", "text": str(summary)}],
                "source": {"kind": "plugin", "plugin": "compact",
                           "compactionId": condensation_id, "importedFrom": "openhands"}},
                origin=origin))
        elif item in seq_of:
            target.append(Keep(seq_of[item]))
    row = b.compaction(condensation_id, target, summary=[{"type": "text", "text": str(summary)}]
                       if summary is not None else [], origin=origin, imported={
                           "forgottenEventIds": json.dumps(forgotten),
                           "summaryOffset": event.get("summary_offset"),
                           "llmResponseId": event.get("llm_response_id")})
    for source_id, seq in list(seq_of.items()):
        if seq in row["copied"]:
            seq_of[source_id] = row["copied"][seq]
    if summary_id in reduced:
        summary_seq = next((s for s in reversed(b.surface())
                            if b.event(s)["data"].get("id") == summary_id), None)
        if summary_seq is not None:
            seq_of[summary_id] = summary_seq
    return reduced
