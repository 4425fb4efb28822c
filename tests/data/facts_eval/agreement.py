"""Agreement between two annotations of the facts-eval packet (GUIDELINES.md).

    python tests/data/facts_eval/agreement.py A.jsonl B.jsonl
        [--packet packet/ | packet_v3/ | ITEMS.jsonl] [--disagreements OUT.jsonl] [--json]

Checks that each file labels every hidden item and action of the packet exactly once with
valid values, then reports Cohen's kappa for facts (fact or not, per item; `unmeasurable`
is its own category in the three-way figure and "not a fact" in the binary one), for kept
(among items both call a fact), for evidence (re-do or not, per action) and for the re-do
kind (with "none" for no re-do), and lists every disagreement for adjudication. On a
packet whose replaces ask for the field `key` (v3), every fact line must carry `key` (true
or false), a replace may have at most 10 key facts, and kappa is reported for `key` too
(among items both call a fact). The packet is `--packet` (its folder or its items.jsonl),
else the committed packet (v2 or v3) that holds the most of the first file's ids. Exit
status: 0 when both files are complete and valid, 1 when not (the figures are still
computed over the ids both labelled), 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKET_ITEMS = HERE / "packet" / "items.jsonl"
# the committed packets: v2 (development set), v3 and v3r (held out)
PACKETS = (HERE / "packet", HERE / "packet_v3", HERE / "packet_v3r", HERE / "packet_v4")
KEY_PACKETS = ("v3", "v3r", "v4")  # packets whose fact lines carry `key`
MAX_KEY = 10  # key facts a replace may have at most

ITEM_LABELS = ("fact", "not", "unmeasurable")
KEPT = ("yes", "partly", "no")
FACT_KINDS = ("instruction", "decision", "identifier", "file-read", "file-edit",
              "file-create", "command", "error", "finding", "other")
REDO = ("yes", "no", "unmeasurable")
REDO_KINDS = ("re-read", "re-run", "repeat-call", "re-ask", "re-instruct")


class AnnotationError(Exception):
    """A file that cannot be read as annotations at all."""


@dataclass
class Annotations:
    """One annotator's labels by id, and what was wrong with the file."""

    path: str
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)  # id -> "file:line"


@dataclass
class Packet:
    """A packet's ids in packet order, the replace of each item, and whether its fact
    lines carry `key`."""

    path: Path
    items: list[str]
    actions: list[str]
    replace_of: dict[str, str] = field(default_factory=dict)
    key: bool = False

    @property
    def name(self) -> str:
        return self.path.parent.name if self.path.name == "items.jsonl" else self.path.name


def read_packet(path: Path) -> Packet:
    """A packet from its folder or its items.jsonl."""
    if path.is_dir():
        path = path / "items.jsonl"
    out = Packet(path, [], [])
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("record") == "item":
            out.items.append(record["id"])
            out.replace_of[record["id"]] = str(record.get("replace"))
        elif record.get("record") == "action":
            out.actions.append(record["id"])
        elif record.get("record") == "replace" and record.get("packet") in KEY_PACKETS:
            out.key = True
    return out


def find_packet(ann: Annotations, candidates: Sequence[Path] = PACKETS) -> Path:
    """The committed packet holding the most of this file's ids (v2 when none holds any)."""
    ids = set(ann.items) | set(ann.actions)
    best, most = candidates[0], -1
    for path in candidates:
        if not (path / "items.jsonl").is_file():
            continue
        packet = read_packet(path)
        held = len(ids & (set(packet.items) | set(packet.actions)))
        if held > most:
            best, most = path, held
    return best


def packet_ids(path: Path = PACKET_ITEMS) -> tuple[list[str], list[str]]:
    """(hidden item ids, action ids) of the packet, in packet order."""
    items, actions = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("record") == "item":
            items.append(record["id"])
        elif record.get("record") == "action":
            actions.append(record["id"])
    return items, actions


def _check_item(row: Mapping[str, Any]) -> list[str]:
    out = []
    label = row.get("label")
    if label not in ITEM_LABELS:
        out.append(f"label {label!r} is not one of {', '.join(ITEM_LABELS)}")
    if label == "fact":
        if row.get("kind") not in FACT_KINDS:
            out.append(f"kind {row.get('kind')!r} is not one of {', '.join(FACT_KINDS)}")
        if row.get("kept") not in KEPT:
            out.append(f"kept {row.get('kept')!r} is not one of {', '.join(KEPT)}")
        if not isinstance(row.get("fact"), str) or not row["fact"].strip():
            out.append("a fact needs its 'fact' text")
    elif row.get("kept") is not None:
        out.append(f"kept is {row.get('kept')!r} but must be null for label {label!r}")
    key = row.get("key")
    if key is not None and not isinstance(key, bool):
        out.append(f"key {key!r} must be true or false")
    if key is not None and label != "fact":
        out.append(f"key is {key!r} but only a fact carries key (label {label!r})")
    return out


def key_problems(ann: Annotations, packet: Packet) -> list[str]:
    """On a packet with `key`: fact lines without it, and replaces with more than
    MAX_KEY key facts."""
    if not packet.key:
        return []
    out = []
    per: Counter[str] = Counter()
    for i, row in ann.items.items():
        if row.get("label") != "fact":
            continue
        if not isinstance(row.get("key"), bool):
            out.append(f"{ann.where.get(i, ann.path)}: {i}: a fact of packet {packet.name} "
                       "needs 'key': true or false")
        elif row["key"]:
            per[packet.replace_of.get(i, i.rsplit(":", 1)[0])] += 1
    out += [f"{ann.path}: replace {r} has {n} key facts, at most {MAX_KEY} allowed"
            for r, n in sorted(per.items()) if n > MAX_KEY]
    return out


def _check_action(row: Mapping[str, Any]) -> list[str]:
    out = []
    redo = row.get("redo")
    if redo not in REDO:
        out.append(f"redo {redo!r} is not one of {', '.join(REDO)}")
    if redo == "yes":
        if row.get("kind") not in REDO_KINDS:
            out.append(f"kind {row.get('kind')!r} is not one of {', '.join(REDO_KINDS)}")
        recovers = row.get("recovers")
        ids = recovers if isinstance(recovers, list) else [recovers]
        if not ids or not all(isinstance(i, str) and i for i in ids):
            out.append("a re-do needs 'recovers': a hidden item id or a list of ids")
    elif row.get("recovers") not in (None, []):
        out.append(f"recovers is {row.get('recovers')!r} but redo is {redo!r}")
    return out


def load_annotations(path: str | Path) -> Annotations:
    """Read one annotation file; every bad line is a problem naming the file and line.

    Raises:
        AnnotationError: when the file cannot be read or is not UTF-8.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AnnotationError(f"{path}: cannot read annotations: {e}") from e
    out = Annotations(str(path))
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except ValueError as e:
            out.problems.append(f"{where}: not JSON ({e})")
            continue
        if not isinstance(row, dict):
            out.problems.append(f"{where}: a line must be a JSON object")
            continue
        if isinstance(row.get("item"), str):
            key, table, errors = row["item"], out.items, _check_item(row)
        elif isinstance(row.get("action"), str):
            key, table, errors = row["action"], out.actions, _check_action(row)
        else:
            out.problems.append(f"{where}: a line needs an 'item' or an 'action' id")
            continue
        if not isinstance(row.get("reason"), str) or not row["reason"].strip():
            out.problems.append(f"{where}: every label needs a one-line 'reason'")
        out.problems += [f"{where}: {key}: {e}" for e in errors]
        if key in table:
            out.problems.append(f"{where}: {key} is labelled twice")
            continue
        table[key] = row
        out.where[key] = where
    return out


def coverage(ann: Annotations, items: Sequence[str], actions: Sequence[str]) -> list[str]:
    """Ids of the packet the file does not label, and ids it labels that are not in it."""
    out = []
    for kind, want, have in (("item", items, ann.items), ("action", actions, ann.actions)):
        missing = [i for i in want if i not in have]
        unknown = sorted(set(have) - set(want))
        if missing:
            out.append(f"{ann.path}: {len(missing)} {kind}(s) not labelled, first "
                       f"{', '.join(missing[:5])}")
        if unknown:
            out.append(f"{ann.path}: {len(unknown)} {kind} id(s) not in the packet, first "
                       f"{', '.join(unknown[:5])}")
    return out


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels of the same cases (written out: the formula is
    two lines and no dependency of ours has it); None when there are no cases, or when
    both raters gave one and the same label to every case (chance agreement 1)."""
    if len(a) != len(b):
        raise ValueError(f"kappa needs as many labels from each rater, got {len(a)} "
                         f"and {len(b)}")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    count_a, count_b = Counter(a), Counter(b)
    chance = sum(count_a[k] * count_b[k] for k in count_a) / (n * n)
    if chance == 1:
        return None
    return (observed - chance) / (1 - chance)


def _fact_binary(row: Mapping[str, Any]) -> str:
    return "fact" if row.get("label") == "fact" else "not"


def _redo_binary(row: Mapping[str, Any]) -> str:
    return "yes" if row.get("redo") == "yes" else "no"


def _redo_kind(row: Mapping[str, Any]) -> str:
    return str(row.get("kind")) if row.get("redo") == "yes" else "none"


def _recovers(row: Mapping[str, Any]) -> tuple[str, ...]:
    value = row.get("recovers")
    values = value if isinstance(value, list) else ([] if value is None else [value])
    return tuple(sorted(str(v) for v in values))


@dataclass
class Figure:
    name: str
    n: int
    agreement: float | None
    kappa: float | None


@dataclass
class Report:
    figures: list[Figure]
    disagreements: list[dict[str, Any]]
    problems: list[str]
    packet: str = ""

    @property
    def complete(self) -> bool:
        return not self.problems


def _figure(name: str, ids: Sequence[str], a: Mapping[str, Mapping[str, Any]],
            b: Mapping[str, Mapping[str, Any]], key: Any) -> Figure:
    la, lb = [key(a[i]) for i in ids], [key(b[i]) for i in ids]
    agree = sum(x == y for x, y in zip(la, lb, strict=True)) / len(ids) if ids else None
    return Figure(name, len(ids), agree, cohen_kappa(la, lb))


def _key(row: Mapping[str, Any]) -> bool:
    return row.get("key") is True


def compare(a: Annotations, b: Annotations, items: Sequence[str],
            actions: Sequence[str], *, packet: Packet | None = None) -> Report:
    """The agreement figures, the disagreements (in packet order) and every problem. With a
    packet whose fact lines carry `key`, its problems and its kappa too."""
    problems = a.problems + b.problems + coverage(a, items, actions) + \
        coverage(b, items, actions)
    with_key = packet is not None and packet.key
    if packet is not None:
        problems += key_problems(a, packet) + key_problems(b, packet)
    both_items = [i for i in items if i in a.items and i in b.items]
    both_actions = [i for i in actions if i in a.actions and i in b.actions]
    both_facts = [i for i in both_items
                  if a.items[i].get("label") == "fact" and b.items[i].get("label") == "fact"]
    both_redo = [i for i in both_actions
                 if a.actions[i].get("redo") == "yes" and b.actions[i].get("redo") == "yes"]
    figures = [
        _figure("facts: fact / not", both_items, a.items, b.items, _fact_binary),
        _figure("facts: fact / not / unmeasurable", both_items, a.items, b.items,
                lambda r: r.get("label")),
        _figure("facts: kind, where both say fact", both_facts, a.items, b.items,
                lambda r: r.get("kind")),
        _figure("facts: kept, where both say fact", both_facts, a.items, b.items,
                lambda r: r.get("kept")),
        *([_figure("facts: key, where both say fact", both_facts, a.items, b.items, _key)]
          if with_key else []),
        _figure("evidence: re-do / not", both_actions, a.actions, b.actions, _redo_binary),
        _figure("evidence: kind (none when not a re-do)", both_actions, a.actions,
                b.actions, _redo_kind),
        _figure("evidence: recovers, where both say re-do", both_redo, a.actions,
                b.actions, _recovers),
    ]
    disagreements: list[dict[str, Any]] = []
    for i in both_items:
        x, y = a.items[i], b.items[i]
        fields = ["label"] + (["kind", "kept"] + (["key"] if with_key else [])
                              if i in both_facts else [])
        differ = [f for f in fields if x.get(f) != y.get(f)]
        if differ:
            disagreements.append({"item": i, "differ": differ, "a": x, "b": y,
                                  "adjudicated": None})
    for i in both_actions:
        x, y = a.actions[i], b.actions[i]
        differ = [f for f in ("redo",) if x.get(f) != y.get(f)]
        if i in both_redo:
            differ += [f for f in ("kind",) if x.get(f) != y.get(f)]
            if _recovers(x) != _recovers(y):
                differ.append("recovers")
        if differ:
            disagreements.append({"action": i, "differ": differ, "a": x, "b": y,
                                  "adjudicated": None})
    return Report(figures, disagreements, problems, packet.name if with_key and packet else "")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render(report: Report, a: Annotations, b: Annotations) -> str:
    lines = [f"A = {a.path}", f"B = {b.path}"] + (
        [f"packet = {report.packet}"] if report.packet else []) + [""]
    width = max(len(f.name) for f in report.figures)
    lines.append(f"{'':{width}}  {'n':>5}  {'agree':>6}  {'kappa':>6}")
    for f in report.figures:
        lines.append(f"{f.name:{width}}  {f.n:>5}  {_fmt(f.agreement):>6}  {_fmt(f.kappa):>6}")
    lines += ["", f"{len(report.disagreements)} disagreement(s):"]
    for d in report.disagreements:
        key = "item" if "item" in d else "action"
        shown = {f: (d["a"].get(f), d["b"].get(f)) for f in d["differ"]}
        lines.append(f"- {key} {d[key]}: " + "; ".join(
            f"{f} A={va!r} B={vb!r}" for f, (va, vb) in shown.items()))
        lines.append(f"    A: {d['a'].get('reason')}")
        lines.append(f"    B: {d['b'].get('reason')}")
    if report.problems:
        lines += ["", f"{len(report.problems)} problem(s):"]
        lines += [f"- {p}" for p in report.problems]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--packet", type=Path,
                        help="the packet: its folder or its items.jsonl (default: the "
                        "committed packet, v2 or v3, that holds the first file's ids)")
    parser.add_argument("--disagreements", type=Path,
                        help="also write the disagreements as JSONL, for adjudication")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        a, b = load_annotations(args.a), load_annotations(args.b)
        packet = read_packet(args.packet or find_packet(a))
    except (AnnotationError, OSError, ValueError, KeyError) as e:
        print(f"agreement: {e}", file=sys.stderr)
        return 2
    report = compare(a, b, packet.items, packet.actions, packet=packet)
    if args.disagreements is not None:  # written whole beside it, then renamed into place
        partial = args.disagreements.with_name(f".{args.disagreements.name}.partial")
        partial.write_text(
            "".join(json.dumps(d, sort_keys=True) + "\n" for d in report.disagreements),
            encoding="utf-8")
        partial.replace(args.disagreements)
    if args.json:
        print(json.dumps({"figures": [f.__dict__ for f in report.figures],
                          "disagreements": report.disagreements,
                          "problems": report.problems}, indent=1, sort_keys=True))
    else:
        print(render(report, a, b))
    return 0 if report.complete else 1


if __name__ == "__main__":
    sys.exit(main())
