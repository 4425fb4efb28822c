"""The compaction audit: for each replace, what it hid, what replaced it, which facts it
put at risk, and whether the recorded decision replays; plus a self-contained report."""

from __future__ import annotations

import base64
import re
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ..evidence import find_lost_evidence
from ..facts import DEFAULT_RULES, FactRules, facts_at_risk, find_mentions
from ..surface import REPLACE, apply_plan
from .frames import brackets, replacements_df
from .plots import figure_png, plot_shadowing, plot_surface_size
from .render import STYLE, esc, message_card
from .source import LogData, load_source

__all__ = ["audit_report", "compaction_audit", "extract_facts", "failed_compactions"]

def extract_facts(text: str, *, rules: FactRules = DEFAULT_RULES) -> set[str]:
    """The mentions `rules` find in `text` (see `surface_lab.facts`), as a set."""
    return {m.text for m in find_mentions(text, rules=rules)}


def compaction_audit(source: Any, *, strict: bool = True, progress: bool = True,
                     rules: FactRules = DEFAULT_RULES) -> Any:
    """One row per replace: the `replacements_df` columns plus `shadowed_type_counts`,
    `facts_at_risk` (mentions `rules` find in the shadowed content, noise removed, that
    neither the replacement nor the rest of the surface just after it shows; best
    first), `n_at_risk`, `saved_tokens` and `lost_evidence` (how many later actions show
    the agent needed what this replace hid: `lost_evidence_df`).
    `recorded_matches` is False where a trace's shadowedSeqs disagree with the fold."""
    log = load_source(source, strict=strict, progress=progress)
    frame = replacements_df(log) if strict else replacements_df(log, strict=False)[0]
    # What the model still sees once the whole manipulation is done: just after the
    # replace, or after its bracket's end when an importer re-appended kept items.
    traces = brackets(log.events)
    settle = {plan.seq: next((b.end for b in traces if b.start < plan.seq < b.end), plan.seq)
              for plan in log.plans if plan.kind == REPLACE}
    wanted: dict[int, list[int]] = {}
    for seq, at in settle.items():
        wanted.setdefault(min(at, len(log.plans) - 1), []).append(seq)
    at_risk: dict[int, list[str]] = {}
    nodes: list[int] = []
    for plan in log.plans:
        nodes = apply_plan(nodes, plan)
        for seq in wanted.get(plan.seq, []):
            at_risk[seq] = [m.text for m in facts_at_risk(  # kept: the replacement and the rest
                [log.events[s] for s in log.plans[seq].shadowed],
                [log.events[s] for s in nodes], rules=rules)]
    frame = frame.copy()
    frame["shadowed_type_counts"] = [dict(Counter(types)) for types in frame["shadowed_types"]]
    frame["facts_at_risk"] = [at_risk[int(seq)] for seq in frame["seq"]]
    frame["n_at_risk"] = frame["facts_at_risk"].map(len).astype("int64")
    frame["saved_tokens"] = (frame["tokens_before"] - frame["tokens_after"]).astype("int64")
    lost = Counter(e.replace_seq for e in find_lost_evidence(log.events, log.plans))
    frame["lost_evidence"] = pd.Series([lost[int(s)] for s in frame["seq"]], dtype="int64",
                                       index=frame.index)
    return frame if strict else (frame, log.problems)


def failed_compactions(source: Any) -> list[dict[str, Any]]:
    """Compactions that started but ended with an error (no replace was committed)."""
    log = source if isinstance(source, LogData) else load_source(source)
    out = []
    for event in log.events:
        data = event.get("data")
        if event["type"] == "compaction/end" and isinstance(data, Mapping) and "error" in data:
            out.append({"seq": event["seq"], "compaction_id": data.get("compactionId"),
                        "turn": data.get("turn"), "error": data.get("error")})
    return out


def _summary_table(audit: pd.DataFrame) -> str:
    header = (f"{'seq':>6} {'kind':<10} {'id':<10} {'hid':>4} {'tokens':>15} "
              f"{'at risk':>7} {'redone':>6}  replays")
    rows = [header, "-" * len(header)]
    for row in _records(audit):
        replays = "-" if pd.isna(row["recorded_matches"]) else (
            "yes" if row["recorded_matches"] else "NO")
        tokens = f"{row['tokens_before']} -> {row['tokens_after']}"
        rows.append(f"{row['seq']:>6} {row['kind']:<10} {_text(row['compaction_id']):<10} "
                    f"{row['n_shadowed']:>4} {tokens:>15} {row['n_at_risk']:>7} "
                    f"{row['lost_evidence']:>6}  {replays}")
    return "\n".join(rows)


def audit_report(source: Any, out_dir: str | Path) -> dict[str, Any]:
    """Audit a log and write `<id>-swimlane.png` and a self-contained `<id>-audit.html`
    (figures embedded, all log text escaped) into `out_dir`.

    Returns:
        `{"audit": frame, "failed": [...], "summary": text, "png": path, "html": path}`.
    """
    log = source if isinstance(source, LogData) else load_source(source)
    audit = compaction_audit(log)
    failed = failed_compactions(log)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", log.session_id).strip("._") or "session"
    lanes = min(len(audit), 40)
    swimlane = figure_png(plot_shadowing, log, size=(12, 2.4 + 0.32 * lanes))
    sizes = figure_png(plot_surface_size, log, size=(12, 3.2))
    png = out / f"{stem}-swimlane.png"
    png.write_bytes(swimlane)
    summary = _summary_table(audit)
    html_path = out / f"{stem}-audit.html"
    html_path.write_text(_report_html(log, audit, failed, summary, swimlane, sizes),
                         encoding="utf-8")
    return {"audit": audit, "failed": failed, "summary": summary, "png": png,
            "html": html_path}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def _text(value: Any) -> str:
    """A frame cell as text, missing values as ''."""
    return "" if value is None or pd.isna(value) else str(value)


def _n(count: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{count} {noun if count == 1 else plural}"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{esc(alt)}" style="max-width:100%" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')


def _report_html(log: LogData, audit: pd.DataFrame, failed: list[dict[str, Any]],
                 summary: str, swimlane: bytes, sizes: bytes) -> str:
    events = log.events
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             f"<title>Compaction audit: {esc(log.session_id)}</title>", STYLE,
             "<style>body{margin:24px;font-family:system-ui,sans-serif}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
             "padding:3px 6px;text-align:left;vertical-align:top}"
             "details{margin:8px 0 16px 0}summary{cursor:pointer;font-weight:600}"
             ".bad{color:#D55E00;font-weight:600}</style></head><body>",
             f"<h1>Compaction audit: {esc(log.session_id)}</h1>",
             f"<p>{_n(len(events), 'event')} · {_n(len(audit), 'replace')} "
             f"({_n(int((audit['kind'] == 'compaction').sum()), 'compaction')}, "
             f"{_n(int((audit['kind'] == 'prune').sum()), 'prune')}) · "
             f"{_n(len(failed), 'failed compaction')} · source "
             f"{esc(log.path or 'in memory')} · generated {generated}</p>",
             "<p style='max-width:900px;color:#444'>A <b>replace</b> puts one event in the "
             "place of a run of the surface (what the model sees); the entries it removes are "
             "<b>shadowed</b>: still in the log, no longer sent to the model. <b>Facts at "
             "risk</b> are mentions (paths, URLs, errors, decisions, symbols; counters, "
             "ids and repeated log lines left out) in the shadowed entries that neither the "
             "replacement nor the rest of the surface still shows. <b>Redone</b> counts "
             "the later actions that show the agent needed what a replace hid (a repeated "
             "call, the same file again, a question asked again). <b>Replays</b> says "
             "whether the entries a compaction recorded as shadowed are exactly the ones "
             "the fold removes.</p>"]
    mismatched = audit[audit["recorded_matches"].fillna(True).eq(False)]
    if len(mismatched):
        parts.append(f"<p class='bad'>{len(mismatched)} recorded decision(s) do not replay: "
                     f"seqs {esc(list(mismatched['seq']))}</p>")
    if log.problems:
        parts.append("<p class='bad'>Problems: " + "<br>".join(esc(p) for p in log.problems)
                     + "</p>")
    parts += ["<h2>Which events each replace shadowed</h2>", _img(swimlane, "swimlane"),
              "<h2>Surface size over the log</h2>", _img(sizes, "surface size"),
              "<h2>Summary</h2><pre>", esc(summary), "</pre>"]
    if failed:
        parts.append("<h2>Failed compactions</h2><table><tr><th>seq</th><th>id</th>"
                     "<th>turn</th><th>error</th></tr>")
        parts += [f"<tr><td>{esc(f['seq'])}</td><td>{esc(f['compaction_id'])}</td>"
                  f"<td>{esc(f['turn'])}</td><td>{esc(f['error'])}</td></tr>" for f in failed]
        parts.append("</table>")
    parts.append("<h2>Each replace</h2>")
    for row in _records(audit):
        risk = ", ".join(row["facts_at_risk"]) or "none"
        replays = ("not recorded" if pd.isna(row["recorded_matches"])
                   else "yes" if row["recorded_matches"] else "NO")
        parts.append(
            f"<details><summary>seq {esc(row['seq'])} · {esc(row['kind'])} "
            f"{esc(_text(row['compaction_id']))} · hid "
            f"{esc(_n(row['n_shadowed'], 'entry'))} "
            f"({esc(_counts(row['shadowed_type_counts']))}) · {esc(row['tokens_before'])} → "
            f"{esc(row['tokens_after'])} tokens · {esc(row['n_at_risk'])} facts at risk"
            f" · {esc(row['lost_evidence'])} redone</summary><p>Recorded decision "
            f"replays: {esc(replays)}. Facts at risk: "
            f"<code>{esc(risk)}</code></p><p><b>Replaced by</b></p>"
            + message_card(events[int(row["seq"])], tags=("replacement",))
            + "<p><b>Shadowed</b></p>"
            + "".join(message_card(events[s], tags=("shadowed",), extra_class="sl-gone",
                                   max_chars=600) for s in row["shadowed_seqs"])
            + "</details>")
    parts.append("</body></html>")
    return "".join(parts)
