"""The names of the audit's figures, defined once: the `surface-lab audit` table and lines,
the HTML report, its index and `docs/glossary.md` (`python -m surface_lab.glossary`
writes it) all take their words from `TERMS`."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TERMS", "Term", "glossary_markdown", "label", "plural"]


@dataclass(frozen=True)
class Term:
    """One figure: the word the command and the report show (`label`), the audit
    frame's column that holds it (None for a count the frame does not keep), and what it
    means."""

    label: str
    column: str | None
    meaning: str


TERMS: tuple[Term, ...] = (
    Term("surface", None, "the ordered entries of the log the model sees at a point; the "
                          "rest of the log is kept but not sent."),
    Term("replace", "seq", "one event put in the place of a run of the surface: a "
                           "compaction's summary, a prune's shorter tool result, a mask or "
                           "a rollback. `kind` says which."),
    Term("hid", "n_shadowed", "the surface entries a replace took off the surface "
                              "(shadowed: still in the log, no longer sent): removed + "
                              "restored."),
    Term("removed", "removed_seqs", "the hidden entries that did not come back: hid minus "
                                    "restored."),
    Term("restored", "restored_seqs", "hidden entries an importer copied back right after "
                                      "the replace (moved, not lost), because the agent "
                                      "kept them but the log could not splice in place."),
    Term("tokens before", "tokens_before", "input tokens of the request just before the "
                                           "replace, as its usage recorded them (cache "
                                           "included); where the log records none, "
                                           "estimated (4 characters a token) of what the "
                                           "replace hid. `tokens source` says which."),
    Term("tokens after", "tokens_after", "input tokens of the request just after the "
                                         "replace (recorded), else the estimate of the "
                                         "replacement and of what its compaction appended."),
    Term("saved", "saved_tokens", "tokens before minus tokens after: what the replace took "
                                  "off each later request (recorded or estimated, as "
                                  "`tokens source` says)."),
    Term("tokens source", "tokens_source", "usage: the figures are the requests' recorded "
                                           "usage; estimate: 4 characters a token of the "
                                           "surface text (no system prompt or tools)."),
    Term("facts at risk", "n_at_risk", "hidden entries that carry a fact (a user's "
                                       "instruction, decision or identifier, a file read, "
                                       "edited or created, a command and its outcome, an "
                                       "error), read from the log's structure; redacted or "
                                       "encrypted entries are unmeasurable, not facts "
                                       "(`facts_df` lists them, `facts_at_risk` holds the "
                                       "top 10)."),
    Term("redone", "redos", "later actions that get back what the replace hid: a re-read "
                            "of a file whose read was hidden, the same command re-run, the "
                            "same call repeated, a question asked again, the user "
                            "re-instructing after a compaction (`redos_df` lists them; "
                            "n/a when all it hid is redacted)."),
    Term("replays", "recorded_matches", "yes when the entries a compaction recorded as "
                                        "shadowed are exactly the ones the fold removes, NO "
                                        "when they differ, - when nothing was recorded."),
    Term("failed compactions", None, "a compaction that started and ended with an error: "
                                    "nothing was replaced."),
    Term("cost", "cost_usd", "dollars of the requests (recorded, computed or estimated, "
                             "as the tokens frame says); shown when the audit has it."),
)

_BY_LABEL = {t.label: t for t in TERMS}


def label(column: str) -> str:
    """The word shown for an audit column (the column itself when it has no term)."""
    return next((t.label for t in TERMS if t.column == column), column)


def plural(count: int, noun: str) -> str:
    """`count` and the singular `noun`, plural unless one: `1 entry`, `3 entries`,
    `2 facts at risk`, `2 failed compactions` (the word before " at "/" of ", else the
    last word, takes the plural)."""
    if count == 1:
        return f"{count} {noun}"
    match = re.match(r"(.*?)(\w+)((?: (?:at|of) .*)?)$", noun)
    if match is None:
        return f"{count} {noun}"
    head, word, rest = match.groups()
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        word = word[:-1] + "ies"
    elif word.endswith(("s", "x", "ch", "sh")):
        word += "es"
    else:
        word += "s"
    return f"{count} {head}{word}{rest}"


def glossary_markdown() -> str:
    """The glossary as a Markdown page (`docs/glossary.md`)."""
    lines = ["# Glossary", "",
             "The words `surface-lab audit`, the HTML report and its index use for each "
             "figure, and the column of the audit frame (`compaction_audit`) that holds it. "
             "This page is written from `surface_lab/glossary.py` "
             "(`python -m surface_lab.glossary > docs/glossary.md`).", "",
             "| word | column | meaning |", "| --- | --- | --- |"]
    for t in TERMS:
        column = f"`{t.column}`" if t.column else ""
        lines.append(f"| **{t.label}** | {column} | {t.meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(glossary_markdown(), end="")
