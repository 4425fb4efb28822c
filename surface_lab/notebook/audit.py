"""The compaction audit: for each replace, what it hid, what replaced it, which facts it
put at risk, and whether the recorded decision replays; plus a self-contained report."""

from __future__ import annotations

import base64
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from .frames import Bracket, bracket_of, brackets, replacements_df
from .plots import figure_png, plot_shadowing, plot_surface_size
from .render import STYLE, esc, message_card
from .source import LogData, load_source, step_bar

__all__ = ["audit_report", "compaction_audit", "extract_facts", "failed_compactions"]

_FACT_PATTERNS = {
    "url": re.compile(r"https?://[^\s<>\"')\]]+"),
    "path": re.compile(r"(?<![\w/])(?:[\w.-]+/)+[\w.-]*\w|\b[\w-]+\.(?:py|js|ts|md|txt|json|"
                       r"jsonl|log|ya?ml|toml|rs|go|c|h|cpp|java|sh|html|css|sql|csv|o)\b"),
    "symbol": re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?=\()|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"
                         r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b"),
    # 3+ digits, not a "12:" line-number prefix of tool output
    "number": re.compile(r"(?<![\w.])\d{3,}(?:\.\d+)?(?![\w.:])"),
}


def extract_facts(text: str) -> set[str]:
    """Identifiers a summary should keep: URLs, file paths, code symbols, and numbers of
    three or more digits (not the `12:` line numbers of tool output)."""
    urls = _FACT_PATTERNS["url"]
    facts = {m.group(0) for m in urls.finditer(text)}
    rest = urls.sub(" ", text)  # a URL's parts are not paths or symbols of their own
    for name, pattern in _FACT_PATTERNS.items():
        if name != "url":
            facts.update(m.group(0) for m in pattern.finditer(rest))
    return facts


class _Facts:
    """`extract_facts` of many texts, each distinct word looked at once. No pattern
    matches across whitespace, and whitespace looks to every lookaround like the end of
    the text, so a text's facts are the union of its words' facts; a log repeats its
    words (tool output above all) far more than its texts."""

    def __init__(self) -> None:
        self._words: dict[str, frozenset[str]] = {}
        self._texts: dict[str, frozenset[str]] = {}  # tool output repeats whole, too

    def of(self, text: str) -> frozenset[str]:
        found = self._texts.get(text)
        if found is None:
            words = set(text.split())
            known = self._words
            for word in words.difference(known):
                known[word] = frozenset(extract_facts(word))
            found = self._texts[text] = frozenset().union(*map(known.__getitem__, words))
        return found

    def of_entries(self, log: LogData, seqs: Iterable[int]) -> dict[int, frozenset[str]]:
        """The facts of each of these entries' texts (each entry looked at once)."""
        cache: dict[int, frozenset[str]] = log.cache.setdefault("facts", {})
        missing = [s for s in seqs if s not in cache]
        if missing:
            cache.update((seq, self.of(text)) for seq, text in log.texts(missing).items()
                         if seq not in cache)
        return cache


def _settle_points(log: LogData, traces: list[Bracket]) -> dict[int, list[int]]:
    """For each event after which the audit looks at the surface, the replaces it
    settles: what the model still sees once the whole manipulation is done is the surface
    just after the replace, or after its bracket's end when an importer re-appended kept
    items."""
    wanted: dict[int, list[int]] = {}
    last = len(log.events) - 1
    for plan in log.replaces:
        bracket = bracket_of(traces, plan.seq)
        at = bracket.end if bracket is not None and bracket.start < plan.seq else plan.seq
        wanted.setdefault(min(at, last), []).append(plan.seq)
    return wanted


def _facts_at_risk(log: LogData, traces: list[Bracket], bar: Any) -> dict[int, list[str]]:
    """For each replace, the facts of what it hid that the surface no longer mentions once
    it settled. One sweep over the entries: the count of each fact on the surface is kept
    up to date at each settle point only, so an entry added and hidden between two of
    them is never read."""
    facts = _Facts()
    wanted = _settle_points(log, traces)
    replaces = {p.seq: p for p in log.replaces}
    entries = log.entries
    on_surface: set[int] = set()
    counted: set[int] = set()
    entry_facts = facts.of_entries(log, ())  # the log's cache, filled as entries are read
    present: Counter[str] = Counter()
    at_risk: dict[int, set[str]] = {}
    done = 0
    for point in sorted(wanted):
        stop = bisect_right(entries, point)
        for seq in entries[done:stop]:
            plan = replaces.get(seq)
            if plan is not None:
                on_surface.difference_update(plan.shadowed)
            on_surface.add(seq)
        done = stop
        for seq in counted - on_surface:
            for fact in entry_facts[seq]:  # drop what no entry mentions any more
                if present[fact] == 1:
                    del present[fact]
                else:
                    present[fact] -= 1
        new = on_surface - counted
        facts.of_entries(log, new)
        for seq in new:
            present.update(entry_facts[seq])
        counted = set(on_surface)
        for seq in wanted[point]:
            shadowed = replaces[seq].shadowed
            facts.of_entries(log, shadowed)
            hidden = set().union(*(entry_facts[s] for s in shadowed))
            at_risk[seq] = hidden.difference(present)
            bar.update(1)
    # Natural order (handler_2 before handler_10), each distinct fact keyed once.
    ranks = {f: k for k, f in enumerate(sorted(set().union(*at_risk.values()), key=_natural))}
    return {seq: sorted(found, key=ranks.__getitem__) for seq, found in at_risk.items()}


def compaction_audit(source: Any, *, strict: bool = True, progress: bool = True) -> Any:
    """One row per replace: the `replacements_df` columns plus `shadowed_type_counts`,
    `facts_at_risk` (identifiers in the shadowed content found neither in the replacement
    nor in the rest of the surface just after it), `n_at_risk` and `saved_tokens`.
    `recorded_matches` is False where a trace's shadowedSeqs disagree with the fold.
    Only the replaces, what they hid, the traces and the surface at each replace are read.
    """
    log = load_source(source, strict=strict, progress=progress)
    frame = replacements_df(log) if strict else replacements_df(log, strict=False)[0]
    with step_bar("facts at risk", len(frame), progress) as bar:
        at_risk = _facts_at_risk(log, brackets(log), bar)
    frame = frame.copy()
    frame["shadowed_type_counts"] = [dict(Counter(types)) for types in frame["shadowed_types"]]
    frame["facts_at_risk"] = [at_risk[int(seq)] for seq in frame["seq"]]
    frame["n_at_risk"] = frame["facts_at_risk"].map(len).astype("int64")
    frame["saved_tokens"] = (frame["tokens_before"] - frame["tokens_after"]).astype("int64")
    return frame if strict else (frame, log.problems)


_DIGITS = re.compile(r"(\d+)")


def _natural(text: str) -> list[Any]:
    """Sort key that puts handler_2 before handler_10."""
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(text)]


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
              f"{'at risk':>7}  replays")
    rows = [header, "-" * len(header)]
    for row in _records(audit):
        replays = "-" if pd.isna(row["recorded_matches"]) else (
            "yes" if row["recorded_matches"] else "NO")
        tokens = f"{row['tokens_before']} -> {row['tokens_after']}"
        rows.append(f"{row['seq']:>6} {row['kind']:<10} {_text(row['compaction_id']):<10} "
                    f"{row['n_shadowed']:>4} {tokens:>15} {row['n_at_risk']:>7}  {replays}")
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
             "risk</b> are identifiers (paths, URLs, code symbols, numbers) in the shadowed "
             "entries that neither the replacement nor the rest of the surface still "
             "mentions. <b>Replays</b> says whether the entries a compaction recorded as "
             "shadowed are exactly the ones the fold removes.</p>"]
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
            f"</summary><p>Recorded decision replays: {esc(replays)}. Facts at risk: "
            f"<code>{esc(risk)}</code></p><p><b>Replaced by</b></p>"
            + message_card(events[int(row["seq"])], tags=("replacement",))
            + "<p><b>Shadowed</b></p>"
            + "".join(message_card(events[s], tags=("shadowed",), extra_class="sl-gone",
                                   max_chars=600) for s in row["shadowed_seqs"])
            + "</details>")
    parts.append("</body></html>")
    return "".join(parts)
