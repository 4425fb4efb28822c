"""The compaction audit: for each replace, what it hid, what replaced it, which facts it
put at risk, and whether the recorded decision replays; plus a self-contained report."""

from __future__ import annotations

import base64
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ..evidence import find_lost_evidence
from ..facts import (
    DEFAULT_RULES,
    FactRules,
    KeptText,
    Raw,
    author_from,
    find_mentions,
    fold,
    texts_at_risk,
)
from ..gcpause import gc_paused
from ..surface import apply_plan
from .frames import Bracket, bracket_of, brackets, prune_record, replacements_df
from .plots import figure_png, plot_shadowing, plot_surface_size
from .render import STYLE, esc, message_card
from .source import LogData, load_source, step_bar

__all__ = [
    "audit_index",
    "audit_report",
    "compaction_audit",
    "extract_facts",
    "failed_compactions",
    "replacement_preview",
    "replay_differences",
]

def extract_facts(text: str, *, rules: FactRules = DEFAULT_RULES) -> set[str]:
    """The mentions `rules` find in `text` (see `surface_lab.facts`), as a set."""
    return {m.text for m in find_mentions(text, rules=rules)}


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


def _facts_at_risk(log: LogData, traces: list[Bracket], bar: Any, rules: FactRules
                   ) -> dict[int, list[str]]:
    """For each replace, `facts_at_risk` of what it hid against the surface once it
    settled. The surface is rebuilt from the entries alone (log-only events do not move
    it); the entries' texts are decoded in one batch, each stripped and folded once for
    the kept side, and each distinct hidden text is matched once (`texts_at_risk`'s
    memo)."""
    wanted = _settle_points(log, traces)
    replaces = {p.seq: p for p in log.replaces}
    entries = log.entries
    needed = entries[: bisect_right(entries, max(wanted, default=-1))]
    texts, tools = log.texts(needed), log.tools(needed)
    authors = {s: author_from(log.type_of(s), log.source_of(s)) for s in needed}
    stripped: dict[int, str] = {}
    folded: dict[int, str] = {}

    def kept_of(nodes: list[int]) -> KeptText:
        for seq in nodes:
            if seq not in stripped:
                stripped[seq] = rules.stripped(texts[seq])
                folded[seq] = fold(stripped[seq])
        return KeptText("\n".join([stripped[s] for s in nodes]),
                        "\n".join([folded[s] for s in nodes]))

    memo: dict[tuple[str, str], Raw] = {}
    nodes: list[int] = []
    done = 0
    at_risk: dict[int, list[str]] = {}
    for point in sorted(wanted):
        stop = bisect_right(entries, point)
        for seq in entries[done:stop]:
            nodes = apply_plan(nodes, log.plans[seq])
        done = stop
        for seq in wanted[point]:  # kept: the replacement and the rest of the surface
            hidden = replaces[seq].shadowed
            ignore = frozenset().union(*[tools[s] for s in (*hidden, *nodes) if tools[s]]) \
                if rules.ignore_tool_names else frozenset()
            at_risk[seq] = [m.text for m in texts_at_risk(
                [(texts[s], authors[s]) for s in hidden], kept_of(nodes), rules=rules,
                ignore=ignore, memo=memo)]
            bar.update(1)
    return at_risk


def compaction_audit(source: Any, *, strict: bool = True, progress: bool = True,
                     rules: FactRules = DEFAULT_RULES) -> Any:
    """One row per replace: the `replacements_df` columns plus `shadowed_type_counts`,
    `facts_at_risk` (mentions `rules` find in the shadowed content, noise removed, that
    neither the replacement nor the rest of the surface just after it shows; best
    first), `n_at_risk`, `saved_tokens` and `lost_evidence` (how many later actions show
    the agent needed what this replace hid: `lost_evidence_df`).
    `recorded_matches` is False where a trace's shadowedSeqs disagree with the fold.
    The facts read only the replaces, what they hid and the surface at each replace."""
    log = load_source(source, strict=strict, progress=progress)
    frame = replacements_df(log) if strict else replacements_df(log, strict=False)[0]
    # many acyclic events and texts: no collection while they are built
    with step_bar("facts at risk", len(frame), progress) as bar, gc_paused():
        at_risk = _facts_at_risk(log, brackets(log), bar, rules)
    frame = frame.copy()
    frame["shadowed_type_counts"] = [dict(Counter(types)) for types in frame["shadowed_types"]]
    frame["facts_at_risk"] = [at_risk[int(seq)] for seq in frame["seq"]]
    frame["n_at_risk"] = frame["facts_at_risk"].map(len).astype("int64")
    _recorded_tokens(log, frame)
    with step_bar("evidence of loss", 1, progress, unit=" pass") as bar:
        known = log.entries if log.replaces else []  # texts the frame mostly decoded
        lost = Counter(e.replace_seq for e in find_lost_evidence(
            log.events, log.plans, texts=log.texts(known), sources=log.sources(known)))
        bar.update(1)
    frame["lost_evidence"] = pd.Series([lost[int(s)] for s in frame["seq"]], dtype="int64",
                                       index=frame.index)
    return frame if strict else (frame, log.problems)


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


def failed_compactions(source: Any) -> list[dict[str, Any]]:
    """Compactions that started but ended with an error (no replace was committed)."""
    log = source if isinstance(source, LogData) else load_source(source)
    out = []
    for seq in log.seqs_of_type("compaction/end"):
        data = log.read(seq).get("data")
        if isinstance(data, Mapping) and "error" in data:
            out.append({"seq": seq, "compaction_id": data.get("compactionId"),
                        "turn": data.get("turn"), "error": data.get("error")})
    return out


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
    each row on one line: a cell may hold a line break from the log)."""
    if not len(audit):
        return [NO_REPLACES]
    header = (f"{'seq':>6} {'kind':<10} {'id':<12} {'hid':>4} {'moved':>5} {'tokens':>19} "
              f"{'at risk':>7} {'redone':>6}  replays")
    rows = [header, "-" * len(header)]
    for row in _records(audit):
        tokens = f"{row['tokens_before']} -> {row['tokens_after']}" + (
            "" if row.get("tokens_source", "estimate") == "usage" else " est")
        rows.append(f"{row['seq']:>6} {row['kind']:<10} {_text(row['compaction_id']):<12} "
                    f"{len(row['removed_seqs']):>4} {len(row['restored_seqs']):>5} "
                    f"{tokens:>19} {row['n_at_risk']:>7} {row.get('lost_evidence', 0):>6}  "
                    f"{_replays(row)}")
    return rows


NO_REPLACES = "no replaces: nothing in this log was compacted, pruned or rolled back"


def _replays(row: Mapping[str, Any]) -> str:
    value = row["recorded_matches"]
    return "-" if value is None or pd.isna(value) else "yes" if value else "NO"


def report_stem(name: str) -> str:
    """A file-name stem for a report: the input's name, with what a file name cannot hold
    replaced."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "session"


def audit_report(source: Any, out_dir: str | Path, *, name: str | None = None,
                 notes: Sequence[Any] = (), progress: bool = True) -> dict[str, Any]:
    """Audit a log and write `<name>-swimlane.png` and a self-contained
    `<name>-audit.html` (figures embedded, all log text escaped) into `out_dir`.

    Args:
        source: anything `load_source` accepts.
        out_dir: the folder to write into (made if missing).
        name: the stem of the files (default: the session id), e.g. the input file's name.
        notes: what an importer noted about the log, shown at the top of the report.
        progress: progress bars for the steps that take over a second.

    Returns:
        `{"audit": frame, "failed": [...], "replay": [...], "summary": text,
        "summary_rows": [row, ...], "png": path,
        "html": path, "log": LogData}`.
    """
    log = load_source(source, progress=progress)
    audit = compaction_audit(log, progress=progress)
    failed = failed_compactions(log)
    replay = replay_differences(log, audit)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = report_stem(name or log.session_id)
    with step_bar("figures and page", 3, progress, unit=" parts") as bar:
        lanes = min(len(audit), 40)
        swimlane = figure_png(plot_shadowing, log, size=(12, 2.4 + 0.32 * lanes))
        bar.update(1)
        sizes = figure_png(plot_surface_size, log, size=(12, 3.2))
        bar.update(1)
        summary = _summary_rows(audit)
        page = _report_html(log, audit, failed, replay, swimlane, sizes, notes)
        bar.update(1)
    png = out / f"{stem}-swimlane.png"
    html_path = out / f"{stem}-audit.html"
    _write_new(png, swimlane)
    _write_new(html_path, page.encode("utf-8"))
    return {"audit": audit, "failed": failed, "replay": replay, "summary": "\n".join(summary),
            "summary_rows": summary, "png": png, "html": html_path, "log": log}


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
    return "" if value is None or (not hasattr(value, "__len__") and pd.isna(value)) \
        else str(value)


def _n(count: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{count} {noun if count == 1 else plural}"


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _img(png: bytes, alt: str) -> str:
    return (f'<img alt="{esc(alt)}" style="max-width:100%" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')


_PRUNE_MARKER = re.compile(r"\[\.\.\. \d+ characters pruned[^\]\n]*\]")
PREVIEW_CHARS = 160


def replacement_preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """A short preview of a replacement's text; a pruned tool result keeps its marker
    (`[... N characters pruned ...]`) with a little of the text on each side."""
    if len(text) <= limit:
        return text
    marker = _PRUNE_MARKER.search(text)
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
           "chars_after", "plugin", "shadows_replacement", "shadowed_type_counts"}
_CSS = """<style>
body{margin:24px;font-family:system-ui,sans-serif;max-width:1300px}
table{border-collapse:collapse;font-size:13px;margin:6px 0 14px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}th.sl-sort{cursor:pointer;user-select:none}
th.sl-sort:after{content:" \\2195";color:#999}
td.num{text-align:right;font-variant-numeric:tabular-nums}
details{margin:6px 0}summary{cursor:pointer}
details.sl-replace>summary{font-weight:600}
.bad{color:#D55E00;font-weight:600}.note{color:#444}
.sl-restored{border-left-color:#56B4E9 !important}
code{white-space:pre-wrap;word-break:break-word}
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
    header = ["seq", "kind", "id", "hid", "removed", "restored", "tokens before",
              "tokens after", "saved", "tokens source", "at risk", "replays",
              "replacement (preview)", *extra]
    texts = log.texts(int(s) for s in audit["seq"])
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
            f"<td><code>{esc(replacement_preview(texts[seq]))}</code></td>",
            *(_cell(row[c]) for c in extra)])
    return _table(header, rows, sortable=True)


def _shadowed_card(log: LogData, seq: int, tag: str) -> str:
    """One hidden entry, collapsed: its first line as the summary, its whole text inside."""
    event = log.read(seq)
    text = log.texts([seq])[seq]
    first = text.strip().split("\n", 1)[0] if text.strip() else "(no text)"
    return (f"<details><summary>{esc(tag)} · seq {seq} · {esc(event['type'])} · "
            f"{_n(len(text), 'character')} · <code>{esc(first[:PREVIEW_CHARS])}</code>"
            f"</summary>"
            + message_card(event, tags=(tag,), max_chars=None,
                           extra_class="sl-restored" if tag == "restored" else "sl-gone")
            + "</details>")


def _replace_details(log: LogData, row: Mapping[str, Any]) -> str:
    seq = int(row["seq"])
    restored = set(row["restored_seqs"])
    risk = ", ".join(row["facts_at_risk"]) or "none"
    parts = [
        f'<details class="sl-replace" id="seq-{seq}"><summary>seq {seq} · '
        f"{esc(row['kind'])} {esc(_text(row['compaction_id']))} · hid "
        f"{esc(_n(row['n_shadowed'], 'entry'))} "
        f"({esc(_counts(row['shadowed_type_counts'])) or 'nothing'})"
        + (f", {len(restored)} restored" if restored else "")
        + f" · {esc(row['tokens_before'])} → {esc(row['tokens_after'])} tokens ("
        f"{esc(row.get('tokens_source', 'estimate'))}) · "
        f"{esc(row['n_at_risk'])} facts at risk"
        + (f" · {esc(row['lost_evidence'])} redone" if "lost_evidence" in row else "")
        + "</summary>",
        f"<p>Recorded decision replays: {esc(_replays(row))}. Facts at risk: "
        f"<code>{esc(risk)}</code></p><p><b>Replaced by</b></p>",
        message_card(log.read(seq), tags=("replacement",), max_chars=None)]
    if not row["shadowed_seqs"]:
        parts.append("<p>It hid nothing.</p>")
    else:
        parts.append(f"<p><b>Hid</b> ({len(row['removed_seqs'])} removed"
                     + (f", {len(restored)} restored: copied back after it" if restored
                        else "") + ")</p>")
        parts += [_shadowed_card(log, s, "restored" if s in restored else "removed")
                  for s in row["shadowed_seqs"]]
    parts.append("</details>")
    return "".join(parts)


def _report_html(log: LogData, audit: pd.DataFrame, failed: list[dict[str, Any]],
                 replay: list[dict[str, Any]], swimlane: bytes, sizes: bytes,
                 notes: Sequence[Any]) -> str:
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    kinds = Counter(str(k) for k in audit["kind"])
    removed = sum(len(r) for r in audit["removed_seqs"])
    restored = sum(len(r) for r in audit["restored_seqs"])
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             f"<title>Compaction audit: {esc(log.session_id)}</title>", STYLE, _CSS,
             "</head><body>",
             f"<h1>Compaction audit: {esc(log.session_id)}</h1>",
             f"<p>{_n(len(log.events), 'event')} · {_n(len(audit), 'replace')}"
             + (f" ({esc(_counts(kinds))})" if kinds else "")
             + f" · {_n(removed, 'entry')} removed, {restored} restored (copied back) · "
             f"{_n(len(failed), 'failed compaction')} · source "
             f"{esc(log.path or 'in memory')} · generated {generated}</p>",
             "<p class='note' style='max-width:900px'>A <b>replace</b> puts one event in the "
             "place of a run of the surface (what the model sees); the entries it removes are "
             "<b>shadowed</b>: still in the log, no longer sent to the model. An importer "
             "that could not splice in place <b>restores</b> kept entries by copying them "
             "back after the replace: moved, not lost. <b>Facts at risk</b> are mentions "
             "(paths, URLs, errors, decisions, symbols; counters, ids and repeated log lines "
             "left out) in the shadowed entries that neither the "
             "replacement nor the rest of the surface still mentions. <b>Redone</b> "
             "(lost_evidence) counts the later actions that show the agent needed what a "
             "replace hid (a repeated call, the same file again, a question asked again). "
             "<b>Replays</b> says "
             "whether the entries a compaction recorded as shadowed are exactly the ones the "
             "fold removes.</p>"]
    if notes:
        parts.append("<h2>Import notes</h2><ul>" + "".join(
            f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    if log.problems:
        parts.append("<p class='bad'>Problems: " + "<br>".join(esc(p) for p in log.problems)
                     + "</p>")
    if replay:
        parts.append(f"<h2 class='bad'>{_n(len(replay), 'recorded decision')} that do not "
                     "replay</h2>")
        parts.append(_table(
            ["seq", "id", "recorded seqs", "computed seqs (the fold)", "only recorded",
             "only computed"],
            ([_cell(d["seq"]), _cell(d["compaction_id"]), _cell(d["recorded"]),
              _cell(d["computed"]), f"<td class='bad'>{esc(_text(d['only_recorded']))}</td>",
              f"<td class='bad'>{esc(_text(d['only_computed']))}</td>"] for d in replay)))
    if not len(audit):
        parts.append(f"<p><b>{esc(NO_REPLACES)}.</b></p>")
    parts += ["<h2>Which events each replace shadowed</h2>", _img(swimlane, "swimlane"),
              "<h2>Surface size over the log</h2>", _img(sizes, "surface size")]
    if failed:
        parts.append("<h2>Failed compactions</h2>" + _table(
            ["seq", "id", "turn", "error"],
            ([_cell(f["seq"]), _cell(f["compaction_id"]), _cell(f["turn"]),
              _cell(f["error"])] for f in failed)))
    if len(audit):
        parts += ["<h2>Replaces</h2><p class='note'>Click a header to sort; a seq opens its "
                  "details below.</p>", _replace_table(log, audit), "<h2>Each replace</h2>"]
        parts += [_replace_details(log, row) for row in _records(audit)]
    parts += [SORT_SCRIPT, "</body></html>"]
    return "".join(parts)


def audit_index(out_dir: str | Path, done: Sequence[tuple[str, Mapping[str, Any]]]) -> Path:
    """Write `index.html` into `out_dir`: one row per audited session (as `audit_report`
    returned it, beside the input's label) with its counts and a link to its report.

    Returns:
        The index's path.
    """
    rows = []
    for label, result in done:
        audit, log = result["audit"], result["log"]
        bad = int(audit["recorded_matches"].fillna(True).eq(False).sum())
        rows.append([
            f'<td><a href="{esc(Path(result["html"]).name)}">{esc(label)}</a></td>',
            _cell(log.session_id), _cell(len(log.events)), _cell(len(audit)),
            _cell(sum(len(r) for r in audit["removed_seqs"])),
            _cell(sum(len(r) for r in audit["restored_seqs"])),
            _cell(int(audit["n_at_risk"].sum()) if len(audit) else 0),
            _cell(len(result["failed"])),
            f"<td{' class=bad' if bad else ''}>{'NO: ' + str(bad) if bad else 'yes'}</td>"])
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>Compaction audits"
            f"</title>{_CSS}</head><body><h1>Compaction audits</h1>"
            f"<p>{_n(len(done), 'session')} · generated "
            f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} · click a header to sort"
            "</p>" + _table(["input", "session", "events", "replaces", "removed", "restored",
                             "facts at risk", "failed compactions", "replays"], rows,
                            sortable=True)
            + SORT_SCRIPT + "</body></html>")
    path = Path(out_dir) / "index.html"
    _write_new(path, page.encode("utf-8"))
    return path
