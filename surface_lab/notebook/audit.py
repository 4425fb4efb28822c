"""The compaction audit: for each replace, what it hid, what replaced it, which facts it
put at risk, and whether the recorded decision replays; plus a self-contained report."""

from __future__ import annotations

import base64
import io
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.audit import audit_columns, extract_facts, failed_compactions
from ..analysis.brackets import bracket_of, brackets, prune_record, replacement_columns
from ..analysis.facts import FactRules
from ..analysis.source import LogData, load_source, step_bar
from ..gcpause import gc_paused
from ..glossary import TERMS, label, plural
from .columns import frame_from_columns
from .plots import figure_png, plot_shadowing, plot_surface_size
from .render import STYLE, esc, formula_safe, message_card

__all__ = [
    "audit_index",
    "audit_report",
    "compaction_audit",
    "counts_line",
    "csv_bytes",
    "extract_facts",
    "failed_compactions",
    "replacement_preview",
    "replay_differences",
    "session_counts",
    "summary_body",
]

_COUNTS = ("n_at_risk", "n_unmeasurable", "saved_tokens", "lost_evidence")  # integer columns
_NULLABLE = ("redos",)  # integer columns with NA (unmeasurable)

def compaction_audit(source: Any, *, strict: bool = True, progress: bool = True,
                     rules: FactRules | None = None) -> Any:
    """One row per replace: the `replacements_df` columns plus `shadowed_type_counts`,
    `facts_at_risk` (the top-ranked facts of the ledger built from the log's structure,
    `facts_df`, as "kind: text"; at most 10), `n_at_risk` (their true count),
    `n_unmeasurable` (hidden items redacted or encrypted), `saved_tokens`, `redos` (the
    re-dos after it, `redos_df`; NA where nothing hidden can be read) and
    `lost_evidence` (the old evidence rules' count: `lost_evidence_df`). With `rules`
    (`DEFAULT_RULES`, `LEGACY_RULES`) the facts are those old lexical mentions instead.
    `recorded_matches` is False where a trace's shadowedSeqs disagree with the fold.
    The facts read only the replaces, what they hid and the surface at each replace."""
    # Tens of thousands of acyclic objects (texts, entries, facts) live until the audit
    # ends: no collection walks them meanwhile, and they are freed (by reference counts)
    # before the collector is back, so it never walks them at all.
    with gc_paused():
        frame, problems = _audit_frame(source, strict, progress, rules)
    return frame if strict else (frame, problems)


def _audit_frame(source: Any, strict: bool, progress: bool, rules: FactRules | None
                 ) -> tuple[pd.DataFrame, list[Any]]:
    """`compaction_audit`'s frame and the log's problems (the log is dropped on return)."""
    log = load_source(source, strict=strict, progress=progress)
    log.keep_message_lines()  # the texts' decode serves the evidence walk's calls too
    replaced = replacement_columns(log)
    frame = frame_from_columns("replacements", replaced)
    for name, values in audit_columns(log, rules=rules, progress=progress,
                                      replacements=replaced).items():
        dtype = "int64" if name in _COUNTS else "Int64" if name in _NULLABLE else object
        frame[name] = pd.Series(values, dtype=dtype, index=frame.index)
    _recorded_tokens(log, frame)
    log.cache.pop("message_lines", None)  # (a log given in keeps no lines the walk left)
    return frame, log.problems


def _recorded_tokens(log: LogData, frame: pd.DataFrame) -> None:
    """tokens_before/after/saved from the usage of the requests just before and after each
    replace where the log records it (`tokens_source` usage), else the 4-characters
    estimate of the surface text (`estimate`); the estimate stays in its own columns."""
    from ..analysis.tokens import around_replaces

    copies = {s for b in brackets(log) for s in range(b.start, b.end)}
    around = around_replaces(log.events, [int(s) for s in frame["seq"]], skip=copies)
    recorded = [a.before is not None and a.after is not None for a in around]
    frame["estimated_tokens_before"] = frame["tokens_before"].astype("int64")
    frame["estimated_tokens_after"] = frame["tokens_after"].astype("int64")
    frame["tokens_before"] = pd.Series(
        [a.before if ok else e for a, ok, e in zip(around, recorded,
                                                   frame["estimated_tokens_before"],
                                                   strict=True)], dtype="int64",
        index=frame.index)
    frame["tokens_after"] = pd.Series(
        [a.after if ok else e for a, ok, e in zip(around, recorded,
                                                  frame["estimated_tokens_after"],
                                                  strict=True)], dtype="int64",
        index=frame.index)
    frame["saved_tokens"] = (frame["tokens_before"] - frame["tokens_after"]).astype("int64")
    frame["tokens_source"] = pd.Series(["usage" if ok else "estimate" for ok in recorded],
                                       dtype="string", index=frame.index)
    frame["next_cache_write"] = pd.Series([a.next_cache_write for a in around],
                                          dtype="Int64", index=frame.index)
    _recorded_costs(log, frame, around)


def _recorded_costs(log: LogData, frame: pd.DataFrame, around: list[Any]) -> None:
    """The summarizer request of each compaction and the dollars it and the cache write
    it forced cost, where the log records them: an agent's session files (the audited
    log's path) or a surface log's `compaction/summary` usage (NA otherwise)."""
    from ..analysis.prices import BundledPrices, compaction_costs
    from ..analysis.requests import read_requests, source_format, summarizer_request

    costs: list[Any] = []
    if len(frame):
        if log.path and source_format(str(log.path)) is not None:
            billed = read_requests(str(log.path))  # its subagent files hold summarizers
        else:  # a surface log records them in its compaction/summary events
            summaries = log.seqs_of_type("compaction/summary")
            billed = [r for s in summaries for r in summarizer_request(log.read(s), s)]
        try:
            table: Any = BundledPrices()
        except ModuleNotFoundError:  # without the prices extra: tokens, no dollars
            table = None
        costs = compaction_costs(around, billed, table)
    for name, dtype in (("summarizer_input", "Int64"), ("summarizer_output", "Int64"),
                        ("summarizer_usd", "float64"), ("next_cache_write_usd", "float64")):
        frame[name] = pd.Series([getattr(c, name) for c in costs] if costs else
                                [None] * len(frame), dtype=dtype, index=frame.index)


def replay_differences(log: LogData, audit: pd.DataFrame) -> list[dict[str, Any]]:
    """For each recorded decision that does not replay: the seqs it recorded beside the
    seqs the fold computed, and what each has that the other lacks."""
    traces = brackets(log)
    out = []
    for row in _records(audit[audit["recorded_matches"].fillna(True).eq(False)]):
        seq = int(row["seq"])
        bracket = bracket_of(traces, seq)
        if bracket is not None:
            recorded = list(bracket.recorded or [])
            computed = [s for r in log.replaces if bracket.start < r.seq < bracket.end
                        for s in r.shadowed]
        else:
            recorded = list(prune_record(log, seq) or [])
            computed = list(row["shadowed_seqs"])
        out.append({"seq": seq, "compaction_id": row["compaction_id"], "recorded": recorded,
                    "computed": computed,
                    "only_recorded": [s for s in recorded if s not in set(computed)],
                    "only_computed": [s for s in computed if s not in set(recorded)]})
    return out


def _summary_rows(audit: pd.DataFrame) -> list[str]:
    """The audit as a plain-text table, one string a row (what `surface-lab audit` prints,
    each row on one line: a cell may hold a line break from the log). Its headers are the
    glossary's words, as in the HTML report."""
    if not len(audit):
        return [NO_REPLACES]
    header = (f"{'seq':>6} {'kind':<10} {'id':<12} {label('n_shadowed'):>4} "
              f"{label('removed_seqs'):>7} {label('restored_seqs'):>8} "
              f"{'tokens before -> after':>22} {label('saved_tokens'):>7} "
              f"{label('n_at_risk'):>13} {label('redos'):>6}  "
              f"{label('recorded_matches')}")
    rows = [header, "-" * len(header)]
    for row in _records(audit):
        tokens = f"{row['tokens_before']} -> {row['tokens_after']}" + (
            "" if row.get("tokens_source", "estimate") == "usage" else " est")
        rows.append(f"{row['seq']:>6} {row['kind']:<10} {_text(row['compaction_id']):<12} "
                    f"{row['n_shadowed']:>4} {len(row['removed_seqs']):>7} "
                    f"{len(row['restored_seqs']):>8} {tokens:>22} {row['saved_tokens']:>7} "
                    f"{row['n_at_risk']:>13} {_redos(row):>6}  "
                    f"{_replays(row)}")
    return rows


def _redos(row: Mapping[str, Any]) -> str:
    value = row.get("redos", 0)
    return "n/a" if value is None or pd.isna(value) else str(int(value))


def session_counts(result: Mapping[str, Any]) -> dict[str, int]:
    """A session's totals as `audit_report` returned it, by glossary word: replaces,
    hid, removed, restored, saved, facts at risk, redone, failed compactions, and how
    many recorded decisions do not replay."""
    audit = result["audit"]

    def total(column: str) -> int:
        return int(audit[column].sum()) if len(audit) and column in audit else 0

    return {"replace": len(audit), "hid": total("n_shadowed"),
            "removed": sum(len(r) for r in audit["removed_seqs"]),
            "restored": sum(len(r) for r in audit["restored_seqs"]),
            "saved": total("saved_tokens"), "facts at risk": total("n_at_risk"),
            "redone": total("redos"), "failed compactions": len(result["failed"]),
            "not replaying": int(audit["recorded_matches"].fillna(True).eq(False).sum()),
            "estimated": int(audit["tokens_source"].ne("usage").sum())
            if "tokens_source" in audit else len(audit)}


def counts_line(counts: Mapping[str, int]) -> str:
    """The totals in words, the same in the command's summary line and the report's
    header: `2 replaces hid 888 entries (854 removed, 34 restored), saved 91 tokens, ...`."""
    if not counts["replace"]:
        return (f"0 replaces (nothing compacted, pruned or rolled back), "
                f"{plural(counts['failed compactions'], 'failed compaction')}")
    return (f"{plural(counts['replace'], 'replace')} hid {plural(counts['hid'], 'entry')} "
            f"({counts['removed']} removed, {counts['restored']} restored), saved "
            f"{plural(counts['saved'], 'token')} ({_tokens_source(counts)}), "
            f"{plural(counts['facts at risk'], 'fact at risk')}, {counts['redone']} redone, "
            f"{plural(counts['failed compactions'], 'failed compaction')}")


def _tokens_source(counts: Mapping[str, int]) -> str:
    """Where the saved tokens come from: the recorded usage, the estimate, or both."""
    estimated = counts.get("estimated", counts["replace"])
    if not estimated:
        return "recorded"
    if estimated == counts["replace"]:
        return "estimated"
    return f"recorded; {estimated} of {counts['replace']} estimated"


NO_REPLACES = "no replaces: nothing in this log was compacted, pruned or rolled back"


def _replays(row: Mapping[str, Any]) -> str:
    value = row["recorded_matches"]
    return "-" if value is None or pd.isna(value) else "yes" if value else "NO"


def report_stem(name: str) -> str:
    """A file-name stem for a report: the input's name, with what a file name cannot hold
    replaced."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "session"


def audit_report(source: Any, out_dir: str | Path, *, name: str | None = None,
                 notes: Sequence[Any] = (), progress: bool = True,
                 base: str | Path | None = None, fmt: str | None = None) -> dict[str, Any]:
    """Audit a log and write into `out_dir`: `<name>-swimlane.png`, a self-contained
    `<name>-audit.html` (figures embedded, all log text escaped) and the audit table as
    `<name>-audit.csv` and `<name>-audit.parquet` (Parquet needs pyarrow, the `corpus`
    extra; without it `parquet` is None and `parquet_missing` says why).

    Args:
        source: anything `load_source` accepts.
        out_dir: the folder to write into (made if missing).
        name: the stem of the files (default: the session id), e.g. the input file's name.
        notes: what an importer noted about the log, shown at the top of the report.
        progress: progress bars for the steps that take over a second.
        base: the folder that was audited: the report shows paths relative to it.
        fmt: the log's format when it was imported (`claude-code`, `codex`, ...).

    Returns:
        `{"audit": frame, "failed": [...], "replay": [...], "summary": text,
        "summary_rows": [row, ...], "png": path, "html": path, "csv": path,
        "parquet": path or None, "parquet_missing": reason or None, "format": str,
        "model": str or None, "log": LogData}`.
    """
    log = load_source(source, progress=progress)
    audit = compaction_audit(log, progress=progress)
    failed = failed_compactions(log)
    replay = replay_differences(log, audit)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = report_stem(name or log.session_id)
    about = {"format": fmt or "dsh", "model": main_model(log),
             "source": shown_path(log.path, base) if log.path else "in memory"}
    with step_bar("figures and page", 3, progress, unit=" parts") as bar:
        lanes = min(len(audit), 40)
        swimlane = figure_png(plot_shadowing, log, size=(12, 2.4 + 0.32 * lanes))
        bar.update(1)
        sizes = figure_png(plot_surface_size, log, size=(12, 3.2))
        bar.update(1)
        summary = _summary_rows(audit)
        page = _report_html(log, audit, failed, replay, swimlane, sizes,
                            [note_text(n, log.path) for n in notes], about)
        bar.update(1)
    png = out / f"{stem}-swimlane.png"
    html_path = out / f"{stem}-audit.html"
    csv_path = out / f"{stem}-audit.csv"
    parquet_path: Path | None = out / f"{stem}-audit.parquet"
    table = audit_table(audit)
    parquet, missing = _parquet_bytes(table)
    _write_new(png, swimlane)
    _write_new(csv_path, csv_bytes(table))
    if parquet is None:
        parquet_path = None
    else:
        assert parquet_path is not None
        _write_new(parquet_path, parquet)
    _write_new(html_path, page.encode("utf-8"))
    return {"audit": audit, "failed": failed, "replay": replay, "summary": "\n".join(summary),
            "summary_rows": summary, "png": png, "html": html_path, "csv": csv_path,
            "parquet": parquet_path, "parquet_missing": missing, "format": about["format"],
            "model": about["model"], "log": log}


def audit_table(audit: pd.DataFrame) -> pd.DataFrame:
    """The audit frame as a flat table for CSV and Parquet: a list stays a list (CSV
    writes it as JSON), a mapping becomes its JSON text."""
    out = audit.copy()
    for column in out.columns:
        values = out[column]
        if values.dtype == object and any(isinstance(v, Mapping) for v in values):
            out[column] = [json.dumps(dict(v), sort_keys=True) if isinstance(v, Mapping)
                           else v for v in values]
        elif values.dtype == object and any(isinstance(v, (list, tuple)) for v in values):
            out[column] = [[_plain(x) for x in v] if isinstance(v, (list, tuple)) else v
                           for v in values]
    return out


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _parquet_bytes(table: pd.DataFrame) -> tuple[bytes | None, str | None]:
    """The table as Parquet, or (None, why) when pyarrow is not installed."""
    try:
        import pyarrow  # noqa: F401  (pandas writes Parquet with it)
    except ImportError:
        return None, ("pyarrow is missing: the Parquet table needs the corpus extra "
                      "(python -m pip install 'surface-lab[corpus]')")
    buffer = io.BytesIO()
    flat = table.copy()
    for column in flat.columns:  # Arrow wants one type a column: lists of text here
        if flat[column].dtype == object and any(isinstance(v, list) for v in flat[column]):
            flat[column] = [[str(x) for x in v] if isinstance(v, list) and any(
                isinstance(x, str) for x in v) else v for v in flat[column]]
    flat.to_parquet(buffer, index=False)
    return buffer.getvalue(), None


def main_model(log: LogData) -> str | None:
    """The model that wrote most of the log's assistant messages (None when it records
    none)."""
    seqs = log.seqs_of_type("assistant/message")
    found = log.sources(seqs)  # decoded in one batch where the log is packed
    if not found:  # a log in memory
        found = {seq: log.source_of(seq) for seq in seqs}
    models = Counter(str(source.get("model")) for source in found.values()
                     if isinstance(source, Mapping) and source.get("model")
                     and source.get("model") not in ("unknown", "tombstone"))
    return models.most_common(1)[0][0] if models else None


def shown_path(path: str | Path, base: str | Path | None) -> str:
    """`path` relative to `base` when it lies inside it, else as given."""
    if base is None:
        return str(path)
    try:
        return (Path(os.path.abspath(path)).relative_to(os.path.abspath(base)).as_posix()
                or Path(path).name)
    except ValueError:
        return str(path)


def note_text(note: Any, path: str | None) -> str:
    """An importer's note without the log's path it opens with (the report is about that
    log): `line 106: note: leaf-choice: ...`."""
    text = str(note)
    if path and text.startswith(path):
        rest = text[len(path):]
        line = re.match(r":(\d+): ", rest)
        return f"line {line.group(1)}: {rest[line.end():]}" if line else rest.lstrip(": ")
    return text


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """`frame` as UTF-8 CSV with every text cell (and column name) `formula_safe`."""
    safe = frame.map(formula_safe).rename(columns=formula_safe)
    return bytes(safe.to_csv(index=False).encode("utf-8"))


def _write_new(path: Path, data: bytes) -> None:
    """Write whole or not at all: a temporary file beside it, then a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def _text(value: Any) -> str:
    """A frame cell as text, missing values as ''."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_text(v)}" for k, v in value.items())
    return ("" if value is None or (not hasattr(value, "__len__") and pd.isna(value))
        else str(value))


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{esc(alt)}" style="max-width:100%" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')


_PRUNE_MARKER = re.compile(r"\[\.\.\. \d+ characters pruned[^\]\n]*\]")
PREVIEW_CHARS = 160
# How agents open the text that replaces a compacted history: one line of framing the
# same in every summary (ours, Claude Code's, Codex's, pi's), then the summary itself.
SUMMARY_FRAMES = (
    "This is an automatically generated checkpoint of earlier history",  # surface_lab
    "This session is being continued from a previous conversation",  # Claude Code
    "Another language model started to solve this problem",  # Codex
    "The conversation history before this point was compacted",  # pi
    "The following is a summary of a branch",  # pi, a branch summary
)
# a line that is only a wrapper tag or a heading word: `<summary>`, `Summary:`
_ANALYSIS = re.compile(r"\s*(<analysis>|analysis\s*:)", re.I)
_SUMMARY_START = re.compile(r"^\s*(<summary>|summary\s*:)[ \t]*$", re.I | re.M)
_WRAPPER_LINE = re.compile(r"\s*(</?[\w-]+>|(summary|analysis|context)\s*:?)\s*", re.I)


def summary_body(text: str, shared: str = "") -> str:
    """What a replacement says, without the framing every summary opens with: a known
    agent's framing line (`SUMMARY_FRAMES`), else the `shared` opening of all the
    summaries of the log (`shared_opening`), then wrapper lines (`<summary>`,
    `Summary:`) and blank lines. The text itself when nothing is left."""
    body = text.lstrip()
    if body.startswith(SUMMARY_FRAMES):
        body = body.partition("\n")[2]
    elif shared and body.startswith(shared):
        body = body[len(shared):]
    scratch = _ANALYSIS.match(body)  # the model's analysis first: its summary says it
    if scratch is not None:
        summary = _SUMMARY_START.search(body, scratch.end())
        if summary is not None:
            body = body[summary.end():]
    lines = body.split("\n")
    while lines and (not lines[0].strip() or _WRAPPER_LINE.fullmatch(lines[0])):
        lines.pop(0)
    while lines and (not lines[-1].strip() or _WRAPPER_LINE.fullmatch(lines[-1])):
        lines.pop()
    return "\n".join(lines).strip() or text


def shared_opening(texts: Sequence[str]) -> str:
    """The whole lines that every one of two or more texts opens with (a framing an
    unknown agent repeats in each summary), else ''."""
    if len(texts) < 2:
        return ""
    low, high = min(texts), max(texts)  # their common opening is everyone's
    size = next((i for i, (a, b) in enumerate(zip(low, high, strict=False)) if a != b),
                min(len(low), len(high)))
    prefix = low[:size]
    cut = prefix.rfind("\n")
    return prefix[: cut + 1] if cut > 0 else ""


def replacement_preview(text: str, limit: int = PREVIEW_CHARS, shared: str = "") -> str:
    """A short preview of a replacement's text: what the summary says (`summary_body`),
    or for a pruned tool result its marker (`[... N characters pruned ...]`) with a
    little of the text on each side."""
    marker = _PRUNE_MARKER.search(text)
    if marker is None:
        text = summary_body(text, shared)
    if len(text) <= limit:
        return text
    if marker is None:
        return text[:limit] + " …"
    side = max(limit - len(marker.group(0)), 20) // 2
    head = text[max(marker.start() - side, 0) : marker.start()]
    tail = text[marker.end() : marker.end() + side]
    return (("… " if marker.start() > side else "") + head + marker.group(0) + tail
            + (" …" if marker.end() + side < len(text) else ""))


# The replace table's own columns; any other column of the audit frame (a scalar, a list
# or a mapping) is shown after them, as text.
_SHOWN = {"seq", "kind", "compaction_id", "n_shadowed", "removed_seqs", "restored_seqs",
          "tokens_before", "tokens_after", "saved_tokens", "n_at_risk", "recorded_matches",
          "facts_at_risk", "tokens_source"}
_HIDDEN = {"type", "start", "end", "shadowed_seqs", "shadowed_types", "chars_before",
           "chars_after", "plugin", "shadows_replacement", "shadowed_type_counts",
           "lost_evidence"}  # (the old evidence rules' count: in the frame, not the table)
_CSS = """<style>
body{margin:24px;font-family:system-ui,sans-serif;max-width:1300px}
table{border-collapse:collapse;font-size:13px;margin:6px 0 14px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}th.sl-sort{cursor:pointer;user-select:none}
th.sl-sort:after{content:" \\2195";color:#999}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.nowrap{white-space:nowrap}
td.sl-input{min-width:18em;max-width:30em;overflow-wrap:anywhere}td.sl-id{max-width:12em;overflow-wrap:anywhere}
details{margin:6px 0}summary{cursor:pointer}
details.sl-replace>summary{font-weight:600}
.bad{color:#D55E00;font-weight:600}.note{color:#444}
.sl-restored{border-left-color:#56B4E9 !important}
code{white-space:pre-wrap;word-break:break-word}
.sl-wide{overflow-x:auto;max-width:100%}
.sl-beside{display:flex;gap:1em;align-items:flex-start}.sl-beside>div{flex:1;min-width:0}
.sl-glossary dt{margin-top:4px}.sl-glossary dd{margin-left:18px;color:#444}
</style>"""
# Click a header to sort by it (numbers as numbers); no external asset.
SORT_SCRIPT = """<script>
document.querySelectorAll('table.sl-sortable').forEach(function(table){
  table.querySelectorAll('th').forEach(function(th, col){
    th.classList.add('sl-sort');
    th.addEventListener('click', function(){
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var up = th.dataset.dir !== 'up'; th.dataset.dir = up ? 'up' : 'down';
      var key = function(r){ var t = r.cells[col].dataset.v || r.cells[col].textContent;
        var n = parseFloat(t); return isNaN(n) || !/^-?[0-9.]+$/.test(t.trim())
          ? [1, t.toLowerCase()] : [0, n]; };
      rows.sort(function(a, b){ var x = key(a), y = key(b);
        var c = x[0] - y[0] || (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0);
        return up ? c : -c; });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
});
</script>"""


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, (int, float)) and not pd.isna(value):
        return f'<td class="num">{esc(value)}</td>'
    return f"<td>{esc(_text(value))}</td>"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], *, sortable: bool = False
           ) -> str:
    """An HTML table; cells are given as HTML (escape them first)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    css = ' class="sl-sortable"' if sortable else ""
    return f"<table{css}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _replace_table(log: LogData, audit: pd.DataFrame) -> str:
    extra = [c for c in audit.columns if c not in _SHOWN | _HIDDEN]
    header = ["seq", "kind", "id", *(label(c) for c in (
        "n_shadowed", "removed_seqs", "restored_seqs", "tokens_before", "tokens_after",
        "saved_tokens", "tokens_source", "n_at_risk", "recorded_matches")),
        "what replaced it (preview)", *(label(c) for c in extra)]
    texts = log.texts(int(s) for s in audit["seq"])
    shared = shared_opening([texts[int(s)] for s, k in zip(audit["seq"], audit["kind"],
                                                           strict=True)
                             if k == "compaction"])
    rows = []
    for row in _records(audit):
        seq = int(row["seq"])
        replays = _replays(row)
        rows.append([
            f'<td class="num" data-v="{seq}"><a href="#seq-{seq}">{seq}</a></td>',
            _cell(row["kind"]), _cell(row["compaction_id"]), _cell(row["n_shadowed"]),
            _cell(len(row["removed_seqs"])), _cell(len(row["restored_seqs"])),
            _cell(row["tokens_before"]), _cell(row["tokens_after"]),
            _cell(row["saved_tokens"]), _cell(row.get("tokens_source", "estimate")),
            _cell(row["n_at_risk"]),
            f"<td{' class=bad' if replays == 'NO' else ''}>{esc(replays)}</td>",
            f"<td><code>{esc(replacement_preview(texts[seq], shared=shared))}</code></td>",
            *(_cell(row[c]) for c in extra)])
    return _table(header, rows, sortable=True)


def _shadowed_card(log: LogData, seq: int, tag: str, replace_seq: int | None = None) -> str:
    """One hidden entry, collapsed: its first line as the summary, its whole text inside
    (anchored `seq-<replace>-hid-<seq>` for the facts table's links)."""
    event = log.read(seq)
    text = log.texts([seq])[seq]
    first = text.strip().split("\n", 1)[0] if text.strip() else "(no text)"
    anchor = f' id="seq-{replace_seq}-hid-{seq}"' if replace_seq is not None else ""
    return (f"<details><summary{anchor}>{esc(tag)} · seq {seq} · {esc(event['type'])} · "
            f"{plural(len(text), 'character')} · <code>{esc(first[:PREVIEW_CHARS])}</code>"
            f"</summary>"
            + message_card(event, tags=(tag,), max_chars=None,
                           extra_class="sl-restored" if tag == "restored" else "sl-gone")
            + "</details>")


def _facts_table(log: LogData, seq: int) -> str:
    """The facts the replace put at risk (the ledger, best first): kind, text, a link to
    the hidden entry, kept or not, needed later or not."""
    from ..analysis.ledger import fact_ledger

    rows = [f for f in fact_ledger(log).by_replace().get(seq, [])]
    facts = sorted((f for f in rows if f.kind != "unmeasurable"), key=lambda f: f.rank or 0)
    unmeasurable = len(rows) - len(facts)
    if not facts:
        return ("<p>No fact at risk" + (f"; {esc(plural(unmeasurable, 'hidden entry'))} "
                                         f"unmeasurable (redacted or encrypted)"
                                         if unmeasurable else "") + ".</p>")
    body = []
    for f in facts:
        needed = (f"yes (seq {', '.join(map(str, f.redo_seqs))})" if f.needed else "no")
        body.append([_cell(f.rank), _cell(f.kind), _cell(f.text),
                     f'<td><a href="#seq-{seq}-hid-{f.seq}">seq {f.seq}</a></td>',
                     f"<td{' class=bad' if f.kept == 'no' else ''}>{esc(f.kept)}</td>",
                     _cell(needed)])
    note = (f"<p>{esc(plural(len(facts), 'fact at risk'))}"
            + (f"; {esc(plural(unmeasurable, 'hidden entry'))} unmeasurable (redacted or "
               f"encrypted)" if unmeasurable else "") + ".</p>")
    return note + _wide(_table(["rank", "kind", "fact", "hidden entry", "kept",
                                "needed later"], body))


def _replace_details(log: LogData, row: Mapping[str, Any]) -> str:
    seq = int(row["seq"])
    restored = set(row["restored_seqs"])
    shown = list(row["facts_at_risk"])
    cut = (f" (top {len(shown)} of {row['n_at_risk']})"
           if len(shown) < row["n_at_risk"] else "")
    risk = "; ".join(shown) or "none"
    redos = row.get("redos")
    redone = ("" if redos is None else " · redone n/a (unmeasurable)" if pd.isna(redos)
              else f" · {int(redos)} redone")
    parts = [
        f'<details class="sl-replace" id="seq-{seq}"><summary>seq {seq} · '
        f"{esc(row['kind'])} {esc(_text(row['compaction_id']))} · hid "
        f"{esc(plural(row['n_shadowed'], 'entry'))} "
        f"({esc(_counts(row['shadowed_type_counts'])) or 'nothing'}; "
        f"{len(row['removed_seqs'])} removed, {len(restored)} restored)"
        + f" · {esc(row['tokens_before'])} → {esc(row['tokens_after'])} tokens ("
        f"{esc(row.get('tokens_source', 'estimate'))}) · "
        f"{esc(plural(row['n_at_risk'], 'fact at risk'))}" + redone
        + "</summary>",
        f"<p>Recorded decision replays: {esc(_replays(row))}. Facts at risk{esc(cut)}: "
        f"<code>{esc(risk)}</code></p>",
        _facts_table(log, seq),
        "<div class='sl-beside'><div><p><b>Replaced by</b></p>",
        message_card(log.read(seq), tags=("replacement",), max_chars=None), "</div><div>"]
    if not row["shadowed_seqs"]:
        parts.append("<p>It hid nothing.</p>")
    else:
        parts.append(f"<p><b>Hid</b> ({len(row['removed_seqs'])} removed"
                     + (f", {len(restored)} restored: copied back after it" if restored
                        else "") + ")</p>")
        parts += [_shadowed_card(log, s, "restored" if s in restored else "removed", seq)
                  for s in row["shadowed_seqs"]]
    parts.append("</div></div></details>")
    return "".join(parts)


def glossary_html() -> str:
    """The glossary (`surface_lab.glossary.TERMS`) as a collapsed definition list."""
    items = "".join(f"<dt><b>{esc(t.label)}</b>"
                    + (f" <code>{esc(t.column)}</code>" if t.column else "")
                    + f"</dt><dd>{esc(t.meaning)}</dd>" for t in TERMS)
    return (f"<details class='sl-glossary'><summary>Glossary: what each figure means"
            f"</summary><dl>{items}</dl></details>")


def _wide(table: str) -> str:
    return f"<div class='sl-wide'>{table}</div>"


def _report_html(log: LogData, audit: pd.DataFrame, failed: list[dict[str, Any]],
                 replay: list[dict[str, Any]], swimlane: bytes, sizes: bytes,
                 notes: Sequence[str], about: Mapping[str, Any]) -> str:
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    kinds = Counter(str(k) for k in audit["kind"])
    counts = session_counts({"audit": audit, "failed": failed})
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             f"<title>Compaction audit: {esc(log.session_id)}</title>", STYLE, _CSS,
             "</head><body>",
             f"<h1>Compaction audit: {esc(log.session_id)}</h1>",
             f"<p class='sl-counts'>{esc(counts_line(counts))}"
             + (" · " + esc(", ".join(plural(n, kind) for kind, n in kinds.most_common()))
                if kinds else "") + "</p>",
             f"<p class='note'>{esc(plural(len(log.events), 'event'))} · format "
             f"{esc(about['format'])}" + (f" · model {esc(about['model'])}"
                                          if about.get("model") else "")
             + f" · source <code>{esc(about['source'])}</code> · generated {generated}</p>",
             "<p class='note' style='max-width:900px'>A <b>replace</b> puts one event in the "
             "place of a run of the surface (what the model sees); the entries it <b>hid</b> "
             "are still in the log, no longer sent to the model. <b>Removed</b> ones are "
             "gone from the surface; <b>restored</b> ones an importer copied back after it. "
             "<b>Facts at risk</b>, <b>redone</b> and <b>replays</b> say what the model may "
             "have lost; the glossary below defines every figure.</p>",
             glossary_html()]
    if notes:
        parts.append(f"<h2>Import notes</h2><p class='note'>about <code>"
                     f"{esc(about['source'])}</code></p><ul>" + "".join(
                         f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    if log.problems:
        parts.append("<p class='bad'>Problems: " + "<br>".join(esc(p) for p in log.problems)
                     + "</p>")
    if replay:
        parts.append(f"<h2 class='bad'>{plural(len(replay), 'recorded decision')} that do "
                     "not replay</h2>")
        parts.append(_wide(_table(
            ["seq", "id", "recorded seqs", "computed seqs (the fold)", "only recorded",
             "only computed"],
            ([_cell(d["seq"]), _cell(d["compaction_id"]), _cell(d["recorded"]),
              _cell(d["computed"]), f"<td class='bad'>{esc(_text(d['only_recorded']))}</td>",
              f"<td class='bad'>{esc(_text(d['only_computed']))}</td>"] for d in replay))))
    if not len(audit):
        parts.append(f"<p><b>{esc(NO_REPLACES)}.</b></p>")
    parts += ["<h2>Which events each replace shadowed</h2>", _img(swimlane, "swimlane"),
              "<h2>Surface size over the log</h2>", _img(sizes, "surface size")]
    if failed:
        parts.append("<h2>Failed compactions</h2>" + _wide(_table(
            ["seq", "id", "turn", "error"],
            ([_cell(f["seq"]), _cell(f["compaction_id"]), _cell(f["turn"]),
              _cell(f["error"])] for f in failed))))
    if len(audit):
        parts += ["<h2>Replaces</h2><p class='note'>Click a header to sort; a seq opens its "
                  "details below.</p>", _wide(_replace_table(log, audit)),
                  "<h2>Each replace</h2>"]
        parts += [_replace_details(log, row) for row in _records(audit)]
    parts += [SORT_SCRIPT, "</body></html>"]
    return "".join(parts)


# The index's columns after input and session: (header, how to get it from a result).
def _index_row(result: Mapping[str, Any]) -> dict[str, Any]:
    counts = session_counts(result)
    audit = result["audit"]
    row: dict[str, Any] = {
        "format": result.get("format", "dsh"), "model": result.get("model") or "",
        "events": len(result["log"].events), "replaces": counts["replace"],
        "hid": counts["hid"], "removed": counts["removed"], "restored": counts["restored"],
        "saved": counts["saved"], "facts at risk": counts["facts at risk"],
        "redone": counts["redone"], "failed compactions": counts["failed compactions"]}
    if "cost_usd" in audit:  # the tokens' branch adds dollars per replace
        row[label("cost_usd")] = float(audit["cost_usd"].fillna(0).sum())
    row["not replaying"] = counts["not replaying"]
    return row


def audit_index(out_dir: str | Path, done: Sequence[tuple[str, Mapping[str, Any]]],
                refused: Sequence[tuple[str, str]] = ()) -> Path:
    """Write `index.html` (and the same table as `index.csv`) into `out_dir`: one row per
    audited session (as `audit_report` returned it, beside the input's label) with its
    format, model, totals and a link to its report, sortable by any column, and one row per
    input that could not be audited (`refused`: label, why). A `cost` column appears when
    an audit frame has `cost_usd`.

    Returns:
        The index's path.
    """
    records = [{"input": name, "session": result["log"].session_id, **_index_row(result)}
               for name, result in done]
    columns = list(dict.fromkeys(k for r in records for k in r))
    rows = []
    for record, (_, result) in zip(records, done, strict=True):
        bad = record["not replaying"]
        rows.append([
            f'<td class="sl-input"><a href="{esc(Path(result["html"]).name)}">'
            f'{esc(record["input"])}</a></td>',
            f"<td class='sl-id'>{esc(record['session'])}</td>",
            *(f"<td class='nowrap'>{esc(record[c])}</td>" if c in ("format", "model")
              else _cell(record.get(c, "")) for c in columns[2:-1]),
            f"<td{' class=bad' if bad else ''}>{'NO: ' + str(bad) if bad else 'yes'}</td>"])
    header = [*columns[:-1], "replays"]
    for name, why in refused:
        rows.append([f"<td>{esc(name)}</td>", f"<td class=bad colspan={max(len(header) - 1, 1)}>"
                     f"not audited: {esc(why)}</td>"])
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>Compaction audits"
            f"</title>{_CSS}<style>body{{max-width:none}}</style></head><body>"
            "<h1>Compaction audits</h1>"
            f"<p>{plural(len(done), 'session')}"
            + (f" ({plural(len(refused), 'input')} not audited)" if refused else "")
            + " · generated "
            f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} · click a header to sort"
            " · the same table: <a href='index.csv'>index.csv</a></p>"
            + _wide(_table(header, rows, sortable=True)) + glossary_html()
            + SORT_SCRIPT + "</body></html>")
    path = Path(out_dir) / "index.html"
    frame = pd.DataFrame(records, columns=columns)
    _write_new(Path(out_dir) / "index.csv", csv_bytes(frame))
    _write_new(path, page.encode("utf-8"))
    return path
