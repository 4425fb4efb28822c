"""Score the fact and evidence rules against an adjudicated label file (issue 26, point 3c).

    python tests/data/facts_eval/evaluate.py LABELS.jsonl [--packet v2|v3|...] [--json OUT.json]
        [--md OUT.md] [--resamples 2000] [--seed 26]

Rebuilds every packet replace's log with `build_packet.py`'s own functions (so the ids
`<replace-id>:<seq>` and `<replace-id>:a<seq>` are those of the packet), runs on each

* the new rules: the facts ledger and the re-dos (`surface_lab.analysis.ledger`), and
* the old rules: `DEFAULT_RULES` mentions (each mapped to the first hidden item whose
  text holds it) and `find_lost_evidence` rows,

and reports, old beside new, for all replaces and for recorded and replay replaces apart:

* facts recall@10: per replace the 10 top-ranked items against the items labelled
  `fact` (summed over replaces);
* facts capped recall@10: the same hits over min(10, the replace's facts), summed (the
  standard capped recall: a replace hiding 100 facts can hold only 10 in a top 10);
* facts recall@10 per replace: the mean over replaces with a fact of each one's recall@10
  (the macro average: every replace weighs the same, however many facts it hides);
* key-fact recall@10, where the labels carry `key` (packet v3): key facts in the top 10
  over key facts;
* facts precision: of every item reported, the share labelled `fact`;
* both exact (item and kind agree) and normalised (item agrees, any kind);
* kept accuracy: over items reported and labelled `fact`, the share whose kept agrees
  (the old rules report only what they judge not kept: `no`);
* evidence precision per kind (exact: labelled a re-do of that kind recovering that item;
  normalised: labelled a re-do) and recall of re-dos (exact: the kind found; normalised:
  any row on the action);

each with a bootstrap 95% interval resampling replaces (seeded). Only ids in the label
file count: a rule's row on an action the packet does not show is not scored. Labels are
the JSONL of GUIDELINES.md (`item` lines with `label`, `kind`, `kept`; `action` lines with
`redo`, `kind`, `recovers`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from surface_lab.analysis.audit import facts_at_risk_by_replace  # noqa: E402
from surface_lab.analysis.evidence import find_lost_evidence  # noqa: E402
from surface_lab.analysis.facts import DEFAULT_RULES, find_mentions  # noqa: E402
from surface_lab.analysis.ledger import fact_ledger  # noqa: E402
from surface_lab.analysis.source import load_source  # noqa: E402
from surface_lab.messages import message_text  # noqa: E402

TOP = 10
# The old mention kinds, as the nearest label kind (for exact matching only).
OLD_KINDS = {"url": "identifier", "path": "file-read", "error": "error",
             "decision": "decision", "symbol": "other", "number": "identifier",
             "identifier": "identifier", "command": "command"}
OLD_REDOS = {"repeated-call": "repeat-call", "same-target": "re-read", "re-asked": "re-ask"}


@dataclass
class Case:
    """One replace to score: its id, recorded or replay, its log, the replacement's seq,
    the hidden seqs, and the source file it came from (the unit `--by-log` resamples)."""

    rid: str
    origin: str
    events: list[Any]
    seq: int
    run: list[int]
    log: str = ""


@dataclass
class Predicted:
    """What one rule set reports on one replace."""

    items: list[tuple[str, str, str]] = field(default_factory=list)  # (id, kind, kept) ranked
    actions: list[tuple[str, str, str]] = field(default_factory=list)  # (id, kind, recovers)


# ------------------------------------------------------------------ rule output


def _call_seqs(events: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in events:
        if e["type"] == "tool/call":
            out.setdefault(str(e["data"].get("callId")), int(e["seq"]))
    return out


def new_rules(case: Case) -> Predicted:
    """The ledger's facts (ranked) and re-dos on this replace."""
    log = load_source(case.events, progress=False)
    ledger = fact_ledger(log)
    calls = _call_seqs(case.events)
    facts = sorted((f for f in ledger.facts if f.replace_seq == case.seq
                    and f.kind != "unmeasurable"), key=lambda f: f.rank or 0)
    out = Predicted()
    out.items = [(f"{case.rid}:{f.seq}", f.kind, f.kept or "no") for f in facts]
    for r in ledger.redos:
        if r.replace_seq != case.seq:
            continue
        at = calls.get(r.call_id, r.seq) if r.call_id is not None else r.seq
        out.actions.append((f"{case.rid}:a{at}", r.kind, f"{case.rid}:{r.hidden_seq}"))
    return out


def old_rules(case: Case) -> Predicted:
    """`DEFAULT_RULES` mentions mapped to the first hidden item whose text holds each, in
    the rules' rank order; `find_lost_evidence` rows of this replace."""
    log = load_source(case.events, progress=False)
    mentions = facts_at_risk_by_replace(log, DEFAULT_RULES).get(case.seq, [])
    texts = {s: message_text(case.events[s]).lower() for s in case.run}
    out = Predicted()
    seen: set[str] = set()
    for mention in mentions:
        low = mention.lower()
        seq = next((s for s in case.run if low in texts[s]), None)
        if seq is None:
            continue
        item = f"{case.rid}:{seq}"
        if item in seen:
            continue
        seen.add(item)
        kinds = [m.kind for m in find_mentions(mention)] or ["other"]
        out.items.append((item, OLD_KINDS.get(kinds[0], "other"), "no"))
    calls = _call_seqs(case.events)
    for e in find_lost_evidence(case.events):
        if e.replace_seq != case.seq:
            continue
        at = e.seq
        if e.tool is not None:
            for b in case.events[e.seq]["data"]["message"]["content"]:
                if b.get("type") == "tool-call" and b.get("name") == e.tool and \
                        str(b.get("arguments")) == e.arguments:
                    at = calls.get(str(b.get("id")), e.seq)
                    break
        out.actions.append((f"{case.rid}:a{at}", OLD_REDOS.get(e.kind, e.kind),
                            f"{case.rid}:{e.hidden_seq}"))
    return out


# ---------------------------------------------------------------------- labels


def read_labels(path: Path) -> tuple[dict[str, Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """(item id -> label line, action id -> label line); a bad line names file and line."""
    items: dict[str, Mapping[str, Any]] = {}
    actions: dict[str, Mapping[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise SystemExit(f"{path}:{n}: not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise SystemExit(f"{path}:{n}: not a JSON object")
            if "item" in row:
                items[str(row["item"])] = row
            elif "action" in row:
                actions[str(row["action"])] = row
            else:
                raise SystemExit(f"{path}:{n}: neither an item nor an action line")
    return items, actions


def _recovers(row: Mapping[str, Any]) -> set[str]:
    value = row.get("recovers")
    if isinstance(value, list):
        return {str(v) for v in value}
    return {str(value)} if value else set()


# ------------------------------------------------------------------- counting


# per replace, the counts every figure is a ratio of
Counts = dict[str, float]


def count(case: Case, got: Predicted, items: Mapping[str, Mapping[str, Any]],
          actions: Mapping[str, Mapping[str, Any]], *, key: bool = False) -> Counts:
    """The numerators and denominators of every figure on one replace (with `key`, those
    of key-fact recall too)."""
    prefix = f"{case.rid}:"
    mine = {i: r for i, r in items.items() if i.startswith(prefix) and ":a" not in i[len(
        case.rid):]}
    gold = {i for i, r in mine.items() if r.get("label") == "fact"}
    c: Counts = {"gold_facts": len(gold)}
    reported = [(i, k, kept) for i, k, kept in got.items if i in mine]
    top = reported[:TOP]
    c["top_hit_norm"] = sum(i in gold for i, _, _ in top)
    c["top_hit_exact"] = sum(i in gold and mine[i].get("kind") == k for i, k, _ in top)
    c["gold_capped"] = min(TOP, len(gold))
    c["has_facts"] = 1 if gold else 0  # the per-replace mean counts replaces with facts
    c["top_share_norm"] = c["top_hit_norm"] / len(gold) if gold else 0
    c["top_share_exact"] = c["top_hit_exact"] / len(gold) if gold else 0
    if key:
        keys = {i for i in gold if mine[i].get("key") is True}
        c["gold_key"] = len(keys)
        c["top_key_norm"] = sum(i in keys for i, _, _ in top)
        c["top_key_exact"] = sum(i in keys and mine[i].get("kind") == k for i, k, _ in top)
    c["reported"] = len(reported)
    c["reported_fact_norm"] = sum(i in gold for i, _, _ in reported)
    c["reported_fact_exact"] = sum(i in gold and mine[i].get("kind") == k
                                   for i, k, _ in reported)
    both = [(i, kept) for i, _, kept in reported if i in gold]
    c["kept_pairs"] = len(both)
    c["kept_agree"] = sum(mine[i].get("kept") == kept for i, kept in both)
    acts = {a: r for a, r in actions.items() if a.startswith(prefix)}
    redos = {a for a, r in acts.items() if r.get("redo") == "yes"}
    c["gold_redos"] = len(redos)
    found_norm: set[str] = set()
    found_exact: set[str] = set()
    for a, kind, recovers in got.actions:
        if a not in acts:
            continue
        label = acts[a]
        yes = label.get("redo") == "yes"
        exact = yes and label.get("kind") == kind and recovers in _recovers(label)
        c[f"ev_{kind}"] = c.get(f"ev_{kind}", 0) + 1
        c[f"ev_{kind}_norm"] = c.get(f"ev_{kind}_norm", 0) + yes
        c[f"ev_{kind}_exact"] = c.get(f"ev_{kind}_exact", 0) + exact
        c["ev_all"] = c.get("ev_all", 0) + 1
        c["ev_all_norm"] = c.get("ev_all_norm", 0) + yes
        c["ev_all_exact"] = c.get("ev_all_exact", 0) + exact
        if yes:
            found_norm.add(a)
            if label.get("kind") == kind:
                found_exact.add(a)
    c["redo_found_norm"] = len(found_norm)
    c["redo_found_exact"] = len(found_exact)
    return c


def figures(counts: Sequence[Counts]) -> dict[str, tuple[float, float] | None]:
    """Every figure as (numerator, denominator) summed over these replaces."""

    def total(key: str) -> float:
        return sum(c.get(key, 0) for c in counts)

    out: dict[str, tuple[float, float] | None] = {
        "facts recall@10 (exact)": (total("top_hit_exact"), total("gold_facts")),
        "facts recall@10 (normalised)": (total("top_hit_norm"), total("gold_facts")),
        "facts capped recall@10 (exact)": (total("top_hit_exact"), total("gold_capped")),
        "facts capped recall@10 (normalised)": (total("top_hit_norm"), total("gold_capped")),
        "facts recall@10 per replace (exact)": (total("top_share_exact"), total("has_facts")),
        "facts recall@10 per replace (normalised)": (total("top_share_norm"),
                                                     total("has_facts")),
    }
    if any("gold_key" in c for c in counts):
        out["key-fact recall@10 (exact)"] = (total("top_key_exact"), total("gold_key"))
        out["key-fact recall@10 (normalised)"] = (total("top_key_norm"), total("gold_key"))
    out |= {
        "facts precision (exact)": (total("reported_fact_exact"), total("reported")),
        "facts precision (normalised)": (total("reported_fact_norm"), total("reported")),
        "kept accuracy": (total("kept_agree"), total("kept_pairs")),
        "re-do recall (exact)": (total("redo_found_exact"), total("gold_redos")),
        "re-do recall (normalised)": (total("redo_found_norm"), total("gold_redos")),
    }
    kinds = sorted({k[3:] for c in counts for k in c if k.startswith("ev_")
                    and not k.endswith(("_norm", "_exact"))})
    for kind in kinds:
        out[f"evidence precision {kind} (exact)"] = (total(f"ev_{kind}_exact"),
                                                     total(f"ev_{kind}"))
        out[f"evidence precision {kind} (normalised)"] = (total(f"ev_{kind}_norm"),
                                                          total(f"ev_{kind}"))
    return out


def _ratio(pair: tuple[float, float] | None) -> float | None:
    if pair is None or not pair[1]:
        return None
    return pair[0] / pair[1]


def bootstrap(counts: Sequence[Counts], *, resamples: int, seed: int
              ) -> dict[str, dict[str, Any]]:
    """Each figure with its point value, n (the denominator) and a 95% percentile interval
    over `resamples` resamplings of the replaces (with replacement)."""
    point = figures(counts)
    rng = random.Random(seed)
    draws: dict[str, list[float]] = {name: [] for name in point}
    n = len(counts)
    for _ in range(resamples if n else 0):
        sample = [counts[rng.randrange(n)] for _ in range(n)]
        got = figures(sample)
        for name in point:
            value = _ratio(got.get(name))
            if value is not None:
                draws[name].append(value)
    out = {}
    for name, pair in point.items():
        values = sorted(draws[name])
        low = values[int(0.025 * (len(values) - 1))] if values else None
        high = values[int(0.975 * (len(values) - 1))] if values else None
        out[name] = {"value": _ratio(pair), "n": pair[1] if pair else 0,
                     "hits": pair[0] if pair else 0, "low": low, "high": high}
    return out


def _by_log(rows: Sequence[tuple[str, Counts]], by_log: bool) -> list[Counts]:
    """The counts to resample: one per replace, or (`by_log`) one per log, its replaces'
    counts summed (every figure is a ratio of sums, so the point values do not move)."""
    if not by_log:
        return [c for _, c in rows]
    summed: dict[str, Counts] = {}
    for log, c in rows:
        into = summed.setdefault(log, {})
        for key, value in c.items():
            into[key] = into.get(key, 0) + value
    return list(summed.values())


def evaluate(cases: Iterable[Case], items: Mapping[str, Mapping[str, Any]],
             actions: Mapping[str, Mapping[str, Any]], *, resamples: int = 2000,
             seed: int = 26,
             rule_sets: Mapping[str, Callable[[Case], Predicted]] | None = None,
             by_log: bool = False) -> dict[str, Any]:
    """The report: per rule set and group (all, recorded, replay), every figure (key-fact
    recall too when any item label carries `key`, as packet v3's do). With `by_log` the
    bootstrap resamples source logs, each with all its replaces of the group (a cluster
    bootstrap: replaces of one log are not independent); the values are the same."""
    rule_sets = rule_sets or {"old": old_rules, "new": new_rules}
    key = any("key" in row for row in items.values())
    per: dict[str, list[tuple[str, Counts]]] = {name: [] for name in rule_sets}
    logs: list[str] = []  # each case's source log, in the order of `per`'s rows
    n_cases = 0
    for case in cases:
        n_cases += 1
        logs.append(case.log or case.rid)
        for name, run in rule_sets.items():
            per[name].append((case.origin, count(case, run(case), items, actions, key=key)))
    out: dict[str, Any] = {"replaces": n_cases, "resamples": resamples, "seed": seed,
                           "results": {}}
    if by_log:
        out["resampled"] = "logs"
    for name, rows in per.items():
        out["results"][name] = {
            group: bootstrap(_by_log([(log, c) for (origin, c), log in zip(
                                 rows, logs, strict=True)
                                 if group == "all" or origin == group], by_log),
                             resamples=resamples, seed=seed)
            for group in ("all", "recorded", "replay")}
        out["results"][name]["replaces"] = {
            "all": len(rows), "recorded": sum(o == "recorded" for o, _ in rows),
            "replay": sum(o == "replay" for o, _ in rows)}
    return out


def markdown(report: Mapping[str, Any]) -> str:
    """The report as a Markdown table: one row per figure and group, old beside new."""
    names = list(report["results"])
    unit = ("the source logs (each with all its replaces)"
            if report.get("resampled") == "logs" else "the replaces")
    lines = [f"Replaces: {report['replaces']}; bootstrap: {report['resamples']} "
             f"resamplings of {unit}, seed {report['seed']}; 95% intervals.", "",
             "| figure | group | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    first = report["results"][names[0]]
    figures_seen: list[str] = []
    for name in names:
        for fig in report["results"][name]["all"]:
            if fig not in figures_seen:
                figures_seen.append(fig)
    for fig in figures_seen:
        for group in ("all", "recorded", "replay"):
            cells = []
            for name in names:
                row = report["results"][name][group].get(fig)
                if row is None or row["value"] is None:
                    cells.append("-")
                    continue
                interval = ("" if row["low"] is None else
                            f" [{row['low']:.2f}, {row['high']:.2f}]")
                hits = row["hits"]  # a sum of shares for the per-replace mean
                hits = f"{hits:g}" if float(hits).is_integer() else f"{hits:.1f}"
                cells.append(f"{row['value']:.2f}{interval} ({hits}/{row['n']:g})")
            lines.append(f"| {fig} | {group} | " + " | ".join(cells) + " |")
    del first
    return "\n".join(lines) + "\n"


def packet_cases(packet: str = "v2") -> list[Case]:
    """Every replace of packet `packet` (v2, v3, v3r, v4, or several joined by `+`), rebuilt
    with build_packet.py's own functions."""
    import build_packet

    return [Case(r.rid, r.origin, list(r.events), r.seq, list(r.run), r.source.path)
            for name in packet.split("+")
            for r in build_packet.collect(build_packet.SETS[name])]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("labels", type=Path, help="adjudicated labels (GUIDELINES.md JSONL)")
    parser.add_argument("--packet", choices=("v2", "v3", "v3r", "v4", "v3+v3r", "v3+v3r+v4"),
                        default="v2",
                        help="the packet the labels are of: v2 (development set, default), "
                        "v3, v3r or v4 (held out: replays, a real session's recorded "
                        "compactions, more replays), or held-out packets at once")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    parser.add_argument("--md", type=Path, help="write the Markdown table here")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--by-log", action="store_true",
                        help="resample source logs, each with all its replaces, instead of "
                        "replaces (a cluster bootstrap: replaces of one log are not "
                        "independent)")
    args = parser.parse_args(argv)
    try:
        items, actions = read_labels(args.labels)
    except OSError as exc:
        print(f"{args.labels}: cannot read: {exc.strerror}", file=sys.stderr)
        return 2
    import build_packet

    try:
        cases = packet_cases(args.packet)
    except build_packet.PacketError as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    rids = {c.rid for c in cases}
    if not any(i.rsplit(":", 1)[0] in rids for i in [*items, *actions]):
        print(f"{args.labels}: no label is of a replace of packet {args.packet} "
              "(is --packet right?)", file=sys.stderr)
        return 2
    report = evaluate(cases, items, actions, resamples=args.resamples, seed=args.seed,
                      by_log=args.by_log)
    table = markdown(report)
    print(table, end="")
    if args.md:
        args.md.write_text(table, encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
