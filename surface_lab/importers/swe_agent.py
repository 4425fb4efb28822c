"""SWE-agent `.traj` files (IMPORTERS.md 8.1): what each step sent the model becomes the
surface before that step's response.

A `.traj` holds `history` (the agent's unprocessed history) and `trajectory` (one entry
per step). From SWE-agent 1.1.0 each step carries `query`, the exact input of that step;
before it, `messages`, the processed history after the step's action and observation
(the input of the next step). Both are lists of chat messages after SWE-agent's history
processors, so an observation `LastNObservations` elided reads `Old environment output:
(N lines omitted)` there: the importer writes that as a content-only rewrite of the
observation (a `compaction/prune` and a replace of one item), at the request where the
elision first happened. A file with neither (old versions, demonstrations) is imported
from `history` as written.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from ..events import mapping_at, message_of
from ..jsonvalue import thaw
from .common import Builder, ImportFailure, ImportResult, compact_json, load_json, no_foreign_errors
from .planner import Keep, New

__all__ = ["import_swe_agent", "looks_like_swe_agent"]

ELIDED = re.compile(r"Old environment output: \(\d+ lines omitted\)( \(\d+ images omitted\))?")
MAX_LITERAL = 1024 * 1024
STEP_KEYS = {"action", "observation", "response", "thought"}


def looks_like_swe_agent(document: Any) -> bool:
    """A `.traj` document: `history` a list of chat entries, and `trajectory` (when
    present) a list of steps with action/observation fields."""
    if not isinstance(document, Mapping) or not isinstance(document.get("history"), list):
        return False
    if "trajectory_format" in document or "schema_version" in document:
        return False
    history = document["history"]
    head = [h for h in history[:5] if isinstance(h, Mapping)]  # a non-object is a problem
    if not head or not isinstance(history[0], Mapping) or not all("role" in h for h in head):
        return False
    steps = document.get("trajectory")
    if steps is None:
        return any(isinstance(h, Mapping) and ("agent" in h or "message_type" in h)
                   for h in history[:5])
    return isinstance(steps, list) and (not steps or (
        isinstance(steps[0], Mapping) and len(STEP_KEYS & set(steps[0])) >= 2))


def _literal(value: Any) -> Any:
    """A field some SWE-agent versions store as the `str()` of a Python list (demonstration
    files): JSON first, then a Python literal (never evaluated as code)."""
    if not isinstance(value, str):
        return value
    if len(value) > MAX_LITERAL:
        return None
    try:
        return orjson.loads(value)
    except ValueError:
        pass
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p)
                       for p in content
                       if not isinstance(p, Mapping) or p.get("type", "text") == "text")
    return "" if content is None else str(content)


def _images(content: Any) -> list[dict[str, Any]]:
    """Image parts of a message, kept as blocks of the source's own type."""
    if not isinstance(content, list):
        return []
    return [{**p, "type": f"swe-agent:{p.get('type')}"} for p in content
            if isinstance(p, Mapping) and p.get("type") not in (None, "text")]


@dataclass
class Item:
    """One chat message of SWE-agent, as the surface item it becomes."""

    kind: str  # "user", "context", "assistant", "tool"
    id: str
    content: list[dict[str, Any]]
    call_id: str = ""
    origin_kind: str = ""

    @cached_property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        """(role, text, call ids): what decides whether two messages are the same."""
        return _key("tool" if self.kind == "tool" else
                    "assistant" if self.kind == "assistant" else "user", self.content,
                    self.call_id)


def _key(role: str, content: Sequence[Mapping[str, Any]], call_id: str = ""
         ) -> tuple[str, str, tuple[str, ...]]:
    text = "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    calls = tuple(str(b.get("id")) for b in content if b.get("type") == "tool-call")
    return role, text, (call_id, *calls)


def _event_key(event: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    data = event["data"]
    if event["type"] == "tool/result":
        block = data["message"]["content"][0]
        return _key("tool", block.get("content") or [], str(block.get("toolCallId", "")))
    if event["type"] == "assistant/message":
        return _key("assistant", data["message"]["content"])
    return _key("user", data["content"])


class Reader:
    """Turns SWE-agent chat messages into surface items; the first real user message is
    the task prompt, later ones are observations or templates (context)."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        self.task_seen = False

    def item(self, message: Mapping[str, Any], item_id: str) -> Item | None:
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            return None
        if role == "tool":
            ids = _literal(message.get("tool_call_ids"))
            call_id = str(ids[0]) if isinstance(ids, list) and ids else str(
                message.get("tool_call_id") or "")
            if isinstance(ids, list) and len(ids) > 1:
                self.b.note("tool-result-shared", f"{item_id}: one observation answers "
                            f"{len(ids)} calls; it is attached to the first", once=True)
            return Item("tool", item_id, [{"type": "text", "text": _text(content)},
                                          *_images(content)], call_id=call_id)
        if role == "assistant":
            blocks: list[dict[str, Any]] = []
            thinking = message.get("thinking_blocks")
            for block in thinking if isinstance(thinking, list) else []:
                if isinstance(block, Mapping) and block.get("type") == "thinking":
                    blocks.append({"type": "reasoning", "text": str(block.get("thinking", ""))})
                elif isinstance(block, Mapping):
                    blocks.append({"type": "reasoning", "text": "", "redacted": True})
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning and not blocks:
                blocks.append({"type": "reasoning", "text": reasoning})
            text = _text(content)
            if text:
                blocks.append({"type": "text", "text": text})
            calls = _literal(message.get("tool_calls"))
            for call in calls if isinstance(calls, list) else []:
                if not isinstance(call, Mapping):
                    continue
                function = mapping_at(call, "function")
                arguments = function.get("arguments", "")
                blocks.append({"type": "tool-call", "id": str(call.get("id") or ""),
                               "name": str(function.get("name") or ""),
                               "arguments": arguments if isinstance(arguments, str)
                               else compact_json(arguments)})
            return Item("assistant", item_id, blocks)
        blocks = [{"type": "text", "text": _text(content)}, *_images(content)]
        if _flag(message.get("is_demo")) or message.get("message_type") == "demonstration":
            return Item("context", item_id, blocks, origin_kind="demonstration")
        if not self.task_seen:
            self.task_seen = True
            return Item("user", item_id, blocks)
        return Item("context", item_id, blocks, origin_kind=str(
            message.get("message_type") or "observation"))


def _model(document: Mapping[str, Any]) -> tuple[str, str]:
    """The model name from `replay_config` (a JSON string in 1.x, a dict before)."""
    config = document.get("replay_config")
    if isinstance(config, str):
        try:
            config = orjson.loads(config)
        except ValueError:
            config = None
    agent = config.get("agent") if isinstance(config, Mapping) else None
    model = agent.get("model") if isinstance(agent, Mapping) else None
    name = None
    if isinstance(model, Mapping):  # 1.x: agent.model.name; 0.x: agent.model.model_name
        name = model.get("name") or model.get("model_name")
    if not isinstance(name, str) or not name:
        return "unknown", "unknown"
    provider, _, rest = name.partition("/")
    return (provider, rest) if rest else ("unknown", name)


class Writer:
    """Keeps the surface equal to each view (the messages of one request)."""

    def __init__(self, b: Builder, path: Path, provider: str, model: str) -> None:
        self.b = b
        self.file = str(path)
        self.provider, self.model = provider, model
        self.rewrites = 0
        self.replans: list[int] = []
        self.keys: dict[int, tuple[str, str, tuple[str, ...]]] = {}

    def id_of(self, seq: int) -> str:
        return str(message_of(self.b.event(seq)).get("id"))

    def key_of(self, seq: int) -> tuple[str, str, tuple[str, ...]]:
        if seq not in self.keys:  # events never change: each is keyed once
            self.keys[seq] = _event_key(self.b.event(seq))
        return self.keys[seq]

    def origin(self, item_id: str) -> dict[str, Any]:
        return {"file": self.file, "line": None, "id": item_id}

    def write(self, item: Item) -> None:
        b, origin = self.b, self.origin(item.id)
        if item.kind == "user":
            b.user(item.id, item.content, origin)
        elif item.kind == "context":
            b.context(item.id, item.content, item.origin_kind or "observation", origin,
                      in_step=bool(b.step_open and item.origin_kind == "observation"))
        elif item.kind == "assistant":
            b.assistant(item.id, item.content, provider=self.provider, model=self.model,
                        step_key=item.id, origin=origin)
        else:
            b.tool_result(item.id, item.call_id, item.content, False, origin)

    def new(self, item: Item) -> New:
        """A surface item to create inside a bracket (a history processor's output)."""
        origin = self.origin(item.id)
        if item.kind == "tool":
            return New("tool/result", self.b.tool_result_data(item.id, item.call_id,
                                                              item.content, False),
                       origin=origin)
        if item.kind == "assistant":
            return New("assistant/message", {
                "turn": self.b.turn, "step": max(self.b.step, 1), "message": {
                    "id": item.id, "role": "assistant", "content": item.content,
                    "source": {"kind": "model", "provider": self.provider,
                               "model": self.model}}}, origin=origin)
        source = {"kind": "user"} if item.kind == "user" else {
            "kind": "harness", "harness": "swe-agent", "origin": item.origin_kind or "context"}
        return New("user/message" if item.kind == "user" else "context/message", {
            "id": item.id, "role": "user", "content": item.content, "source": source},
            origin=origin)

    def rewrite(self, seq: int, item: Item, step: int) -> None:
        """One observation whose content a history processor changed: a prune trace and a
        content-only replace of that one item."""
        b = self.b
        event = b.event(seq)
        b.close_step()
        masked = bool(ELIDED.fullmatch(_key("user", item.content)[1].strip()))
        origin = {**self.origin(item.id), "step": step}
        b.append("compaction/prune", {
            "shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
            "shadowedTokenCount": None, "imported": {
                "format": "swe-agent", "kind": "observation-masking" if masked
                else "history-processor", "step": step}}, origin)
        data = thaw(event["data"])
        if event["type"] == "tool/result":
            data["message"]["content"][0]["content"] = item.content
        else:
            data["content"] = item.content
        b.append(str(event["type"]), data, origin, surface_op={
            "op": "replace", "start": seq, "end": seq}, source_event_seqs=[seq])
        self.rewrites += 1

    def view(self, items: list[Item], step: int, *, final: bool = False) -> None:
        """Make the surface equal `items`: append what is new, then rewrite what a history
        processor changed (after the appends, so the previous request saw the older
        contents). A `final` view (the history, after the last request) only appends the
        entries after the last one on the surface."""
        surface = self.b.surface()
        ids = [self.id_of(s) for s in surface]
        if final or [item.id for item in items[: len(surface)]] != ids:
            # New messages at the end (the last response and what followed it) are
            # written as they came; the rest of the difference below.
            known = set(ids)
            present = [i for i, item in enumerate(items) if item.id in known]
            for item in items[present[-1] + 1 if present else 0:]:
                if item.id not in known:
                    self.write(item)
            if final:
                return
            surface = self.b.surface()
            ids = [self.id_of(s) for s in surface]
        keys = [self.key_of(s) for s in surface]
        if [item.id for item in items[: len(surface)]] != ids:
            self._replan(items, step, surface, keys)
            return
        changed: list[tuple[int, Item]] = []
        for position, item in enumerate(items[: len(surface)]):
            if keys[position] == item.key:
                continue
            role, _, calls = keys[position]
            if role != item.key[0] or calls != item.key[2] or role == "assistant":
                self._replan(items, step, surface, keys)
                return
            changed.append((surface[position], item))
        for item in items[len(surface):]:
            self.write(item)
        for seq, item in changed:
            self.rewrite(seq, item, step)

    def _replan(self, items: list[Item], step: int, surface: list[int],
                keys: list[tuple[str, str, tuple[str, ...]]]) -> None:
        """A request that is not the previous surface plus new messages: the planner
        encodes it as one bracket (kept items matched in order by content)."""
        self.replans.append(step)
        positions: dict[Any, list[int]] = {}
        for position, key in enumerate(keys):
            positions.setdefault(key, []).append(position)
        target: list[Keep | New] = []
        at = 0
        for item in items:
            found = positions.get(item.key) or []
            k = bisect_left(found, at)
            if k == len(found):
                target.append(self.new(item))
            else:
                target.append(Keep(surface[found[k]]))
                at = found[k] + 1
        self.b.compaction(f"swe-agent:step-{step}", target, summary=[], kind="rewrite",
                          imported={"step": step}, origin=self.origin(f"step-{step}"))


@no_foreign_errors
def import_swe_agent(source: str | Path, *, tombstones: bool = False,
                     strict: bool = False) -> ImportResult:
    """Import a SWE-agent `.traj` file.

    Args:
        source: the `.traj` file.
        tombstones: stand tombstones in for deleted runs instead of widening.
        strict: raise on the first problem.
    """
    path = Path(source)
    document = load_json(path)
    if not looks_like_swe_agent(document):
        raise ImportFailure(f"{path}: not a SWE-agent trajectory (no history of chat "
                           f"entries)", code="format-unsupported", path=str(path))
    return _import(path, document, tombstones=tombstones, strict=strict)


def _objects(b: Builder, items: list[Any], where: str) -> list[Mapping[str, Any]]:
    """The objects of a list of entries or steps; each other value a located problem (it
    is left out, never silently)."""
    kept = []
    for index, item in enumerate(items):
        if isinstance(item, Mapping):
            kept.append(item)
        else:
            b.problem("record-malformed", f"{where}[{index}]: {type(item).__name__}, not an "
                      f"object; left out")
    return kept


def _import(path: Path, document: Mapping[str, Any], *, tombstones: bool,
            strict: bool) -> ImportResult:
    b = Builder("swe-agent", str(path), tombstones=tombstones)
    b.start({"version": 0, "id": path.name.removesuffix(".traj"), "createdAt": 0})
    b.note("no-timestamps", "SWE-agent trajectories record no times; every event is at 0",
           once=True)
    provider, model = _model(document)
    writer = Writer(b, path, provider, model)
    history = _objects(b, document["history"], "history")
    agents = {h.get("agent") for h in history}
    main_agent = history[0].get("agent") if history else None
    if len(agents) > 1:
        b.note("other-agents", f"entries of agents other than {main_agent!r} are left out "
               f"(SWE-agent sends an agent only its own entries)", once=True)
    reader = Reader(b)
    base: list[Item] = []
    for index, entry in enumerate(history):
        entry_id = f"h{index}"
        if entry.get("agent") != main_agent:  # SWE-agent sends only its own entries
            b.omit("excluded-from-context", f"history:{entry.get('agent')}", id=entry_id)
            continue
        item = reader.item(entry, entry_id)
        if item is None:
            b.omit("system-prompt", "history:system", id=entry_id)
            continue
        base.append(item)
    listed = document.get("trajectory")
    steps = _objects(b, listed if isinstance(listed, list) else [], "trajectory")
    queries = [s.get("query") for s in steps]
    after = [s.get("messages") for s in steps]
    views: list[list[Any]] = []
    form = "history"
    if steps and all(isinstance(q, list) for q in queries):
        form, views = "query", [list(q) for q in queries if isinstance(q, list)]
    elif steps and all(isinstance(m, list) for m in after):
        form = "messages"
        first_answer = next((i for i, item in enumerate(base) if item.kind == "assistant"),
                            len(base))
        views = [[None] * first_answer] + [list(m) for m in after[:-1]
                                           if isinstance(m, list)]
    elif steps:
        b.note("no-step-inputs", "the steps record no input (query or messages); the "
               "history is imported as written, without SWE-agent's history processors",
               once=True)
    else:
        b.note("no-step-inputs", "no trajectory steps; the history is imported as written",
               once=True)
    view_items = []
    history_index = HistoryIndex(base)
    for number, view in enumerate(views):
        view_reader = Reader(b)
        items: list[Item] = []
        for position, message in enumerate(view):
            if message is None:  # the first request of the messages form: from history
                items.append(base[position])
                continue
            if not isinstance(message, Mapping):
                b.problem("message-invalid", f"step {number + 1}: message {position} is not "
                          f"an object")
                continue
            item = view_reader.item(message, f"s{number + 1}.m{position}")
            if item is not None:
                items.append(item)
        _assign_ids(items, history_index, number)
        view_items.append(items)
    skipped = 0
    for number, items in enumerate(view_items):
        following = view_items[number + 1] if number + 1 < len(view_items) else base
        asked = {item.id for item in items}
        answered = any(item.kind == "assistant" and item.id not in asked
                       for item in following)
        writer.view(items, number + 1)
        if not answered:
            skipped += 1
            b.omit("excluded-from-context", "step:unanswered", id=f"step-{number + 1}")
    if skipped:
        b.note("format-error-steps", f"{skipped} step(s) whose response no later request "
               f"nor the history holds (a failed requery, or a last step SWE-agent did not "
               f"keep)")
    writer.view(base, len(view_items) + 1, final=True)
    if writer.replans:
        b.note("query-rewritten", f"{len(writer.replans)} request(s) were not the previous one "
               f"plus new messages (steps {', '.join(map(str, writer.replans[:5]))}"
               f"{', ...' if len(writer.replans) > 5 else ''}); each is a rewrite bracket")
    if writer.rewrites:
        b.note("observations-rewritten", f"{writer.rewrites} observation(s) rewritten by "
               f"SWE-agent's history processors (content-only replaces)")
    info = mapping_at(document, "info")
    stats = mapping_at(info, "model_stats")
    selection: dict[str, Any] = {"form": form, "steps": len(steps)}
    if stats:
        counted = {k: v for k, v in stats.items() if isinstance(v, (int, float, str))}
        selection["model_stats"] = {**counted, "countedBy": "swe-agent (local count)"}
        b.note("local-model-stats", "info.model_stats is SWE-agent's own local count "
               "(its token counter, cumulative), not provider usage: " + ", ".join(
                   f"{k}={v}" for k, v in counted.items()))
    exit_status = info.get("exit_status")
    if exit_status is not None:
        selection["exit_status"] = str(exit_status)
    return b.result([path], selection, finished=exit_status is not None, strict=strict)


class HistoryIndex:
    """Where each content and each (role, call ids) occurs in the history."""

    def __init__(self, base: list[Item]) -> None:
        self.base = base
        self.by_key: dict[Any, list[int]] = {}
        self.by_role: dict[Any, list[int]] = {}
        for index, entry in enumerate(base):
            self.by_key.setdefault(entry.key, []).append(index)
            self.by_role.setdefault((entry.key[0], entry.key[2]), []).append(index)


def _assign_ids(items: list[Item], index: HistoryIndex, number: int) -> None:
    """Give each message of a request the id of the history entry it shows: the next
    entry with the same content, else (an elided or reformatted entry) the next one with
    the same role and call ids; a message the history does not hold keeps its own id."""
    base, by_key, by_role = index.base, index.by_key, index.by_role

    def next_of(indices: list[int] | None, at: int) -> int | None:
        if not indices:
            return None
        k = bisect_left(indices, at)
        return indices[k] if k < len(indices) else None

    at = 0
    for position, item in enumerate(items):
        match = next_of(by_key.get(item.key), at)
        if match is None:
            match = next_of(by_role.get((item.key[0], item.key[2])), at)
            if match is not None and item.kind != "tool" and match != at:
                match = None  # text entries are matched in place only
        if match is None:
            item.id = f"s{number + 1}.m{position}"
            continue
        item.id = base[match].id
        item.kind = base[match].kind if item.kind != "tool" else item.kind
        item.origin_kind = base[match].origin_kind
        at = match + 1
