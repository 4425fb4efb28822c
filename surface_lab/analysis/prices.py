"""Dollars for billed requests: each request's tokens at its own model's rates as of its
own time, cache reads and writes at theirs. The default table is the one genai-prices
bundles (read from the installed package, never updated over the network); a caller's
`RateTable`, or per-model overrides of the bundled one, price what it does not or
differently."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from typing import Any, Protocol

from .requests import Request
from .tokens import AroundReplace

__all__ = ["BundledPrices", "CompactionCost", "Cost", "PriceTable", "RateTable", "Rates",
           "compaction_costs", "price_requests"]

MTOK = 1_000_000


@dataclass(frozen=True)
class Rates:
    """One model's prices in USD per million tokens. A cache rate left out is billed at
    the input rate (a provider without prompt caching bills no cache tokens anyway)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    cache_write_1h: float | None = None

    def cost(self, r: Request) -> float:
        """The dollars of `r`'s recorded tokens at these rates."""
        write = r.cache_write or 0
        long = r.cache_write_1h or 0
        short = write - long  # 5-minute writes, and writes whose TTL is not recorded
        read_rate = self.input if self.cache_read is None else self.cache_read
        write_rate = self.input if self.cache_write is None else self.cache_write
        long_rate = write_rate if self.cache_write_1h is None else self.cache_write_1h
        return ((r.input_uncached or 0) * self.input + (r.cache_read or 0) * read_rate
                + short * write_rate + long * long_rate + (r.output or 0) * self.output
                ) / MTOK


@dataclass(frozen=True)
class Cost:
    """A request's price: `usd` (None when no table prices it), the model the table
    priced, the table (`source`) and, when there is no price, why."""

    usd: float | None
    priced_model: str | None
    source: str
    problem: str | None = None


class PriceTable(Protocol):
    """Anything that prices a request."""

    def cost(self, request: Request) -> Cost: ...


def _unpriced(r: Request, source: str) -> Cost | None:
    if r.input_total is None and r.output is None:
        return Cost(None, None, source, "the request records no tokens")
    if r.input_total is not None and r.input_uncached is None:
        return Cost(None, None, source, "the source does not split cached input, so its "
                    "price is unknown (see recorded_cost)")
    return None


class RateTable:
    """A caller's price table: model name -> `Rates`. A name matches exactly
    (case-insensitive), else the longest name the model starts with
    (`claude-opus-4` prices `claude-opus-4-1-20250805`)."""

    def __init__(self, rates: Mapping[str, Rates], *, name: str = "user table") -> None:
        self.rates = {k.lower(): v for k, v in rates.items()}
        self.name = name

    def find(self, model: str | None) -> tuple[str, Rates] | None:
        if not model:
            return None
        model = model.lower()
        if model in self.rates:
            return model, self.rates[model]
        bare = model.rsplit("/", 1)[-1]
        names = [k for k in self.rates if model.startswith(k) or bare.startswith(k)]
        if not names:
            return None
        best = max(names, key=len)
        return best, self.rates[best]

    def cost(self, request: Request) -> Cost:
        if (why := _unpriced(request, self.name)) is not None:
            return why
        found = self.find(request.model)
        if found is None:
            return Cost(None, None, self.name, f"no rates for model {request.model!r}")
        return Cost(found[1].cost(request), found[0], self.name)


def genai_prices_version() -> str:
    """The installed genai-prices version (its data is the one the wheel bundles)."""
    from importlib.metadata import version

    return version("genai-prices")


@cache
def _snapshot() -> Any:
    # The bundled data, not genai_prices.calc_price's global snapshot, which a running
    # UpdatePrices would replace with one fetched over the network.
    from genai_prices import data
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=data.providers, from_auto_update=False)


class BundledPrices:
    """genai-prices' bundled table, with the price in force at each request's time
    (now, for a request without one). `overrides` (model name -> `Rates`) win over it.

    Raises (on first use):
        ModuleNotFoundError: genai-prices is not installed (`pip install
            'surface-lab[prices]'`).
    """

    def __init__(self, overrides: Mapping[str, Rates] | None = None) -> None:
        self.overrides = RateTable(overrides or {}, name="override")
        self.name = f"genai-prices {genai_prices_version()}"

    def cost(self, request: Request) -> Cost:
        if self.overrides.find(request.model) is not None:
            return self.overrides.cost(request)
        if (why := _unpriced(request, self.name)) is not None:
            return why
        if not request.model:
            return Cost(None, None, self.name, "the source names no model")
        from genai_prices import Usage

        usage = Usage(input_tokens=request.input_total or 0,
                      cache_read_tokens=request.cache_read or 0,
                      cache_write_tokens=request.cache_write or 0,
                      cache_write_1h_tokens=request.cache_write_1h or 0,
                      output_tokens=request.output or 0)
        when = (datetime.fromtimestamp(request.time / 1000, tz=UTC)
                if request.time is not None else datetime.now(tz=UTC))
        provider = {"anthropic": "anthropic", "openai": "openai"}.get(
            request.provider or "")
        tries = [(request.model, provider)]
        if "/" in request.model:  # an OpenRouter-style `provider/model`
            prefix, bare = request.model.split("/", 1)
            tries.append((bare, prefix))
        problem = ""
        for model, provider_id in tries:
            try:
                price = _snapshot().calc(usage, model, provider_id, None, when)
            except LookupError as err:
                problem = str(err)
                continue
            return Cost(float(price.total_price), str(price.model.id), self.name)
        return Cost(None, None, self.name, problem)


def price_requests(requests: Iterable[Request], table: PriceTable | None = None
                   ) -> list[Cost]:
    """The `Cost` of each request (`table` defaults to `BundledPrices()`)."""
    table = BundledPrices() if table is None else table
    return [table.cost(r) for r in requests]


@dataclass(frozen=True)
class CompactionCost:
    """What one compaction cost as the files record it: its summarizer request (tokens
    and dollars) and the dollars of the cache write it forced on the next request."""

    summarizer_request: str | None
    summarizer_input: int | None
    summarizer_output: int | None
    summarizer_usd: float | None
    next_cache_write_usd: float | None


def compaction_costs(around: Sequence[AroundReplace], billed: Sequence[Request],
                     table: PriceTable | None) -> list[CompactionCost]:
    """For each compaction (`around_replaces` of its replace): the summarizer request
    made between the request before it and the one after (each used once), and the
    price of the cache write the request after made.

    Args:
        billed: the session's requests (`read_requests`, subagents included, or a
            surface log's `requests_from_events`); only summarizers and the requests
            after a replace are read.
        table: prices; None gives the tokens without dollars.
    """
    from bisect import bisect_left

    summarizers = sorted((r for r in billed if r.agent == "summarizer" and r.time is not None),
                         key=lambda r: r.time or 0)
    times = [r.time or 0 for r in summarizers]
    used: set[int] = set()
    by_id = {r.request_id: r for r in billed if r.agent == "main"}
    out = []
    for a in around:
        found = None
        k = bisect_left(times, a.before_time) if a.before_time is not None else 0
        while k < len(summarizers) and (a.after_time is None or times[k] <= a.after_time):
            if k not in used:  # the first one of the window not taken yet
                used.add(k)
                found = summarizers[k]
                break
            k += 1
        write_usd = None
        if a.next_cache_write and table is not None:
            after = by_id.get(a.after_request or "")
            if after is None:  # from the imported log's usage: the TTL is not recorded
                after = _only_write(a)
            only_write = replace(after, input_uncached=0, cache_read=0, output=0,
                                 reasoning=None, input_total=after.cache_write)
            write_usd = table.cost(only_write).usd
        out.append(CompactionCost(
            found.request_id if found else None, found.input_total if found else None,
            found.output if found else None,
            table.cost(found).usd if found is not None and table is not None else None,
            write_usd))
    return out


def _only_write(a: AroundReplace) -> Request:
    write = a.next_cache_write or 0
    return Request(a.after_request or "", "", None, a.after_time, a.after_model, None,
                   "main", True, 1, 0, 0, write, None, None, 0, None, write, "usage")
