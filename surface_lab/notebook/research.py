"""Research frames over the engine's signals: behavioural evidence of loss, token counts
with their source, and what-if policy comparisons with their figure."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..analysis.brackets import brackets, replacement_columns
from ..analysis.evidence import find_lost_evidence
from ..analysis.policies import BudgetMiss, Policy, recording_of, replay_policy
from ..analysis.prices import BundledPrices, PriceTable, Rates, RateTable, price_requests
from ..analysis.requests import (
    FIGURES,
    Request,
    mark_on_path,
    read_requests,
    requests_from_events,
    source_format,
)
from ..analysis.source import LogData, load_source
from ..analysis.tokens import (
    PathRequest,
    RequestColumns,
    Tokenizer,
    path_request_columns,
    path_requests,
)
from ..analysis.whatif import CostedRequest, cost_replay, overhead_estimate
from ..errors import SurfaceLabError
from ..gcpause import gc_paused
from ..problems import Problem
from ..storage.read import LogReading, read_log
from .audit import compaction_audit
from .columns import frame_from_columns
from .plots import OKABE_ITO

__all__ = ["PolicyComparison", "SessionsComparison", "compare_policies", "compare_sessions",
           "lost_evidence_df", "plot_intervals", "plot_policies", "requests_df", "tokens_df"]


def _finish(frame: pd.DataFrame, log: LogData, strict: bool) -> Any:
    return frame if strict else (frame, log.problems)


def lost_evidence_df(source: Any, *, strict: bool = True, progress: bool = True) -> Any:
    """One row per action after a replace that shows the agent needed what it hid
    (`surface_lab.analysis.evidence.find_lost_evidence`): a repeated call, the same tool on the
    same target, or a question about hidden user text."""
    log = load_source(source, strict=strict, progress=progress)
    found = find_lost_evidence(log.events, log.plans)
    kinds = {}
    if found:
        rep = replacement_columns(log)
        kinds = dict(zip(rep["seq"], rep["kind"], strict=True))
    cols: dict[str, list[Any]] = {
        "seq": [e.seq for e in found], "kind": [e.kind for e in found],
        "replace_seq": [e.replace_seq for e in found],
        "replace_kind": [kinds.get(e.replace_seq) for e in found],
        "hidden_seq": [e.hidden_seq for e in found], "turn": [e.turn for e in found],
        "tool": [e.tool for e in found], "arguments": [e.arguments for e in found],
        "detail": [e.detail for e in found],
        "events_after": [e.events_after for e in found]}
    return _finish(frame_from_columns("lost_evidence", cols), log, strict)


def tokens_df(source: Any, *, tokenizer: Tokenizer | None = None, strict: bool = True,
              progress: bool = True) -> Any:
    """One row per model request on the imported path (a step: Claude Code's records of
    one response, Codex's items of one request; not the copies an importer's compaction
    bracket re-appends): the surface it was sent with, counted by the 4-characters
    estimate and by `tokenizer` (a callable text -> count), the usage the log recorded
    for it, and the best input figure with its source. Every billed request, on the
    path or not, with its dollars: `requests_df`."""
    log = load_source(source, strict=strict, progress=progress)
    c = _request_columns(log, tokenizer)
    n = len(c.seq)
    cols: dict[str, Any] = {
        "seq": _ints(c.seq), "last_seq": _ints(c.last_seq), "turn": _nullable(c.turn),
        "step": _nullable(c.step), "request_id": c.request_id, "model": c.model,
        "surface_entries": _ints(c.surface_entries),
        "estimated_tokens": _ints(c.estimated),
        "tokenizer_tokens": _nullable(c.counted if c.counted is not None else [None] * n),
        **{name: _nullable([r.get(key) for r in c.recorded]) for key, name in _RECORDED},
        "input_total": _nullable(c.input_total), "usage_source": c.usage_source,
        "input_tokens": _ints(c.input_tokens), "input_source": c.input_source}
    return _finish(frame_from_columns("tokens", cols), log, strict)


def _ints(values: Sequence[int]) -> Any:
    """An int64 column, typed already (`frame_from_columns` converts no value)."""
    return np.array(values, dtype=np.int64)


def _nullable(values: Sequence[int | None]) -> Any:
    """An Int64 column (None missing), typed already: the values and the mask built
    apart, which is quicker than converting objects."""
    missing = np.array([v is None for v in values], dtype=bool)
    return pd.arrays.IntegerArray(
        np.array([0 if v is None else v for v in values], dtype=np.int64), missing)


_RECORDED = (("input", "input_uncached"), ("cache_read", "cache_read"),
             ("cache_write", "cache_write"), ("output", "output"),
             ("reasoning", "reasoning"))


def _requests(log: LogData, tokenizer: Tokenizer | None) -> list[PathRequest]:
    """The requests on the path, but an importer's copies (the messages a compaction
    bracket re-appends)."""
    copies = {s for b in brackets(log) for s in range(b.start, b.end)}
    with gc_paused():  # many acyclic texts and rows: no collection while they are built
        return path_requests(log.events, log.plans, skip=copies, tokenizer=tokenizer)


def _request_columns(log: LogData, tokenizer: Tokenizer | None) -> RequestColumns:
    """`_requests` as columns (`tokens_df`'s frame needs no row objects)."""
    copies = {s for b in brackets(log) for s in range(b.start, b.end)}
    with gc_paused():
        return path_request_columns(log.events, log.plans, skip=copies,
                                    tokenizer=tokenizer)


def _billed(source: Any, subagents: bool) -> tuple[list[Request], list[Problem]]:
    """The requests of `source`: read from the agent's files where it is one (or an
    import of one), else from a surface log's events."""
    from ..importers import ImportResult, import_any

    if isinstance(source, ImportResult) and source.sources:
        path = source.sources[0]["path"]
        requests = read_requests(path, fmt=source.format, subagents=subagents)
        return mark_on_path(requests, source.events, source.origins), []
    if isinstance(source, (str, os.PathLike)) and source_format(path := Path(source)):
        requests = read_requests(path, subagents=subagents)
        try:
            imported = import_any(path)
        except SurfaceLabError as err:
            return requests, [Problem("note", "on-path-unknown", f"the import failed, "
                                      f"so on_path is unknown: {err}", str(source), None)]
        return (mark_on_path(requests, imported.events, imported.origins),
                list(imported.problems))
    log = load_source(source, progress=False)
    return requests_from_events(log.events, file=log.path or ""), list(log.problems)


def requests_df(source: Any, *, prices: PriceTable | Mapping[str, Rates] | None = None,
                overrides: Mapping[str, Rates] | None = None, subagents: bool = True,
                strict: bool = True) -> Any:
    """One row per model request the session was billed for, read from the agent's own
    files: every branch (`on_path` says which the import shows), the session's subagent
    files (the compaction's summarizer among them), each request once, with its tokens
    as recorded and its dollars.

    Args:
        source: an agent's session file, an `ImportResult`, or a surface log (path,
            `read_log` result, events), whose assistant messages' usage is read.
        prices: a price table (`surface_lab.analysis.prices.PriceTable`) or model name ->
            `Rates`; default genai-prices' bundled table, as of each request's time.
        overrides: model name -> `Rates` that win over the bundled table.
        subagents: with a Claude Code transcript, also `<session>/subagents/*.jsonl`.
    """
    requests, problems = _billed(source, subagents)
    if isinstance(prices, Mapping):
        table: PriceTable = RateTable(prices)
    elif prices is None:
        try:
            table = BundledPrices(overrides)
        except ModuleNotFoundError:  # without the prices extra: tokens, no dollars
            table = RateTable(overrides or {}, name="none (install surface-lab[prices])")
    else:
        table = prices
    costs = price_requests(requests, table)
    cols: dict[str, list[Any]] = {
        name: [getattr(r, name) for r in requests] for name in (
            "request_id", "file", "line", "time", "model", "provider", "agent", "on_path",
            "calls", *FIGURES)}
    cols |= {"tokens_source": [r.source for r in requests],
             "cost_usd": [np.nan if c.usd is None else c.usd for c in costs],
             "priced_model": [c.priced_model for c in costs],
             "cost_source": [c.source for c in costs],
             "cost_problem": [c.problem for c in costs],
             "recorded_cost_usd": [np.nan if r.recorded_cost is None else r.recorded_cost
                                   for r in requests]}
    frame = frame_from_columns("requests", cols)
    return frame if strict else (frame, problems)


@dataclass(frozen=True)
class PolicyComparison:
    """What `compare_policies` returns: one row per policy (`frame`), the surface of
    every request per policy (`steps`), the figure, and each policy's log."""

    frame: pd.DataFrame
    steps: pd.DataFrame
    figure: Figure
    logs: dict[str, LogData]


def _summary(name: str, log: LogData, tokenizer: Tokenizer | None, recorded: bool
             ) -> tuple[dict[str, Any], list[Any]]:
    requests = _requests(log, tokenizer)
    tokens = [r.counted or 0 if tokenizer is not None else r.estimated for r in requests]
    audit = compaction_audit(log, progress=False)
    kinds = list(audit["kind"].astype(str))
    inputs = [r.input_total for r in requests if r.input_total is not None]
    failed = sum(1 for e in log.events if e["type"] == "compaction/end"
                 and isinstance(e.get("data"), Mapping) and "error" in e["data"])
    row = {"policy": name, "events": len(log.events), "requests": len(requests),
           "replaces": len(audit), "compactions": kinds.count("compaction"),
           "prunes": kinds.count("prune"), "failed_compactions": failed,
           "peak_tokens": max(tokens, default=0),
           "mean_tokens": float(np.mean(tokens)) if tokens else 0.0,
           "total_tokens": sum(tokens),
           "tokens_source": "tokenizer" if tokenizer is not None else "estimate",
           "recorded_input_tokens": sum(inputs) if recorded and inputs else None,
           "facts_at_risk": int(audit["n_at_risk"].sum()),
           "lost_evidence": len(find_lost_evidence(log.events, log.plans))}
    return row, list(zip([r.seq for r in requests], tokens, strict=True))


def compare_policies(source: Any, policies: Mapping[str, Policy | None], *,
                     summarizer: Any = None, tokenizer: Tokenizer | None = None,
                     recorded: str | None = "recorded", **costs: Any) -> Any:
    """Replay `source` under each policy (`replay_policy`) and compare them with the
    recorded one: surface tokens per request, replaces, facts at risk and evidence of
    loss.

    Surfaces are counted the same way for every policy (the tokenizer's count, else the
    estimate): recorded usage only exists for what really happened, so it is reported
    for the recorded row alone (`recorded_input_tokens`: each request's input with its
    cache reads and writes, the OpenTelemetry convention, whatever the agent).

    Args:
        source: a path, a `read_log` result, a `Session`, an `ImportResult` or events.
        policies: name -> policy (see `surface_lab.analysis.policies`; None replays with none).
        summarizer: for compactions (default: the offline `ExtractiveSummarizer`).
        tokenizer: a callable text -> token count.
        recorded: the recorded policy's row name, or None to leave it out.
        costs: with many sessions, `compare_sessions`' cost arguments (`prices`,
            `model`, `caching`, `baseline`, `overhead_tokens`, `resamples`, `seed`).

    Many sessions (a folder, a list of sources, a corpus with `paths`) are compared by
    `compare_sessions`, which returns a `SessionsComparison` (rows per session and
    policy, bootstrap intervals, the cost of every request).
    """
    if _many(source):
        return compare_sessions(source, policies, summarizer=summarizer,
                                tokenizer=tokenizer, recorded=recorded, **costs)
    if costs:
        raise TypeError(f"{', '.join(costs)}: cost arguments need many sessions "
                        f"(or call compare_sessions with one)")
    if recorded is not None and recorded in policies:
        raise ValueError(f"{recorded!r} names the recorded policy; give another name")
    logs: dict[str, LogData] = {}
    if isinstance(source, (str, os.PathLike)):  # read once: every row starts from it
        source = read_log(source)
    recording = recording_of(source)
    if recorded is not None:
        base = source if isinstance(source, (LogReading, LogData)) else recording.events
        logs[recorded] = load_source(base, progress=False)
    for name, policy in policies.items():
        logs[name] = load_source(replay_policy(recording, policy, summarizer=summarizer,
                                               tokenizer=tokenizer), progress=False)
    rows, steps = [], []
    for name, log in logs.items():
        row, series = _summary(name, log, tokenizer, name == recorded)
        rows.append(row)
        steps += [(name, i, seq, n) for i, (seq, n) in enumerate(series)]
    frame = frame_from_columns("policies", {k: [r[k] for r in rows] for k in rows[0]})
    step_frame = frame_from_columns("policy_steps", {
        "policy": [s[0] for s in steps], "request": [s[1] for s in steps],
        "seq": [s[2] for s in steps], "tokens": [s[3] for s in steps],
        "tokens_source": ["tokenizer" if tokenizer is not None else "estimate"] * len(steps)})
    return PolicyComparison(frame, step_frame, plot_policies(frame, step_frame), logs)


def _many(source: Any) -> bool:
    if isinstance(source, (str, os.PathLike)):
        return Path(source).is_dir()
    if (hasattr(source, "paths") and not callable(source.paths)) or (
            hasattr(source, "sql") and hasattr(source, "manifest")):
        return True
    if isinstance(source, Mapping):
        return True
    return isinstance(source, (list, tuple)) and bool(source) and not isinstance(
        source[0], Mapping)


def plot_policies(frame: pd.DataFrame, steps: pd.DataFrame, *,
                  size: tuple[float, float] = (12, 4)) -> Figure:
    """The comparison figure: surface tokens at every request, one line per policy, and
    per policy the replaces, facts at risk and evidence of loss."""
    figure = Figure(figsize=size, layout="constrained")
    lines, bars = figure.subplots(1, 2, width_ratios=(3, 2))
    names = list(frame["policy"])
    palette = [c for i, c in enumerate(OKABE_ITO) if i != 3]  # yellow is too light
    colors = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    styles = ["-", "--", "-.", ":"]
    for i, name in enumerate(names):
        own = steps[steps["policy"] == name]
        lines.plot(own["request"], own["tokens"], color=colors[name],
                   linestyle=styles[i % len(styles)], linewidth=1.4, label=name)
    source = str(steps["tokens_source"].iloc[0]) if len(steps) else "estimate"
    lines.set(xlabel="model request", ylabel=f"surface tokens ({source})",
              title="What each request was sent with")
    lines.legend(frameon=False, fontsize=8)
    _bars(bars, frame, colors)
    return figure


def _bars(ax: Axes, frame: pd.DataFrame, colors: Mapping[str, str]) -> None:
    measures = [("replaces", "replaces"), ("facts_at_risk", "facts at risk"),
                ("lost_evidence", "evidence of loss")]
    width = 0.8 / max(len(frame), 1)
    x = np.arange(len(measures))
    for i, row in enumerate(frame.to_dict("records")):
        values = [row[m] for m, _ in measures]
        placed = ax.bar(x + (i - (len(frame) - 1) / 2) * width, values, width,
                        color=colors[str(row["policy"])], label=str(row["policy"]))
        ax.bar_label(placed, fontsize=7, padding=1)
    ax.set_xticks(x, [label for _, label in measures])
    ax.set(title="Per policy", ylabel="count")
    ax.spines[["top", "right"]].set_visible(False)


# --- across sessions: the cost a paper reports, with intervals ------------------------------

@dataclass(frozen=True)
class SessionsComparison:
    """What `compare_sessions` returns: one row per (session, policy) (`sessions`), each
    measure's mean and bootstrap 95% interval across sessions per policy (`summary`),
    every request with its cost (`requests`), and the figure of the intervals."""

    sessions: pd.DataFrame
    summary: pd.DataFrame
    requests: pd.DataFrame
    figure: Figure


SUMMARY_MEASURES = ("input_tokens", "cost_usd", "cache_hit_share", "hidden_then_used")


def _sources(source: Any) -> list[tuple[str, Any]]:
    """A folder (every log `discover` finds), a corpus-like object with `paths`, or a
    list of sources, each named."""
    from ..reading.paths import discover

    if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
        return [(f.path.name, f.path) for f in discover(source)]
    if hasattr(source, "sql") and hasattr(source, "manifest"):  # a built corpus
        rows = source.sql("SELECT DISTINCT source FROM sessions ORDER BY source")
        return [(Path(p).name, Path(p)) for p in rows["source"]]
    paths = getattr(source, "paths", None)
    if paths is not None and not callable(paths):
        source = list(paths)
    if isinstance(source, Mapping):
        return [(str(k), v) for k, v in source.items()]
    out = []
    for i, item in enumerate(source):
        name = (Path(item).name if isinstance(item, (str, os.PathLike))
                else str(getattr(item, "session_id", None) or f"session {i + 1}"))
        out.append((name, item))
    return out


def _recorded_input(log: LogData) -> tuple[int | None, int]:
    requests = _requests(log, None)
    if not requests:
        return None, 0
    return requests[0].input_total, requests[0].estimated


def compare_sessions(sources: Any, policies: Mapping[str, Policy | None], *,
                     prices: PriceTable | Mapping[str, Rates] | None = None,
                     model: str | None = None, caching: str = "anthropic",
                     summarizer: Any = None, tokenizer: Tokenizer | None = None,
                     recorded: str | None = None, baseline: str | None = None,
                     overhead_tokens: int | None = None, resamples: int = 2000,
                     seed: int = 0) -> SessionsComparison:
    """Replay every session under every policy (open loop: the recorded actions kept)
    and cost each request (`surface_lab.analysis.whatif.cost_replay`): one row per
    (session, policy), and per policy the mean of each measure across sessions with a
    percentile bootstrap 95% interval (`resamples` resamplings of the sessions, `seed`).

    `hidden_then_used` counts actions after a replace that repeat or revisit what it hid:
    exposure to loss, not an outcome (a replay cannot say whether the task would still
    be solved).

    Args:
        sources: a folder, a list of sources (paths, imports, events), a name -> source
            mapping, a built corpus (`surface_lab.corpus.open_corpus`: each session's
            source file is replayed), or an object with `paths`.
        policies: name -> policy (None: no history policy, the raw agent).
        prices: a price table or model name -> `Rates` (None: no dollars).
        model: the model priced for every request (default: each request's own).
        caching: `anthropic`, `automatic` or `none`.
        summarizer: for compactions (a callable may call a model; its calls are costed).
        tokenizer: counts the surfaces (the estimate by default).
        recorded: also a row for the log as recorded, under this name.
        baseline: the policy `cost_ratio` divides by (default: the first).
        overhead_tokens: the system prompt and tools per request (default: estimated
            from each session's first request's recorded usage; 0 where none).
    """
    names = ([recorded] if recorded is not None else []) + list(policies)
    if recorded is not None and recorded in policies:
        raise ValueError(f"{recorded!r} names the recorded policy; give another name")
    rows: list[dict[str, Any]] = []
    request_rows: list[dict[str, Any]] = []
    for session_name, source in _sources(sources):
        if isinstance(source, (str, os.PathLike)):
            source = read_log(source)
        recording = recording_of(source)
        base_log = load_source(source if isinstance(source, (LogReading, LogData))
                               else list(recording.events), progress=False)
        if overhead_tokens is None:
            overhead, overhead_source = overhead_estimate(*_recorded_input(base_log))
        else:
            overhead, overhead_source = overhead_tokens, "given"
        for name in names:
            misses: list[BudgetMiss] = []
            if name == recorded:
                log = base_log
            else:
                log = load_source(replay_policy(
                    recording, policies[name], summarizer=summarizer, tokenizer=tokenizer,
                    misses=misses, overhead_tokens=overhead), progress=False)
            costs = cost_replay(log.events, log.plans, prices=prices, model=model,
                                caching=caching, overhead_tokens=overhead,
                                tokenizer=tokenizer)
            rows.append(_session_row(session_name, name, log, costs, misses, overhead,
                                     overhead_source, tokenizer, caching))
            by_seq = _miss_at(log, misses)
            for i, c in enumerate(costs):
                request_rows.append({
                    "session": session_name, "policy": name, "request": i, "seq": c.seq,
                    "agent": c.agent, "model": c.model, "input_tokens": c.input_tokens,
                    "cached_tokens": c.cached_tokens,
                    "cache_write_tokens": c.cache_write_tokens,
                    "uncached_tokens": c.uncached_tokens, "output_tokens": c.output_tokens,
                    "output_source": c.output_source,
                    "cost_usd": np.nan if c.cost_usd is None else c.cost_usd,
                    "cost_problem": c.cost_problem,
                    "over_budget": by_seq.get(c.seq, "") if c.agent == "main" else ""})
    sessions = frame_from_columns("policy_sessions", _columns(rows, "policy_sessions"))
    summary = _bootstrap(sessions, names, baseline or (names[0] if names else None),
                         resamples, seed)
    requests = frame_from_columns("policy_requests", _columns(request_rows,
                                                              "policy_requests"))
    return SessionsComparison(sessions, summary, requests, plot_intervals(summary))


def _columns(rows: list[dict[str, Any]], schema: str) -> dict[str, list[Any]]:
    from .columns import SCHEMAS

    return {c.name: [r[c.name] for r in rows] for c in SCHEMAS[schema]}


def _miss_at(log: LogData, misses: list[BudgetMiss]) -> dict[int, str]:
    """Each miss at the request it precedes: the first assistant message after it."""
    out: dict[int, str] = {}
    assistants = [e["seq"] for e in log.events if e["type"] == "assistant/message"]
    for miss in misses:
        after = next((s for s in assistants if s >= miss.seq), None)
        if after is not None:
            out[after] = (f"{miss.policy}: {miss.tokens} tokens over a budget of "
                          f"{miss.budget}: {miss.why}")
    return out


def _session_row(session: str, policy: str, log: LogData, costs: list[CostedRequest],
                 misses: list[BudgetMiss], overhead: int, overhead_source: str,
                 tokenizer: Tokenizer | None, caching: str) -> dict[str, Any]:
    main = [c for c in costs if c.agent == "main"]
    inputs = sum(c.input_tokens for c in costs)
    cached = sum(c.cached_tokens for c in costs)
    usd = [c.cost_usd for c in costs]
    audit = compaction_audit(log, progress=False)
    return {
        "session": session, "policy": policy, "requests": len(main),
        "summarizer_requests": len(costs) - len(main), "input_tokens": inputs,
        "cached_tokens": cached,
        "cache_write_tokens": sum(c.cache_write_tokens for c in costs),
        "output_tokens": sum(c.output_tokens for c in costs),
        "cache_hit_share": cached / inputs if inputs else np.nan,
        "cost_usd": np.nan if not usd or any(u is None for u in usd)
        else float(sum(u for u in usd if u is not None)),
        "peak_tokens": max((c.input_tokens for c in main), default=0),
        "replaces": len(audit),
        "hidden_then_used": len(find_lost_evidence(log.events, log.plans)),
        "over_budget_requests": len(_miss_at(log, misses)),
        "overhead_tokens": overhead, "overhead_source": overhead_source,
        "tokens_source": "tokenizer" if tokenizer is not None else "estimate",
        "caching": caching}


def _interval(values: np.ndarray, resamples: int, rng: np.random.Generator
              ) -> tuple[float, float, float]:
    if len(values) == 0:
        return np.nan, np.nan, np.nan
    means = rng.choice(values, size=(resamples, len(values)), replace=True).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


def _bootstrap(sessions: pd.DataFrame, names: list[str], baseline: str | None,
               resamples: int, seed: int) -> pd.DataFrame:
    rows = []
    base = (sessions[sessions["policy"] == baseline].set_index("session")["cost_usd"]
            if baseline is not None else None)
    for name in names:
        own = sessions[sessions["policy"] == name]
        measures: dict[str, np.ndarray] = {
            m: own[m].astype(float).dropna().to_numpy() for m in SUMMARY_MEASURES}
        if base is not None:
            ratio = own.set_index("session")["cost_usd"] / base.reindex(own["session"])
            measures["cost_ratio"] = ratio.replace([np.inf, -np.inf], np.nan).dropna(
                ).to_numpy(dtype=float)
        for measure, values in measures.items():
            rng = np.random.default_rng(seed)  # the same resamplings for every policy
            mean, low, high = _interval(values, resamples, rng)
            rows.append({"policy": name, "measure": measure, "sessions": len(values),
                         "mean": mean, "ci_low": low, "ci_high": high})
    return frame_from_columns("policy_summary", _columns(rows, "policy_summary"))


def plot_intervals(summary: pd.DataFrame, *, size: tuple[float, float] = (12, 3.2)
                   ) -> Figure:
    """Each measure's mean per policy with its bootstrap 95% interval across sessions."""
    measures = [m for m in (*SUMMARY_MEASURES, "cost_ratio")
                if m in set(summary["measure"])]
    labels = {"input_tokens": "input tokens", "cost_usd": "dollars",
              "cache_hit_share": "cache-hit share",
              "hidden_then_used": "hidden, then used again\n(exposure, not outcome)",
              "cost_ratio": "cost / baseline"}
    figure = Figure(figsize=size, layout="constrained")
    axes = figure.subplots(1, max(len(measures), 1), squeeze=False)[0]
    names = list(dict.fromkeys(summary["policy"]))
    palette = [c for i, c in enumerate(OKABE_ITO) if i != 3]
    for ax, measure in zip(axes, measures, strict=False):
        own = summary[summary["measure"] == measure].set_index("policy").reindex(names)
        y = np.arange(len(names))
        means = own["mean"].to_numpy(dtype=float)
        low = np.clip(means - own["ci_low"].to_numpy(dtype=float), 0, None)
        high = np.clip(own["ci_high"].to_numpy(dtype=float) - means, 0, None)
        for i in range(len(names)):
            ax.errorbar(means[i], y[i], xerr=[[low[i]], [high[i]]], fmt="o",
                        color=palette[i % len(palette)], capsize=3)
        ax.set_yticks(y, names if ax is axes[0] else [""] * len(names))
        ax.invert_yaxis()
        ax.set_title(labels.get(measure, measure), fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
    n = int(summary["sessions"].max()) if len(summary) else 0
    figure.suptitle(f"Mean per session, bootstrap 95% intervals over {n} sessions "
                    f"(open loop: the recorded actions kept)", fontsize=9)
    return figure
