"""Research frames over the engine's signals: behavioural evidence of loss, token counts
with their source, and what-if policy comparisons with their figure."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..analysis.brackets import brackets, replacement_columns
from ..analysis.evidence import find_lost_evidence
from ..analysis.policies import Policy, recording_of, replay_policy
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
from ..analysis.tokens import PathRequest, Tokenizer, path_requests
from ..errors import SurfaceLabError
from ..gcpause import gc_paused
from ..problems import Problem
from ..storage.read import LogReading, read_log
from .audit import compaction_audit
from .columns import frame_from_columns
from .plots import OKABE_ITO

__all__ = ["PolicyComparison", "compare_policies", "lost_evidence_df", "plot_policies",
           "requests_df", "tokens_df"]


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
    rows = _requests(log, tokenizer)
    cols: dict[str, list[Any]] = {
        "seq": [r.seq for r in rows], "last_seq": [r.last_seq for r in rows],
        "turn": [r.turn for r in rows], "step": [r.step for r in rows],
        "request_id": [r.request_id for r in rows], "model": [r.model for r in rows],
        "surface_entries": [r.surface_entries for r in rows],
        "estimated_tokens": [r.estimated for r in rows],
        "tokenizer_tokens": [r.counted for r in rows],
        **{name: [r.recorded.get(key) for r in rows] for key, name in _RECORDED},
        "input_total": [r.input_total for r in rows],
        "usage_source": [r.usage_source for r in rows],
        "input_tokens": [r.input_tokens for r in rows],
        "input_source": [r.input_source for r in rows]}
    return _finish(frame_from_columns("tokens", cols), log, strict)


_RECORDED = (("input", "input_uncached"), ("cache_read", "cache_read"),
             ("cache_write", "cache_write"), ("output", "output"),
             ("reasoning", "reasoning"))


def _requests(log: LogData, tokenizer: Tokenizer | None) -> list[PathRequest]:
    """The requests on the path, but an importer's copies (the messages a compaction
    bracket re-appends)."""
    copies = {s for b in brackets(log) for s in range(b.start, b.end)}
    with gc_paused():  # many acyclic texts and rows: no collection while they are built
        return path_requests(log.events, log.plans, skip=copies, tokenizer=tokenizer)


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
                     recorded: str | None = "recorded") -> PolicyComparison:
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
    """
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
