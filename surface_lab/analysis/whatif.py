"""The cost model of a what-if replay: what each request of a replayed log would have
been billed, the way a compaction paper reports it (The Complexity Trap, Lindenbauer et
al. 2025: the cached input is the longest common prefix with the previous request).

For every model request: the surface it was sent with (entries, in order), the system
prompt and tools every request carries (not in the log: estimated from the first
request's recorded usage, stated as `overhead_source`), the cached prefix (the entries
equal to the start of the previous request's, plus the overhead once it was sent), and
the output (the recorded response's usage, the actions being the recorded ones). The
caching rules:

- `anthropic`: the cached prefix is read (`cache_read`), the rest of the input written
  (`cache_write`, a breakpoint at the end of every request, as Claude Code and SWE-agent
  place it);
- `automatic` (OpenAI, DeepSeek, Gemini implicit caching): the cached prefix is read once
  it reaches `min_prefix` tokens, the rest billed as input; nothing is written;
- `none`: every token is input.

Cache lifetimes are not modelled (every request is taken to come within the TTL).
Summarizer calls (each committed compaction) are requests of their own: the shadowed
entries and the overhead in, the summary out, priced at `summary_model` (default: the
main model, as in The Complexity Trap, else the summarizer's own)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..events import Event, mapping_at, message_of
from ..messages import message_text, text_tokens
from ..surface import APPEND, REPLACE, Plan
from .prices import PriceTable, RateTable
from .requests import _request
from .tokens import Tokenizer, count_tokens, recorded_usage

__all__ = ["CACHING", "CostedRequest", "RequestSurface", "cost_replay", "overhead_estimate",
           "request_surfaces"]

CACHING = ("anthropic", "automatic", "none")


@dataclass(frozen=True, slots=True)
class RequestSurface:
    """One model request: its first assistant message's seq, turn and step, and the
    surface (entry seqs, in order) it was sent with."""

    seq: int
    turn: int | None
    step: int | None
    nodes: tuple[int, ...]


def request_surfaces(events: Sequence[Event], plans: Sequence[Plan]) -> list[RequestSurface]:
    """Every model request of the log, once (the first appended assistant message of each
    step), with the surface just before it."""
    nodes: list[int] = []
    seen: set[Any] = set()
    out = []
    for plan in plans:
        event = events[plan.seq]
        if plan.kind == APPEND and event["type"] == "assistant/message":
            data = mapping_at(event, "data")
            turn, step = _int(data.get("turn")), _int(data.get("step"))
            key = (turn, step) if step is not None else ("seq", plan.seq)
            if key not in seen:
                seen.add(key)
                out.append(RequestSurface(plan.seq, turn, step, tuple(nodes)))
        if plan.kind == APPEND:
            nodes.append(plan.seq)
        elif plan.kind == REPLACE:
            shadowed = set(plan.shadowed)
            at = min(i for i, s in enumerate(nodes) if s in shadowed)
            nodes = [s for s in nodes if s not in shadowed]
            nodes.insert(at, plan.seq)
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class CostedRequest:
    """One request of a replay with its billed tokens and dollars.

    Attributes:
        seq: its first assistant message (a summarizer call: its `compaction/summary`).
        agent: `main` or `summarizer`.
        model: the model priced.
        input_tokens: all input (overhead + surface; a summarizer call: its input).
        cached_tokens: the longest common prefix with the previous request (read).
        cache_write_tokens: written to the cache (the `anthropic` rule only).
        uncached_tokens: billed at the input rate.
        output_tokens: the recorded response's output (else its estimate).
        output_source: `usage` or `estimate`.
        cost_usd: None when the table has no price (`cost_problem` says why).
    """

    seq: int
    turn: int | None
    step: int | None
    agent: str
    model: str | None
    surface_entries: int
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    output_tokens: int
    output_source: str
    cost_usd: float | None
    cost_problem: str | None


def overhead_estimate(recorded_input: int | None, first_surface_tokens: int) -> tuple[int, str]:
    """`(tokens, source)` of what every request carries beyond the surface (the system
    prompt and tools, which the logs do not hold): the first request's recorded input
    less its surface, or 0 when no usage was recorded."""
    if recorded_input is None:
        return 0, "none recorded (0 assumed)"
    return max(recorded_input - first_surface_tokens, 0), "first request's usage"


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def cost_replay(events: Sequence[Event], plans: Sequence[Plan], *, prices: Any = None,
                model: str | None = None, caching: str = "anthropic",
                overhead_tokens: int = 0, tokenizer: Tokenizer | None = None,
                min_prefix: int = 1024, summary_model: str | None = None
                ) -> list[CostedRequest]:
    """Each request of a (replayed) log and each summarizer call, with the tokens it
    would have been billed under `caching` and its dollars from `prices`.

    Args:
        events, plans: the log (e.g. `load_source(replay_policy(...))`).
        prices: a `PriceTable` or model name -> `Rates`; None: no dollars.
        model: the model priced (default: each request's recorded model).
        caching: `anthropic`, `automatic` or `none` (see the module).
        overhead_tokens: the system prompt and tools (`overhead_estimate`).
        tokenizer: counts the surface (a callable text -> count; the estimate else).
        min_prefix: the shortest prefix `automatic` caching reads (OpenAI: 1024).
        summary_model: the model summarizer calls are priced at (default: `model`,
            else the summarizer's own).
    """
    if caching not in CACHING:
        raise ValueError(f"caching is one of {', '.join(CACHING)}, not {caching!r}")
    table: PriceTable | None = RateTable(prices) if isinstance(prices, Mapping) else prices
    tokens: dict[int, int] = {}

    def count(seq: int) -> int:
        if seq not in tokens:
            tokens[seq] = count_tokens(events[seq], tokenizer)[0]
        return tokens[seq]

    out: list[CostedRequest] = []
    previous: tuple[int, ...] | None = None
    for request in request_surfaces(events, plans):
        surface = sum(count(s) for s in request.nodes)
        total = overhead_tokens + surface
        if previous is None:
            cached = 0
        else:
            shared = _common(previous, request.nodes)
            cached = overhead_tokens + sum(count(s) for s in request.nodes[:shared])
        previous = request.nodes
        if caching == "none" or (caching == "automatic" and cached < min_prefix):
            cached = 0
        write = total - cached if caching == "anthropic" else 0
        uncached = total - cached - write
        output, source = _output(events, request.seq)
        name = model or _model(events, request.seq)
        usd, problem = _price(table, name, uncached, cached, write, output)
        out.append(CostedRequest(request.seq, request.turn, request.step, "main", name,
                                 len(request.nodes), total, cached, write, uncached, output,
                                 source, usd, problem))
    for event in events:
        if event["type"] != "compaction/summary":
            continue
        data = mapping_at(event, "data")
        shadowed = [s for s in data.get("shadowedSeqs") or () if isinstance(s, int)]
        summary = data.get("summary")
        text = "\n".join(str(b.get("text", "")) for b in summary
                         if isinstance(b, Mapping)) if isinstance(summary, Sequence) else ""
        usage = mapping_at(data, "usage")
        inp = overhead_tokens + sum(count(s) for s in shadowed if s < len(events))
        outp = usage.get("outputTokens")
        output = outp if isinstance(outp, int) else text_tokens(text)
        name = summary_model or model or (str(data["model"]) if data.get("model") else None)
        usd, problem = _price(table, name, inp, 0, 0, output)
        out.append(CostedRequest(event["seq"], _int(data.get("turn")), None, "summarizer",
                                 name, len(shadowed), inp, 0, 0, inp, output,
                                 "usage" if isinstance(outp, int) else "estimate", usd,
                                 problem))
    return out


def _output(events: Sequence[Event], seq: int) -> tuple[int, str]:
    usage, _ = recorded_usage(events, seq)
    if isinstance(usage.get("output"), int):
        return int(usage["output"]), "usage"
    return text_tokens(message_text(events[seq])), "estimate"


def _model(events: Sequence[Event], seq: int) -> str | None:
    source = mapping_at(message_of(events[seq]), "source")
    if not source:
        source = mapping_at(mapping_at(events[seq], "data"), "source")
    name = source.get("model")
    return name if isinstance(name, str) and name != "unknown" else None


def _price(table: PriceTable | None, model: str | None, uncached: int, cached: int,
           write: int, output: int) -> tuple[float | None, str | None]:
    if table is None:
        return None, "no price table"
    request = _request("whatif", "", None, None, model, None, "main", uncached=uncached,
                       read=cached, write=write, output=output)
    cost = table.cost(replace(request, on_path=True))
    return cost.usd, cost.problem

