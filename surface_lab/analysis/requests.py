"""The model requests a session was billed for, read straight from the agent's own files:
one `Request` per request, with every token figure as the source recorded it and in the
OpenTelemetry GenAI convention (total input includes cache reads and writes).

Claude Code writes one record per content block of a response, each with the response's
usage so far; the final record of a `message.id` + `requestId` holds the billed figures
(the key ccusage deduplicates on). Codex writes `token_count` events, some re-emitted
unchanged; each request is its `last_token_usage`. A session's subagent files
(`<session>/subagents/agent-*.jsonl`, the compaction's summarizer in `agent-acompact-*`)
are billed to it too."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import orjson

from ..errors import SurfaceLabError
from ..events import Event, mapping_at
from ..jsonvalue import as_int

__all__ = ["Request", "RequestsError", "mark_on_path", "read_requests",
           "requests_from_events", "source_format", "subagent_files", "summarizer_request",
           "totals"]

# The figures of a request, in the order frames show them.
FIGURES = ("input_uncached", "cache_read", "cache_write", "cache_write_5m",
           "cache_write_1h", "output", "reasoning", "input_total")


class RequestsError(SurfaceLabError):
    """A source file the request reader cannot read (not the format it names)."""


@dataclass(frozen=True, slots=True)
class Request:
    """One billed model request (or, `calls` > 1, a total the source does not itemise).

    Attributes:
        request_id: stable within the session (Claude Code `message.id:requestId`,
            Codex `<session>:<line>`, pi the entry id, ATIF `<file>:step-<id>`,
            mini-swe-agent the response id).
        file, line: where the request's figures are (the final record's line).
        time: when it was made (ms since the epoch; None when the source has no time).
        model, provider: as the source names them.
        agent: `main`, `subagent` or `summarizer` (the compaction's own request).
        on_path: whether the imported log shows it (None before `mark_on_path`).
        calls: the model calls the row stands for (1; the source's count for a total).
        input_uncached, cache_read, cache_write: input by how it was billed;
            `cache_write_5m` / `cache_write_1h` where the source splits writes by TTL.
        output: output tokens (reasoning included, as every provider bills it).
        reasoning: the part of `output` that was reasoning, where recorded.
        input_total: all input (OpenTelemetry `gen_ai.usage.input_tokens`).
        source: `usage` (the provider's figures), `usage-total` (a total the file states
            beyond its itemised requests) or `agent-count` (the agent's own count).
        recorded_cost: the dollars the source itself states (pi, ATIF, mini-swe-agent).
        ids: the source records the request spans (to find it in an imported log).
    """

    request_id: str
    file: str
    line: int | None
    time: int | None
    model: str | None
    provider: str | None
    agent: str
    on_path: bool | None
    calls: int | None
    input_uncached: int | None
    cache_read: int | None
    cache_write: int | None
    cache_write_5m: int | None
    cache_write_1h: int | None
    output: int | None
    reasoning: int | None
    input_total: int | None
    source: str
    recorded_cost: float | None = None
    ids: tuple[str, ...] = ()


def _request(request_id: str, file: Path | str, line: int | None, time: int | None,
             model: Any, provider: str | None, agent: str, *, uncached: int | None,
             read: int | None, write: int | None, output: int | None,
             reasoning: int | None = None, write_5m: int | None = None,
             write_1h: int | None = None, total: int | None = None, source: str = "usage",
             cost: Any = None, ids: Iterable[str] = (), calls: int | None = 1) -> Request:
    if total is None and uncached is not None:
        total = uncached + (read or 0) + (write or 0)
    return Request(request_id, str(file), line, time,
                   model if isinstance(model, str) and model else None, provider, agent,
                   None, calls, uncached, read, write, write_5m, write_1h, output, reasoning,
                   total, source,
                   float(cost) if isinstance(cost, (int, float)) and not isinstance(
                       cost, bool) else None, tuple(ids))


def _lines(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers; other lines are not
    requests (the importer reports them)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, Mapping):
                yield number, record


def _ms(value: Any) -> int | None:
    from ..importers.common import parse_time

    return parse_time(value)


# -- Claude Code ---------------------------------------------------------------------

def subagent_files(path: str | Path) -> list[Path]:
    """The subagent files of a Claude Code session: `<stem>/subagents/agent-*.jsonl`
    beside it, in name order."""
    path = Path(path)
    folder = path.with_suffix("") / "subagents"
    if not folder.is_dir():
        return []
    inside = folder.resolve()
    # a link out of the session's folder is not one of its files
    return sorted(p for p in folder.glob("agent-*.jsonl")
                  if p.is_file() and p.resolve().parent == inside)


def _claude_code(path: Path, agent: str) -> list[Request]:
    found: dict[str, tuple[int, int | None, Mapping[str, Any], list[str]]] = {}
    for number, record in _lines(path):
        if record.get("type") != "assistant":
            continue
        message = mapping_at(record, "message")
        usage = message.get("usage")
        if not isinstance(usage, Mapping) or message.get("model") == "<synthetic>":
            continue  # a synthetic record (an error notice) is no model request
        mid, rid, uuid = message.get("id"), record.get("requestId"), record.get("uuid")
        key = (f"{mid}:{rid}" if isinstance(mid, str) and isinstance(rid, str)
               else f"record:{uuid if isinstance(uuid, str) else number}")
        kind = "subagent" if agent == "main" and record.get("isSidechain") else agent
        first = found.get(key)
        ids = (first[3] if first else []) + ([uuid] if isinstance(uuid, str) else [])
        time = first[1] if first else _ms(record.get("timestamp"))
        # the final record holds the response's figures (streamed ones are partial)
        found[key] = (number, time, {**message, "_agent": kind}, ids)
    out = []
    for key, (number, time, message, ids) in found.items():
        usage = mapping_at(message, "usage")
        split = mapping_at(usage, "cache_creation")
        out.append(_request(
            key, path, number, time, message.get("model"), "anthropic", message["_agent"],
            uncached=as_int(usage.get("input_tokens")),
            read=as_int(usage.get("cache_read_input_tokens")),
            write=as_int(usage.get("cache_creation_input_tokens")),
            write_5m=as_int(split.get("ephemeral_5m_input_tokens")),
            write_1h=as_int(split.get("ephemeral_1h_input_tokens")),
            output=as_int(usage.get("output_tokens")), ids=ids))
    return out


def _subagent_kind(path: Path) -> str:
    return "summarizer" if path.name.startswith("agent-acompact") else "subagent"


# -- Codex ---------------------------------------------------------------------------

def _codex(path: Path) -> list[Request]:
    out: list[Request] = []
    model: Any = None
    session = path.stem
    previous: Any = None
    for number, record in _lines(path):
        payload = mapping_at(record, "payload")
        kind = record.get("type")
        if kind == "session_meta" and isinstance(payload.get("id"), str):
            session = payload["id"]
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        if kind != "event_msg" or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        if not isinstance(info, Mapping):
            continue  # a rate-limit update: no request
        total, last = info.get("total_token_usage"), info.get("last_token_usage")
        if total is not None and total == previous:
            continue  # re-emitted unchanged: the same request again
        if not isinstance(last, Mapping) and isinstance(total, Mapping) and isinstance(
                previous, Mapping):
            last = {k: (as_int(total.get(k)) or 0) - (as_int(previous.get(k)) or 0)
                    for k in total}
        previous = total
        if not isinstance(last, Mapping) or not any(
                as_int(v) for v in last.values()):
            continue  # nothing billed
        given = as_int(last.get("input_tokens"))
        read = as_int(last.get("cached_input_tokens"))
        write = as_int(last.get("cache_write_input_tokens"))
        uncached = None if given is None else given - (read or 0) - (write or 0)
        if uncached is not None and uncached < 0:
            uncached = None  # cached parts beyond the input: kept unsplit, not priced
        out.append(_request(
            f"{session}:{number}", path, number, _ms(record.get("timestamp")), model,
            "openai", "main", uncached=uncached, read=read, write=write,
            output=as_int(last.get("output_tokens")),
            reasoning=as_int(last.get("reasoning_output_tokens")), total=given,
            ids=(f"line:{number}",)))
    return out


# -- pi ------------------------------------------------------------------------------

def _pi(path: Path) -> list[Request]:
    out = []
    for number, record in _lines(path):
        message = mapping_at(record, "message")
        usage = message.get("usage")
        if (record.get("type") != "message" or message.get("role") != "assistant"
                or not isinstance(usage, Mapping)):
            continue
        entry = str(record.get("id", number))
        out.append(_request(
            entry, path, number, _ms(record.get("timestamp")), message.get("model"),
            str(message.get("provider") or "") or None, "main",
            uncached=as_int(usage.get("input")), read=as_int(usage.get("cacheRead")),
            write=as_int(usage.get("cacheWrite")), output=as_int(usage.get("output")),
            cost=mapping_at(usage, "cost").get("total"), ids=(entry,)))
    return out


# -- ATIF ----------------------------------------------------------------------------

def _atif_chain(root: Path, document: Mapping[str, Any]) -> list[Request]:
    """The requests of a trajectory and of its continuations, which the importer follows
    the same way (`continued_trajectory_ref`, inside the root's folder)."""
    from ..importers.atif import MAX_FILES, continuation_file
    from ..importers.common import Builder

    notes = Builder("atif", str(root))  # the resolver's notes; the importer reports them
    files = [(root, document)]
    while len(files) < MAX_FILES:
        ref = files[-1][1].get("continued_trajectory_ref")
        nxt = continuation_file(root, files[-1][0], ref, notes) if ref is not None else None
        if nxt is None or any(nxt == f for f, _ in files):
            break
        data = _json_document(nxt)
        if data is None:
            break
        files.append((nxt, data))
    return [r for path, data in files for r in _atif(path, data)]


def _atif(path: Path, document: Mapping[str, Any]) -> list[Request]:
    out = []
    agent_model = mapping_at(document, "agent").get("model_name")
    steps = document.get("steps")
    for step in steps if isinstance(steps, list) else []:
        metrics = mapping_at(step, "metrics")
        if not isinstance(step, Mapping) or not metrics or step.get("is_copied_context"):
            continue  # a copied step was billed in the trajectory it was copied from
        prompt, cached = as_int(metrics.get("prompt_tokens")), as_int(
            metrics.get("cached_tokens"))
        step_id = f"{path.name}:step-{step.get('step_id')}"
        out.append(_request(
            step_id, path, None, _ms(step.get("timestamp")),
            step.get("model_name") or agent_model, None, "main",
            uncached=None if prompt is None else prompt - (cached or 0), read=cached,
            write=None, output=as_int(metrics.get("completion_tokens")), total=prompt,
            cost=metrics.get("cost_usd"), ids=(step_id,)))
    final = mapping_at(document, "final_metrics")
    stated = {k: as_int(final.get(k)) for k in (
        "total_prompt_tokens", "total_completion_tokens", "total_cached_tokens")}
    if any(v is not None for v in stated.values()):
        prompt = (stated["total_prompt_tokens"] or 0) - sum(r.input_total or 0 for r in out)
        completion = (stated["total_completion_tokens"] or 0) - sum(r.output or 0
                                                                    for r in out)
        cached = (stated["total_cached_tokens"] or 0) - sum(r.cache_read or 0 for r in out)
        cost = final.get("total_cost_usd")
        if prompt > 0 or completion > 0 or cached > 0:
            # requests the file counts in its totals but does not itemise (e.g. the
            # summarizer's, in a continuation): billed, so kept, and labelled
            out.append(_request(
                f"{path.name}:final_metrics-unitemized", path, None, None, agent_model, None,
                "unitemized", uncached=prompt - cached, read=cached, write=None,
                output=completion, total=prompt, source="usage-total", calls=None,
                cost=(cost - sum(r.recorded_cost or 0 for r in out))
                if isinstance(cost, (int, float)) else None))
    return out


# -- SWE-agent and mini-swe-agent ----------------------------------------------------

def _mini_swe_agent(path: Path, document: Mapping[str, Any]) -> list[Request]:
    out = []
    messages = document.get("messages")
    for k, message in enumerate(messages if isinstance(messages, list) else []):
        response = mapping_at(mapping_at(message, "extra"), "response")
        usage = mapping_at(response, "usage")
        if not usage or (mapping_at(message, "role") and message.get("role") != "assistant"):
            continue
        prompt = as_int(usage.get("prompt_tokens"))
        details = mapping_at(usage, "prompt_tokens_details")
        read = as_int(details.get("cached_tokens"))
        write = as_int(details.get("cache_write_tokens"))
        created = as_int(response.get("created"))
        rid = response.get("id")
        request_id = rid if isinstance(rid, str) and rid else f"message-{k}"
        out.append(_request(
            request_id, path, None, None if created is None else created * 1000,
            response.get("model"), str(response.get("provider") or "") or None, "main",
            uncached=None if prompt is None else prompt - (read or 0) - (write or 0),
            read=read, write=write, output=as_int(usage.get("completion_tokens")),
            reasoning=as_int(mapping_at(usage, "completion_tokens_details").get(
                "reasoning_tokens")), total=prompt, cost=usage.get("cost"),
            ids=(f"message-{k}",)))
    return out


def _swe_agent(path: Path, document: Mapping[str, Any]) -> list[Request]:
    stats = mapping_at(mapping_at(document, "info"), "model_stats")
    sent, received = as_int(stats.get("tokens_sent")), as_int(stats.get("tokens_received"))
    if sent is None and received is None:
        return []
    config = mapping_at(document, "replay_config")
    model = mapping_at(mapping_at(config, "agent"), "model").get("name")
    # SWE-agent keeps only its own running totals (counted locally, not the provider's)
    return [_request("model_stats", path, None, None, model, None, "unitemized",
                     uncached=None, read=None, write=None, output=received, total=sent,
                     source="agent-count", cost=stats.get("instance_cost"),
                     calls=as_int(stats.get("api_calls")))]


def _json_document(path: Path) -> Mapping[str, Any] | None:
    try:
        document = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, Mapping) else None


def source_format(path: str | Path) -> str | None:
    """The format whose requests `read_requests` reads from `path`, or None."""
    from ..importers import detect_format

    path = Path(path)
    fmt = detect_format(path)
    if fmt is not None or not path.is_file() or path.suffix not in (".json", ".traj"):
        return fmt
    document = _json_document(path)
    if document is None:
        return None
    if str(document.get("trajectory_format", "")).startswith("mini-swe-agent") or (
            isinstance(document.get("messages"), list) and "info" in document):
        return "mini-swe-agent"
    if isinstance(document.get("trajectory"), list) or isinstance(
            document.get("history"), list):
        return "swe-agent"
    return None


def read_requests(path: str | Path, *, fmt: str | None = None,
                  subagents: bool = True) -> list[Request]:
    """Every model request the files of a session record, once each, in file order.

    Args:
        path: the agent's session file (a Claude Code transcript, a Codex rollout, a pi
            session, an ATIF trajectory, a SWE-agent `.traj`, a mini-swe-agent
            `.traj.json`).
        fmt: the format, when detection should not guess.
        subagents: with a Claude Code transcript, also its subagent files.

    Returns:
        The requests; `[]` for a format that records no usage (a surface log has its
        requests in its events: `requests_from_events`).

    Raises:
        RequestsError: `path` is not a file, or not the format named.
    """
    path = Path(path)
    if not path.is_file():
        raise RequestsError(f"{path}: no such file", path=str(path))
    fmt = fmt or source_format(path)
    if fmt == "claude-code":
        out = _claude_code(path, "main")
        seen = {r.request_id for r in out}
        for extra in subagent_files(path) if subagents else []:
            for r in _claude_code(extra, _subagent_kind(extra)):
                if r.request_id not in seen:  # once, even if two files record it
                    seen.add(r.request_id)
                    out.append(r)
        return out
    if fmt == "pi":
        return _pi(path)  # a tree: which entries are on the path, the import tells
    if fmt == "codex":
        linear = _codex(path)
    elif fmt in ("atif", "mini-swe-agent", "swe-agent"):
        document = _json_document(path)
        if document is None:
            raise RequestsError(f"{path}: not a JSON object, so not an {fmt} file",
                                path=str(path))
        reader = {"atif": _atif_chain, "mini-swe-agent": _mini_swe_agent,
                  "swe-agent": _swe_agent}[fmt]
        linear = reader(path, document)
    else:
        return []
    # a linear log: every request it itemises is on the imported path
    return [replace(r, on_path=True) if r.calls == 1 else r for r in linear]


# -- the imported log ----------------------------------------------------------------

_LINE = re.compile(r"line:(\d+)")


def mark_on_path(requests: Sequence[Request], events: Sequence[Event],
                 origins: Mapping[int, Mapping[str, Any]] | None = None) -> list[Request]:
    """`requests` with `on_path` set: whether the imported log `events` shows each (one
    of its source records is an imported assistant message; Codex's by the
    `token_count` line the importer names as `usageLine` in `origins`). A request
    whose `on_path` is known (a linear source: every request is on it) or a total the
    source does not itemise (None) is kept as it is."""
    shown: set[str] = set()
    for seq, event in enumerate(events):
        if event["type"] != "assistant/message":
            continue
        message = mapping_at(event, "data").get("message")
        if isinstance(message, Mapping) and isinstance(message.get("id"), str):
            shown.add(message["id"])
            source = mapping_at(message, "source")
            if isinstance(source.get("responseId"), str) and isinstance(
                    source.get("requestId"), str):
                shown.add(f"{source['responseId']}:{source['requestId']}")
        origin = (origins or {}).get(seq) or {}
        if isinstance(origin.get("usageLine"), int):
            shown.add(f"line:{origin['usageLine']}")
        if isinstance(origin.get("id"), str):
            shown.add(origin["id"])
    out = []
    for r in requests:
        if r.on_path is not None or r.calls != 1:
            out.append(r)  # a linear source's request, or a total
            continue
        on = r.agent == "main" and (r.request_id in shown or any(i in shown for i in r.ids))
        out.append(replace(r, on_path=on))
    return out


_BILLED_TYPES = frozenset({"assistant/message", "compaction/summary"})


def requests_from_events(events: Sequence[Event], *, file: str = "") -> list[Request]:
    """The requests of a surface log, from the usage its assistant messages record (on
    the message or in a usage chunk it cites; a step is one model request, its last
    message's usage the request's), then the summarizer requests its
    `compaction/summary` events record (`agent` summarizer, off the path)."""
    from ..reading.sequences import LogEvents
    from .tokens import recorded_usage

    groups: dict[Any, tuple[int, dict[str, int], Mapping[str, Any], Any]] = {}
    summarizers: list[Request] = []
    # A fast-read log knows each event's type unparsed: only the messages and summaries
    # are read (most events of a log are chunks and tool events, which bill nothing).
    types = events.types if isinstance(events, LogEvents) else None
    seqs = (range(len(events)) if types is None else
            [s for s, t in enumerate(types) if t in _BILLED_TYPES])
    for seq in seqs:  # read, not frozen: only a few fields are looked at, none kept
        event = events[seq] if types is None else cast(LogEvents, events).raw(seq)
        if event["type"] == "compaction/summary":
            summarizers += summarizer_request(event, seq, file)
            continue
        if event["type"] != "assistant/message":
            continue
        usage, _ = recorded_usage(events, seq, types)
        if not usage:
            continue
        data = mapping_at(event, "data")
        message = mapping_at(data, "message")
        source = mapping_at(message, "source")
        key = ((source.get("responseId"), source.get("requestId"))
               if isinstance(source.get("responseId"), str)
               else (data.get("turn"), data.get("step"))
               if data.get("step") is not None else seq)
        first = groups.get(key)
        groups[key] = (first[0] if first else seq, usage, message,
                       first[3] if first else event.get("time"))
    out = []
    for key, (seq, usage, message, time) in groups.items():
        source = mapping_at(message, "source")
        rid = (f"{key[0]}:{key[1]}" if isinstance(key, tuple) and isinstance(key[0], str)
               else str(message.get("id") or seq))
        out.append(replace(_request(
            rid, file, None, as_int(time), source.get("model"),
            str(source.get("provider") or "") or None, "main",
            uncached=usage.get("input"), read=usage.get("cache_read"),
            write=usage.get("cache_write"), output=usage.get("output"),
            reasoning=usage.get("reasoning"), ids=(str(message.get("id")),)),
            on_path=True))
    return out + summarizers


def summarizer_request(event: Event, seq: int, file: str = "") -> list[Request]:
    """The summarizer request a `compaction/summary` records the usage of (dsh writes
    its model and usage there), as a request off the path."""
    data = mapping_at(event, "data")
    usage = data.get("usage")
    if not isinstance(usage, Mapping):
        return []
    values = {name: as_int(usage.get(k)) for k, name in (
        ("inputTokens", "input"), ("cacheReadTokens", "read"), ("cacheWriteTokens", "write"),
        ("outputTokens", "output"), ("reasoningTokens", "reasoning"))}
    return [replace(_request(
        f"compaction:{data.get('compactionId', seq)}", file, None, as_int(event.get("time")),
        data.get("model"), str(data.get("provider") or "") or None, "summarizer",
        uncached=values["input"], read=values["read"], write=values["write"],
        output=values["output"], reasoning=values["reasoning"]), on_path=False)]


def totals(requests: Iterable[Request]) -> dict[str, int]:
    """Each figure summed over `requests` (a figure no request records is left out)."""
    out: dict[str, int] = {}
    for r in requests:
        for name in FIGURES:
            value = getattr(r, name)
            if value is not None:
                out[name] = out.get(name, 0) + value
    return out
