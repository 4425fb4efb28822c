"""OpenHands V1 event folders (IMPORTERS.md section 7): the branch to the leaf, with a
shadow copy of OpenHands' `View` so that condensation offsets land where they did."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..events import mapping_at
from ..jsonvalue import thaw
from .common import Builder, ImportFailure, ImportResult, load_json, no_foreign_errors, parse_time
from .planner import Keep, New

__all__ = ["import_openhands", "import_openhands_v0", "looks_like_openhands",
           "looks_like_openhands_v0", "looks_like_openhands_v0_folder"]

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


@no_foreign_errors
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
                       if not isinstance(e.get("kind"), str)
                       or e.get("kind") not in NOT_ON_BRANCH_END), None)
    if chosen is not None and (not isinstance(chosen, str) or chosen not in by_id):
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
    listed = event.get("forgotten_event_ids")
    forgotten = [i for i in (listed if isinstance(listed, list) else []) if isinstance(i, str)]
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


# -- OpenHands V0 (IMPORTERS.md 7.6 and 8.3) -------------------------------------------------

V0_SKIPPED_ACTIONS = {"change_agent_state", "null", "recall", "condensation_request",
                      "start", "pause", "resume", "stop"}
V0_SKIPPED_OBSERVATIONS = {"agent_state_changed", "null", "agent_condensation", "success"}
MASKED = "<MASKED>"
# Events the V0 agent controller keeps out of the history its View is built from.
V0_FILTERED = {"change_agent_state", "null", "agent_state_changed"}


def is_v0_event(value: Any) -> bool:
    return isinstance(value, Mapping) and "id" in value and (
        isinstance(value.get("action"), str) or isinstance(value.get("observation"), str))


def looks_like_openhands_v0(document: Any) -> bool:
    """A V0 trajectory: a JSON list of events, or an object with a `history` list of them
    (an evaluation `output.jsonl` line)."""
    events = document.get("history") if isinstance(document, Mapping) else document
    return isinstance(events, list) and bool(events) and all(
        is_v0_event(e) for e in events[:3] if isinstance(e, Mapping)) and is_v0_event(
        next((e for e in events if isinstance(e, Mapping)), None))


V0_EVENT_FILE = re.compile(r"(\d+)\.json")
MAX_EVENT_FILES = 1_000_000


def looks_like_openhands_v0_folder(path: Path) -> bool:
    """A V0 session folder (`sessions/<sid>/`): `events/<n>.json`, one event per file."""
    folder = path / "events"
    return path.is_dir() and folder.is_dir() and not looks_like_openhands(path) and any(
        V0_EVENT_FILE.fullmatch(p.name) for p in folder.iterdir())


def _v0_folder_events(path: Path, b: Builder) -> list[Any]:
    """The events of a V0 session folder in id order; files that are not events are
    problems, symlinks are not followed."""
    found = []
    for file in (path / "events").iterdir():
        match = V0_EVENT_FILE.fullmatch(file.name)
        if not match or not file.is_file() or file.is_symlink():
            continue
        try:
            found.append((int(match.group(1)), load_json(file)))
        except ImportFailure as err:
            b.problem("line-unparsable", f"{file.name}: "
                      f"{err.message.removeprefix(f'{file}: ')}")
            b.omit("unparsable", "event-file", id=file.name, file=str(file))
        if len(found) > MAX_EVENT_FILES:
            break
    return [event for _, event in sorted(found, key=lambda item: item[0])]


def _v0_instances(path: Path, b: Builder) -> list[tuple[int | None, dict[str, Any]]]:
    """The trajectories in a file: one for a JSON document, one per line of output.jsonl
    (with its line number); one for a V0 session folder."""
    from .common import read_jsonl

    if path.is_dir():
        return [(None, {"history": _v0_folder_events(path, b), "instance_id": path.name})]
    if path.suffix != ".jsonl":
        document = load_json(path)
        if isinstance(document, list):
            return [(None, {"history": document})]
        return [(None, document)] if isinstance(document, dict) else []
    return [(line, record) for line, record in read_jsonl(path, b)
            if isinstance(record.get("history"), list)]


DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+);base64,(.*)", re.S)


def _v0_images(urls: Any) -> list[dict[str, Any]]:
    """A user message's `image_urls`: data URLs as images identified by their bytes' hash,
    other URLs as blocks of their own type."""
    from .common import image_block

    out = []
    for url in urls if isinstance(urls, list) else []:
        match = DATA_URL.fullmatch(url) if isinstance(url, str) else None
        if match:
            out.append(image_block(match.group(2), match.group(1)))
        elif isinstance(url, str):
            out.append({"type": "openhands-v0:image_url", "url": url})
    return out


def _v0_text(event: Mapping[str, Any]) -> str:
    content = event.get("content")
    if content is None:
        content = mapping_at(event, "args").get("content")
    if content is None:
        content = event.get("message")
    return "" if content is None else str(content)


@no_foreign_errors
def import_openhands_v0(source: str | Path, *, leaf: str | None = None,
                        tombstones: bool = False, strict: bool = False) -> ImportResult:
    """Import an OpenHands V0 trajectory (a JSON list of events, or `{history: [...]}`) or
    one instance of an evaluation `output.jsonl`.

    Args:
        source: the file.
        leaf: for output.jsonl, the `instance_id` to import (default the first line).
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
    """
    path = Path(source)
    b = Builder("openhands-v0", str(path), tombstones=tombstones)
    instances = _v0_instances(path, b)
    chosen = next(((line, r) for line, r in instances if leaf is None
                   or str(r.get("instance_id")) == leaf), None)
    if chosen is None or not looks_like_openhands_v0(chosen[1]):
        what = (f"no instance {leaf!r}" if leaf is not None and instances
                else "no history of OpenHands V0 events")
        raise ImportFailure(f"{path}: not an OpenHands V0 trajectory ({what})",
                           code="leaf-unknown" if leaf is not None and instances
                           else "format-unsupported", path=str(path))
    for line, record in instances:
        if record is not chosen[1]:
            b.omit("off-branch", "instance", line=line, id=record.get("instance_id"))
    if len(instances) > 1:
        b.note("instance-choice", f"imported instance {chosen[1].get('instance_id')!r} "
               f"(line {chosen[0]}) of {len(instances)}; pick another with --leaf "
               f"INSTANCE_ID")
    return _import_v0(b, path, chosen[0], chosen[1], strict=strict)


def _v0_model(record: Mapping[str, Any]) -> tuple[str, str]:
    name = mapping_at(mapping_at(record, "metadata"), "llm_config").get("model")
    if not isinstance(name, str) or not name:
        return "unknown", "unknown"
    provider, _, model = name.partition("/")
    return (provider, model) if model else ("unknown", name)


def _v0_masking_window(record: Mapping[str, Any]) -> int | None:
    config = mapping_at(mapping_at(record, "metadata"), "condenser_config")
    window = config.get("attention_window")
    if config.get("type") == "observation_masking" and isinstance(window, int):
        return window
    return None


def _import_v0(b: Builder, path: Path, line: int | None, record: Mapping[str, Any], *,
               strict: bool) -> ImportResult:
    events = [e for e in record["history"] if isinstance(e, Mapping)]
    for index, event in enumerate(record["history"]):
        if not is_v0_event(event):
            b.problem("line-unparsable", f"history[{index}] is not an OpenHands V0 event",
                      line=line)
            b.omit("unparsable", "event", line=line, id=f"history[{index}]")
    times = [e.get("timestamp") for e in events]
    if any(isinstance(t, str) and parse_time(t) is not None and not re.search(
            r"(Z|[+-]\d\d:?\d\d)$", t) for t in times):
        b.note("naive-timestamp", "timestamps have no zone; read as UTC")
    b.at(next((t for x in times if (t := parse_time(x))), 0))
    b.start({"version": 0, "id": str(record.get("instance_id") or path.stem),
             "createdAt": b.time})
    provider, model = _v0_model(record)
    window = _v0_masking_window(record)
    if window is not None:
        b.note("masking-approximate", f"observation masking (attention window {window}) is "
               f"replayed: observations older than the window read {MASKED} from the "
               f"next request on, each kept as its call's result")
    state = _V0State(b, path, line, provider, model, window)
    for event in events:
        state.add(event)
    b.note("observation-text-approximate", "observations are imported with their stored "
           "content; OpenHands V0 adds a few framing lines when it sends them", once=True)
    last = next((e for e in reversed(events) if e.get("action") in ("message", "finish")
                 or e.get("observation") not in (None, *V0_SKIPPED_OBSERVATIONS)), None)
    finished = last is not None and last.get("source") == "agent" and last.get(
        "action") in ("message", "finish")
    selection: dict[str, Any] = {"instance_id": record.get("instance_id"), "line": line}
    metrics = mapping_at(record, "metrics")
    if metrics.get("accumulated_cost") is not None:
        selection["accumulated_cost"] = metrics.get("accumulated_cost")
    sources = [path] if path.is_file() else sorted(
        (p for p in (path / "events").iterdir() if V0_EVENT_FILE.fullmatch(p.name)
         and p.is_file() and not p.is_symlink()), key=lambda p: int(p.stem))
    return b.result(sources, selection, finished=finished, strict=strict)


class _V0State:
    """OpenHands V0's view while its events are replayed: forgotten ids so far, the latest
    summary, masked observations."""

    def __init__(self, b: Builder, path: Path, line: int | None, provider: str, model: str,
                 window: int | None) -> None:
        self.b, self.path, self.line = b, path, line
        self.provider, self.model, self.window = provider, model, window
        self.order: list[str] = []  # every event id seen, condensations excluded
        self.forgotten: set[str] = set()
        self.summary: tuple[str, int, str] | None = None  # (id, offset, text)
        self.seq_of: dict[str, int] = {}
        self.observations: set[str] = set()
        self.masked: set[str] = set()
        self.responses: dict[str, int] = {}  # model response id -> its assistant seq

    def origin(self, event_id: str) -> dict[str, Any]:
        return {"file": str(self.path), "line": self.line, "id": event_id}

    def add(self, event: Mapping[str, Any]) -> None:
        b = self.b
        event_id = str(event.get("id"))
        b.at(parse_time(event.get("timestamp")))
        action, observation = event.get("action"), event.get("observation")
        origin = self.origin(event_id)
        meta = mapping_at(event, "tool_call_metadata")
        if action == "condensation":
            self.condense(event, origin)
            return
        if action not in V0_FILTERED and observation not in V0_FILTERED:
            self.order.append(event_id)  # what OpenHands' View holds, in order
        if action == "system":
            b.omit("system-prompt", "action:system", line=self.line, id=event_id)
            return
        if action == "message":
            text = (_v0_text(event) if mapping_at(event, "args").get("content") is None
                    else str(mapping_at(event, "args").get("content")))
            if event.get("source") == "user":
                content = [{"type": "text", "text": text}, *_v0_images(
                    mapping_at(event, "args").get("image_urls"))]
                self.seq_of[event_id] = int(b.user(event_id, content, origin)["seq"])
            else:
                self.mask_before_request()
                self.seq_of[event_id] = int(b.assistant(
                    event_id, [{"type": "text", "text": text}], provider=self.provider,
                    model=self.model, step_key=event_id, origin=origin)["seq"])
            return
        if isinstance(action, str):
            if not meta:
                kind = "not-model-visible"
                b.omit(kind, f"action:{action}", line=self.line, id=event_id)
                return
            self.tool_call(event, event_id, meta, origin)
            return
        if observation in V0_SKIPPED_OBSERVATIONS:
            b.omit("not-model-visible", f"observation:{observation}", line=self.line,
                   id=event_id)
            return
        text = _v0_text(event)
        if observation == "error":  # as OpenHands V0 sends an error observation
            text += "\n[Error occurred in processing last action]"
        call_id = meta.get("tool_call_id")
        self.observations.add(event_id)
        if isinstance(call_id, str) and call_id:
            self.seq_of[event_id] = int(b.tool_result(
                event_id, call_id, text, observation == "error", origin)["seq"])
        else:
            self.seq_of[event_id] = int(b.context(
                event_id, text, f"observation:{observation}", origin,
                in_step=b.step_open)["seq"])

    def tool_call(self, event: Mapping[str, Any], event_id: str, meta: Mapping[str, Any],
                  origin: dict[str, Any]) -> None:
        """An action the model called: the first action of a model response writes that
        response as one assistant message (its text, reasoning and every call, in the
        provider's order), as OpenHands sends it back; the response's other actions are
        in it already."""
        response = mapping_at(meta, "model_response")
        response_id = str(response.get("id") or f"response:{event_id}")
        call_id = str(meta.get("tool_call_id") or f"call:{event_id}")
        choices = response.get("choices")
        message = (mapping_at(choices[0], "message") if isinstance(choices, list) and choices
                   else {})
        listed = message.get("tool_calls")
        calls = ([c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list)
                 else [])
        if response_id in self.responses and call_id in self.b.call_seq:
            self.seq_of[event_id] = self.responses[response_id]
            self.b.omit("in-response", f"action:{event.get('action')}", line=self.line,
                        id=event_id)
            return
        blocks: list[dict[str, Any]] = []
        first = response_id not in self.responses
        if first:
            self.mask_before_request()
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                blocks.append({"type": "reasoning", "text": reasoning})
            if isinstance(message.get("content"), str) and message["content"]:
                blocks.append({"type": "text", "text": message["content"]})
        if first and any(str(c.get("id")) == call_id for c in calls):
            for call in calls:
                function = mapping_at(call, "function")
                arguments = function.get("arguments", "")
                blocks.append({"type": "tool-call", "id": str(call.get("id")),
                               "name": str(function.get("name") or ""),
                               "arguments": arguments if isinstance(arguments, str)
                               else json.dumps(arguments, ensure_ascii=False)})
        else:  # no model response recorded: the call as the action states it
            arguments = {k: v for k, v in mapping_at(event, "args").items() if k != "thought"}
            blocks.append({"type": "tool-call", "id": call_id,
                           "name": str(meta.get("function_name") or event.get("action")),
                           "arguments": json.dumps(arguments, ensure_ascii=False)})
        from .mini_swe_agent import usage_of

        seq = int(self.b.assistant(
            event_id, blocks, provider=self.provider, model=str(
                response.get("model") or self.model), step_key=response_id, origin=origin,
            usage=(usage_of(response) or None) if first else None,
            responseId=response.get("id"))["seq"])
        self.seq_of[event_id] = seq
        self.responses.setdefault(response_id, seq)

    def view(self) -> list[str]:
        out = [i for i in self.order if i not in self.forgotten]
        if self.summary is not None:
            summary_id, offset, _ = self.summary
            out.insert(max(0, min(offset, len(out))), summary_id)
        return out

    def mask_before_request(self) -> None:
        """ObservationMaskingCondenser: observations outside the last `window` events of the
        view read `<MASKED>` from this request on (content-only rewrites)."""
        if self.window is None:
            return
        view = self.view()
        for event_id in view[: max(0, len(view) - self.window)]:
            if (event_id not in self.observations or event_id in self.masked
                    or event_id not in self.seq_of):
                continue
            seq = self.seq_of[event_id]
            if seq not in self.b.surface():
                continue
            self.masked.add(event_id)
            self.b.close_step()
            original = self.b.event(seq)
            self.b.append("compaction/prune", {
                "shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
                "shadowedTokenCount": None, "imported": {
                    "format": "openhands-v0", "kind": "observation-masking",
                    "eventId": event_id, "attentionWindow": self.window}},
                self.origin(event_id))
            data = thaw(original["data"])
            masked = [{"type": "text", "text": MASKED}]
            if original["type"] == "tool/result":
                data["message"]["content"][0]["content"] = masked
            else:
                data["content"] = masked
            written = self.b.append(str(original["type"]), data, self.origin(event_id),
                                     surface_op={"op": "replace", "start": seq, "end": seq},
                                     source_event_seqs=[seq])
            self.seq_of[event_id] = int(written["seq"])

    def condense(self, event: Mapping[str, Any], origin: dict[str, Any]) -> None:
        """A CondensationAction: forget ids (a list, or every id seen between start and end
        inclusive) and put the latest summary at its offset."""
        b = self.b
        args = mapping_at(event, "args")
        condensation_id = str(event.get("id"))
        ids = args.get("forgotten_event_ids")
        start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
        if isinstance(ids, list):
            forgotten = {str(i) for i in ids}
        elif start is not None and end is not None:
            lo, hi = _as_int(start), _as_int(end)
            forgotten = {i for i in self.order if (n := _as_int(i)) is not None
                         and lo is not None and hi is not None and lo <= n <= hi}
        else:
            forgotten = set()
            b.problem("condensation-invalid", f"condensation {condensation_id}: no "
                      f"forgotten_event_ids nor a start/end range")
        unknown = forgotten - set(self.order)
        if unknown:
            b.problem("forgotten-id-unknown", f"condensation {condensation_id}: "
                      f"{len(unknown)} forgotten id(s) are not in the log (ignored)")
        self.forgotten |= forgotten & set(self.order)
        summary, offset = args.get("summary"), args.get("summary_offset")
        summary_id = f"{condensation_id}-summary"
        if (summary is None) != (offset is None):
            b.problem("summary-without-offset", f"condensation {condensation_id}: a summary "
                      f"and an offset go together; no summary is inserted")
        elif summary is not None and isinstance(offset, int):
            self.summary = (summary_id, offset, str(summary))
        view = self.view()
        target: list[Keep | New] = []
        for item in view:
            if self.summary is not None and item == self.summary[0]:
                existing = self.seq_of.get(item)
                if (existing is not None and existing in b.surface()
                        and Keep(existing) not in target):
                    target.append(Keep(existing))
                    continue
                target.append(New("user/message", {
                    "id": item, "role": "user",
                    "content": [{"type": "text", "text": self.summary[2]}],
                    "source": {"kind": "plugin", "plugin": "compact",
                               "compactionId": item.removesuffix("-summary"),
                               "importedFrom": "openhands-v0"}}, origin=origin))
            elif item in self.seq_of and Keep(self.seq_of[item]) not in target:
                target.append(Keep(self.seq_of[item]))
        row = b.compaction(condensation_id, target, summary=[{"type": "text", "text": str(
            summary)}] if summary is not None else [], origin=origin, imported={
                "forgottenEventIds": json.dumps(sorted(forgotten, key=lambda i: (
                    _as_int(i) is None, _as_int(i) or 0, i))),
                "forgottenRange": json.dumps([start, end]) if ids is None else None,
                "summaryOffset": offset})
        for source_id, seq in list(self.seq_of.items()):
            if seq in row["copied"]:
                self.seq_of[source_id] = row["copied"][seq]
        if self.summary is not None:
            summary_seq = next((s for s in reversed(b.surface())
                                if b.event(s)["data"].get("id") == self.summary[0]), None)
            if summary_seq is not None:
                self.seq_of[self.summary[0]] = summary_seq


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
