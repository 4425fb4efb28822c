"""The compaction audit's core, without pandas: for each replace, the facts it put at risk
against the surface once it settled, how many later actions show the agent needed what
it hid, and the compactions that failed. `notebook.compaction_audit` is its frame."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, MutableMapping
from typing import Any

from ..gcpause import gc_paused
from ..surface import PlanList, apply_plan
from .brackets import Bracket, brackets, replacement_columns, settle_points
from .evidence import find_lost_evidence, surface_entries
from .facts import (
    DEFAULT_RULES,
    FactRules,
    KeptText,
    Raw,
    author_from,
    find_mentions,
    fold,
    texts_at_risk,
)
from .source import LogData, load_source, step_bar

__all__ = [
    "AUDIT_COLUMNS",
    "audit_columns",
    "extract_facts",
    "facts_at_risk_by_replace",
    "failed_compactions",
    "lost_evidence_counts",
    "settle_points",
]

# What the audit adds to the replacement columns, in this order.
AUDIT_COLUMNS = ("shadowed_type_counts", "facts_at_risk", "n_at_risk", "n_unmeasurable",
                 "saved_tokens", "lost_evidence", "redos")


def extract_facts(text: str, *, rules: FactRules = DEFAULT_RULES) -> set[str]:
    """The mentions `rules` find in `text` (see `surface_lab.analysis.facts`), as a set."""
    return {m.text for m in find_mentions(text, rules=rules)}


def facts_at_risk_by_replace(log: LogData, rules: FactRules = DEFAULT_RULES, *,
                             traces: list[Bracket] | None = None, bar: Any = None,
                             memo: MutableMapping[tuple[str, str], Raw] | None = None
                             ) -> dict[int, list[str]]:
    """For each replace, `facts_at_risk` of what it hid against the surface once it
    settled. The surface is rebuilt from the entries alone (log-only events do not move
    it); the entries' texts are decoded in one batch, each stripped and folded once for
    the kept side, and each distinct hidden text is matched once (`texts_at_risk`'s
    memo). `bar.update(1)`, when a bar is given, is called once a replace; `traces` are
    the log's `brackets` when already found; `memo` (`texts_at_risk`'s, of these rules)
    is kept by a caller that audits many logs with the same rules."""
    wanted = settle_points(log, brackets(log) if traces is None else traces)
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

    if memo is None:
        memo = {}
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
            ignore = (frozenset().union(*[tools[s] for s in (*hidden, *nodes) if tools[s]])
                      if rules.ignore_tool_names else frozenset())
            at_risk[seq] = [m.text for m in texts_at_risk(
                [(texts[s], authors[s]) for s in hidden], kept_of(nodes), rules=rules,
                ignore=ignore, memo=memo)]
            if bar is not None:
                bar.update(1)
    return at_risk


def lost_evidence_counts(log: LogData) -> Counter[int]:
    """How many later actions show the agent needed what each replace hid, by the
    replace's seq (`find_lost_evidence`, reusing the texts the audit decoded). The
    surface events are read once and kept in `log.cache["surface_entries"]`, where the
    facts ledger reads the assistant messages' calls."""
    if not log.replaces:
        return Counter()  # nothing was ever hidden: nothing to read
    plans = log.plans if isinstance(log.plans, PlanList) else PlanList.of(log.plans)
    entries = log.cache.get("surface_entries")
    if entries is None:
        known = log.entries
        with gc_paused():  # tens of thousands of small acyclic tuples
            entries = log.cache["surface_entries"] = surface_entries(
                log.events, plans, texts=log.texts(known), sources=log.sources(known),
                lines=log.cache.get("message_lines"))
    return Counter(e.replace_seq for e in find_lost_evidence(
        log.events, plans, entries=entries))


def audit_columns(log: LogData, *, rules: FactRules | None = None, progress: bool = False,
                  replacements: Mapping[str, list[Any]] | None = None
                  ) -> dict[str, list[Any]]:
    """The audit's own columns (`AUDIT_COLUMNS`), one value a replace in the order of
    `replacement_columns(log)` (pass those as `replacements` when already computed).

    The facts come from the ledger built from the log's structure (`fact_ledger`):
    `facts_at_risk` holds the top-ranked texts (at most `ledger.TOP`), `n_at_risk` the
    true count, `n_unmeasurable` the hidden items whose content is redacted or encrypted,
    and `redos` the re-dos after the replace (None where its hidden items are all
    unmeasurable). With `rules` given, `facts_at_risk` and `n_at_risk` are the old
    lexical mentions of those rules instead (`DEFAULT_RULES`, `LEGACY_RULES`), for
    comparison. `lost_evidence` is the old evidence count (`find_lost_evidence`)."""
    from .ledger import audit_facts, fact_ledger

    rep = replacement_columns(log) if replacements is None else replacements
    # the evidence walk first: the ledger reads the surface entries it read
    with step_bar("evidence of loss", 1, progress, unit=" pass") as bar:
        lost = lost_evidence_counts(log)
        bar.update(1)
    # many acyclic events and texts: no collection while they are built
    with step_bar("facts at risk", 1, progress, unit=" pass") as bar, gc_paused():
        ledger = fact_ledger(log)
        bar.update(1)
    tops, counts, unmeasurable = audit_facts(ledger, rep["seq"])
    if rules is not None:
        with gc_paused():
            at_risk = facts_at_risk_by_replace(log, rules)
        tops = [at_risk[seq] for seq in rep["seq"]]
        counts = [len(f) for f in tops]
    redos = Counter(r.replace_seq for r in ledger.redos)
    return {
        "shadowed_type_counts": [dict(Counter(types)) for types in rep["shadowed_types"]],
        "facts_at_risk": tops,
        "n_at_risk": counts,
        "n_unmeasurable": unmeasurable,
        "saved_tokens": [b - a for b, a in zip(rep["tokens_before"], rep["tokens_after"],
                                               strict=True)],
        "lost_evidence": [lost[seq] for seq in rep["seq"]],
        "redos": [None if ledger.unmeasurable_redos.get(seq) else redos[seq]
                  for seq in rep["seq"]],
    }


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
