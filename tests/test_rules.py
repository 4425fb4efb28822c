"""Each rule has one author and both readers enforce it: every error code of SPEC 14 on
the same input gives the same answer from the fast reader and the full pipeline, a rule
added to `schema` (an envelope, message-shape or packed-row rule) or to the planner's
step 5 (`surface.SOURCE_RULES`) is enforced by both at once, and generated logs (valid
and mutated) never make them disagree."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from builders import read_outcome
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import Meta

from surface_lab import read_log, schema, surface
from surface_lab.chunks import RowError, expand_row
from surface_lab.errors import AdmissionError
from surface_lab.reading import fast

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"

# SPEC 14, in its order.
SPEC_14 = [
    "seq-not-contiguous", "surface-op-forbidden", "sources-forbidden", "surface-op-missing",
    "surface-op-invalid", "replace-op-invalid", "replace-start-missing", "replace-end-missing",
    "replace-range-reversed", "sources-not-array", "sources-empty", "sources-invalid-seq",
    "sources-duplicate", "sources-not-earlier", "replace-sources-incomplete",
    "tool-result-rewrite-count", "tool-result-rewrite-target", "tool-result-rewrite-fields",
    "envelope-invalid", "data-not-json", "message-unidentified", "message-role",
    "message-source", "message-content", "tool-result-shape", "tool-call-id-mismatch",
    "header-invalid", "format-unsupported", "type-unknown", "legacy-unsupported",
    "line-unparsable", "seq-gap", "row-malformed", "mixed-fixture-form", "log-corrupt",
    "schema-unsupported", "seq-conflict", "fixture-read-only",
]
# Codes no read of a log can give: each is raised by the writing side only.
WRITE_ONLY = {
    "seq-not-contiguous": "a JSONL or SQLite read reports a seq that is not the next as "
                          "seq-gap; appends and seeds raise this",
    "seq-conflict": "an append that does not start at the stored next seq",
    "fixture-read-only": "resuming or appending to a snapshot fixture",
}


def _lines(name: str) -> list[bytes]:
    return (SAMPLES / f"{name}.jsonl").read_bytes().splitlines(keepends=True)


def _edit(name: str, marker: bytes, old: bytes, new: bytes, *, nth: int = 0) -> bytes:
    """The sample with `old` replaced by `new` in the nth line holding `marker`."""
    lines = _lines(name)
    i = [k for k, line in enumerate(lines) if marker in line][nth]
    assert old in lines[i], (name, marker, old)
    lines[i] = lines[i].replace(old, new, 1)
    return b"".join(lines)


def _insert(name: str, before: int, line: bytes) -> bytes:
    lines = _lines(name)
    return b"".join([*lines[:before], line, *lines[before:]])


USER = b'"type":"user/message"'
STEP = b'"type":"step/start"'
TOOL = b'"type":"tool/result"'
REPLACE14 = b'"sourceEventSeqs":[14],"surfaceOp":{"op":"replace","start":14,"end":14}'


def _replace(start: int, end: int, sources: str = "") -> bytes:
    cited = f',"sourceEventSeqs":[{sources}]' if sources else ""
    return f'{cited},"surfaceOp":{{"op":"replace","start":{start},"end":{end}}}'.encode()


# The bytes of a log that breaks each rule (chat: nodes [1, 33] before seq 37).
WITNESSES: dict[str, Callable[[], bytes]] = {
    "surface-op-forbidden": lambda: _edit("chat", STEP, b"}}\n", b'},"surfaceOp":"append"}\n'),
    "sources-forbidden": lambda: _edit("chat", STEP, b"}}\n", b'},"sourceEventSeqs":[0]}\n'),
    "surface-op-missing": lambda: _edit("chat", USER, b',"surfaceOp":"append"', b"", nth=1),
    "surface-op-invalid": lambda: _edit("chat", USER, b'"append"', b'"prepend"', nth=1),
    "replace-op-invalid": lambda: _edit("chat", USER, b'"append"', b'{"op":"replace"}', nth=1),
    "replace-start-missing": lambda: _edit("chat", USER, b',"surfaceOp":"append"',
                                           _replace(99, 1, "1"), nth=1),
    "replace-end-missing": lambda: _edit("chat", USER, b',"surfaceOp":"append"',
                                         _replace(1, 99, "1"), nth=1),
    "replace-range-reversed": lambda: _edit("chat", USER, b',"surfaceOp":"append"',
                                            _replace(33, 1, "1,33"), nth=1),
    "sources-not-array": lambda: _edit("chat", USER, b',"surfaceOp"',
                                       b',"sourceEventSeqs":5,"surfaceOp"'),
    "sources-empty": lambda: _edit("chat", USER, b',"surfaceOp"',
                                   b',"sourceEventSeqs":[],"surfaceOp"'),
    "sources-invalid-seq": lambda: _edit("chat", USER, b',"surfaceOp"',
                                         b',"sourceEventSeqs":[-1],"surfaceOp"'),
    "sources-duplicate": lambda: _edit("chat", USER, b',"surfaceOp"',
                                       b',"sourceEventSeqs":[0,0],"surfaceOp"'),
    "sources-not-earlier": lambda: _edit("chat", USER, b',"surfaceOp"',
                                         b',"sourceEventSeqs":[9999],"surfaceOp"'),
    "replace-sources-incomplete": lambda: _edit("chat", USER, b',"surfaceOp":"append"',
                                                _replace(1, 33, "1"), nth=1),
    "tool-result-rewrite-count": lambda: _edit("pruned-tool-results", REPLACE14, REPLACE14,
                                               _replace(12, 14, "12,14")[1:]),
    "tool-result-rewrite-target": lambda: _edit("pruned-tool-results", REPLACE14, REPLACE14,
                                                _replace(12, 12, "12")[1:]),
    "tool-result-rewrite-fields": lambda: _edit("pruned-tool-results", REPLACE14,
                                                b'"id":"msg-000014"', b'"id":"msg-other"'),
    "envelope-invalid": lambda: _edit("chat", STEP, b'{"type"', b'{"ignorable":false,"type"'),
    "data-not-json": lambda: _edit("chat", STEP, b'"data":{',
                                   b'"data":{"deep":' + b"[" * 450 + b"]" * 450 + b","),
    "message-unidentified": lambda: _edit("chat", USER, b'"id":"msg-000001"', b'"id":""'),
    "message-role": lambda: _edit("chat", USER, b'"role":"user"', b'"role":"assistant"'),
    "message-source": lambda: _edit("chat", USER, b'"source":{"kind":"user"}',
                                    b'"source":{"kind":""}'),
    "message-content": lambda: _edit("chat", USER, b'"content":[', b'"content":"x","c":['),
    "tool-result-shape": lambda: _edit("pruned-tool-results", TOOL, b'"content":[{',
                                       b'"content":[],"c":[{'),
    "tool-call-id-mismatch": lambda: _edit("pruned-tool-results", TOOL,
                                           b'"toolCallId":"call_0001"', b'"toolCallId":"x"'),
    "header-invalid": lambda: _edit("chat", b'"type":"session"', b'"createdAt":',
                                    b'"createdAt":-'),
    "format-unsupported": lambda: _edit("chat", b'"type":"session"', b'"version":0',
                                        b'"version":1'),
    "type-unknown": lambda: _edit("chat", STEP, b'"type":"step/start"', b'"type":"x/y"'),
    "legacy-unsupported": lambda: _edit("chat", STEP, b'"type":"step/start"',
                                        b'"type":"mode/set"'),
    "line-unparsable": lambda: _insert("chat", 3, b"not json\n"),
    "seq-gap": lambda: _edit("chat", STEP, b'"seq":2,', b'"seq":20,'),
    "row-malformed": lambda: _edit("chat", b'"type":"text-chunks"', b'"dt":[', b'"dt":[1,'),
    "mixed-fixture-form": lambda: _edit("chat", STEP, b'"seq":2,"time":1767225600046,', b""),
    "log-corrupt": lambda: _lines("chat")[0].rstrip(b"\n"),
}




def _codes(outcome: tuple[str, Any]) -> set[str]:
    if outcome[0] == "error":
        return {outcome[1][1]}
    return {p.code for p in outcome[1][4]}


def _agree(path: Path) -> tuple[str, Any]:
    fast_, full = read_outcome(path, "fast"), read_outcome(path, "full")
    assert fast_ == full  # plans included
    return full


def test_the_witnesses_cover_spec_14() -> None:
    spec = (Path(__file__).resolve().parents[2] / "shared" / "spec" / "SPEC.md")
    if spec.is_file():  # beside the worktree: the list above is SPEC 14's
        table = spec.read_text().split("## 14. Error codes", 1)[1]
        listed = [c for row in table.split("\n## ", 1)[0].splitlines() if row.startswith("| `")
                  for c in re.findall(r"`([a-z-]+)`", row.split("|")[1])]
        assert listed == SPEC_14
    assert set(WITNESSES) | set(WRITE_ONLY) | {"schema-unsupported"} == set(SPEC_14)
    assert not set(WITNESSES) & set(WRITE_ONLY)


@pytest.mark.parametrize("code", sorted(WITNESSES))
def test_every_code_is_enforced_by_both_readers_on_the_same_input(
        tmp_path: Path, code: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(WITNESSES[code]())
    assert code in _codes(_agree(path))


def test_a_database_the_reader_refuses_gets_the_same_code_from_both() -> None:
    outcome = _agree(SAMPLES / "invalid-schema.db")
    assert _codes(outcome) == {"schema-unsupported"}


@pytest.fixture
def rules_restored() -> Iterator[None]:
    yield
    schema.message_struct.cache_clear()
    fast._DECODER = fast.decoder()


def test_a_rule_added_to_the_schema_is_enforced_by_both_readers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rules_restored: None) -> None:
    """The maintainer's view: one new line in `schema.MESSAGE_RULES`; a reader that did
    not take it from there would disagree with the other, and this test says so."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(_edit("chat", USER, b'"content":[{"type":"text","text":"',
                           b'"content":[],"c":[{"type":"text","text":"'))
    assert _codes(_agree(path)) == set()  # empty content is allowed today
    rule = schema.Rule("message-content", "content",
                       lambda o: Annotated[schema.list_of(o), Meta(min_length=1)],
                       "{where}.content must not be empty")
    monkeypatch.setitem(schema.MESSAGE_RULES, "user/message",
                        (*schema.MESSAGE_RULES["user/message"], rule))
    schema.message_struct.cache_clear()
    # Only the full check has it so far (the fast reader's decoder is the old one):
    assert read_outcome(path, "fast")[0] == "read" and read_outcome(path, "full")[0] == "error"
    monkeypatch.setattr(fast, "_DECODER", fast.decoder())  # what an import does
    assert _codes(_agree(path)) == {"message-content"}


def _fast_takes(data: bytes) -> bool:
    """Whether the fast reader vouches for the log itself (else the full pipeline reads it)."""
    header_end = data.index(b"\n") + 1
    return fast.fast_check(data, "mem", header_end, lambda *a, **k: None) is not None


# -- packed rows (SPEC 7.1): `schema.ROW_RULES` ------------------------------------------

ROW = b'"type":"text-chunks"'


def _row(tag: str = "text-chunks", time0: Any = 5, **data: Any) -> dict[str, Any]:
    members = "args" if tag == "tool-call-chunks" else "texts"
    fields: dict[str, Any] = {"turn": 1, "step": 1, "index": 0, "dt": [1], members: ["a", "b"]}
    if tag == "tool-call-chunks":
        fields["id"] = "c"
    fields.update(data)
    return {"type": tag, "seq0": 0, "time0": time0,
            "data": {k: v for k, v in fields.items() if v is not ...}}


MAX_SAFE = 2**53 - 1
KEYS = "['dt', 'index', 'step', 'texts', 'turn']"
# Each broken row and the message of the first rule it breaks (the messages and their
# order are expand_row's as they were before the rules became a table).
ROW_MESSAGES: dict[str, tuple[dict[str, Any], str]] = {
    "not a row tag": ({"type": "assistant/chunk", "seq0": 0, "time0": 0, "data": {}},
                      "'assistant/chunk' is not a packed row type"),
    "an extra key": ({**_row(), "extra": 1}, "a packed row has exactly the keys ['data', "
                     "'seq0', 'time0', 'type'], got ['data', 'extra', 'seq0', 'time0', 'type']"),
    "no time0": ({k: v for k, v in _row().items() if k != "time0"},
                 "a packed row has exactly the keys ['data', 'seq0', 'time0', 'type'], got "
                 "['data', 'seq0', 'type']"),
    "a negative seq0": ({**_row(), "seq0": -1}, "seq0 and time0 must be safe integers"),
    "a fractional seq0": ({**_row(), "seq0": 1.5}, "seq0 and time0 must be safe integers"),
    "an unsafe time0": (_row(time0=2**53), "seq0 and time0 must be safe integers"),
    "a boolean time0": (_row(time0=True), "seq0 and time0 must be safe integers"),
    "data not an object": ({**_row(), "data": []}, "row data must be an object"),
    "an extra data key": (_row(extra=1), f"text-chunks data has exactly the keys {KEYS}, got "
                          "['dt', 'extra', 'index', 'step', 'texts', 'turn']"),
    "no dt": (_row(dt=...), f"text-chunks data has exactly the keys {KEYS}, got ['index', "
              "'step', 'texts', 'turn']"),
    "a tool row without id": (_row("tool-call-chunks", id=...), "tool-call-chunks data has "
                              "exactly the keys ['args', 'dt', 'id', 'index', 'step', 'turn'] "
                              "(and name), got ['args', 'dt', 'index', 'step', 'turn']"),
    "a string turn": (_row(turn="1"), "turn, step and index must be integers"),
    "a boolean turn": (_row(turn=False), "turn, step and index must be integers"),
    "a fractional index": (_row(index=0.5), "turn, step and index must be integers"),
    "too many members": (_row(texts=[""] * 100_001, dt=[0] * 100_000),
                         "a packed row has 100001 members, more than the limit of 100000"),
    "too many, not strings": (_row(texts=[1] * 100_001, dt="x"),
                              "a packed row has 100001 members, more than the limit of 100000"),
    "no members": (_row(texts=[], dt=[]), "texts must be a non-empty list of strings"),
    "members not a list": (_row(texts="ab"), "texts must be a non-empty list of strings"),
    "a member not a string": (_row(texts=["a", 1]), "texts must be a non-empty list of strings"),
    "dt not a list": (_row(dt=1), "dt must list the 1 gaps between 2 members"),
    "dt too short": (_row(dt=[]), "dt must list the 1 gaps between 2 members"),
    "dt too short and a bad id": (_row("tool-call-chunks", dt=[], id=1),
                                  "dt must list the 1 gaps between 2 members"),
    "an id not a string": (_row("tool-call-chunks", id=1), "id and name must be strings"),
    "a name not a string": (_row("tool-call-chunks", name=None), "id and name must be strings"),
    "a string gap": (_row(dt=["1"]), "dt holds '1', not an integer"),
    "an unsafe gap": (_row(dt=[2**60]), "dt holds 1152921504606846976, not an integer"),
    "a boolean gap": (_row(dt=[True]), "dt holds True, not an integer"),
    "a fractional gap": (_row(dt=[1.5]), "dt holds 1.5, not an integer"),
    "a member time past the limit": (_row(time0=1, dt=[MAX_SAFE - 1, 1], texts=["a"] * 3),
                                     "a member time is not a safe integer"),
    "an unsafe time before a bad gap": (_row(dt=[MAX_SAFE, MAX_SAFE, "x"], texts=["a"] * 4),
                                        "a member time is not a safe integer"),
    "a bad gap before an unsafe time": (_row(dt=["x", MAX_SAFE], texts=["a"] * 3),
                                        "dt holds 'x', not an integer"),
    "a member time below the limit": (_row(time0=0, dt=[-MAX_SAFE, -MAX_SAFE], texts=["a"] * 3),
                                      "a member time is not a safe integer"),
}


@pytest.mark.parametrize("case", sorted(ROW_MESSAGES))
def test_a_broken_row_is_refused_with_the_message_of_its_first_broken_rule(case: str) -> None:
    record, message = ROW_MESSAGES[case]
    with pytest.raises(RowError) as info:
        expand_row(record)
    assert str(info.value) == message


def test_integral_floats_in_a_row_are_its_integers() -> None:
    record = {"type": "tool-call-chunks", "seq0": 3.0, "time0": 5.0, "data": {
        "turn": 1.0, "step": 2.0, "index": 0.0, "dt": [1.0, -2.0], "id": "c", "name": "n",
        "args": ["a", "b", "c"]}}
    events = expand_row(record)
    assert [(e["seq"], e["time"]) for e in events] == [(3, 5), (4, 6), (5, 4)]
    values = [e["seq"] for e in events] + [e["time"] for e in events] + [
        events[0]["data"]["turn"], events[0]["data"]["chunk"]["index"]]
    assert {type(v) for v in values} == {int}


def test_the_fixture_form_takes_its_position_from_the_caller() -> None:
    record = {"type": "text-chunks", "data": {"turn": 1, "step": 2, "index": 0, "dt": [1, 2],
                                              "texts": ["a", "b", "c"]}}
    events = expand_row(record, fixture=True, seq0=7, time0=9)
    assert [(e["seq"], e["time"]) for e in events] == [(7, 9), (8, 10), (9, 12)]
    with pytest.raises(RowError, match=r"exactly the keys \['data', 'type'\]"):
        expand_row({**record, "seq0": 0}, fixture=True)


@given(st.lists(st.tuples(st.integers(-MAX_SAFE, MAX_SAFE),
                          st.lists(st.integers(0, (1 << 31) - 1), max_size=4)), max_size=4))
def test_a_row_check_proving_a_stretch_at_once_answers_as_row_by_row(
        rows: list[tuple[int, list[int]]]) -> None:
    columns = schema.Rows([t for t, _ in rows], [["x"] * (len(dt) + 1) for _, dt in rows],
                          [dt for _, dt in rows])
    for check in schema.row_checks("text-chunks"):
        assert (check.broken(columns._replace(gaps_within=1 << 31)) is None) == (
            check.broken(columns) is None) == (check.broken(columns._replace(typed=True)) is None)


@pytest.fixture
def row_rules_restored() -> Iterator[None]:
    yield
    schema.row_data_struct.cache_clear()
    schema.row_struct.cache_clear()
    fast._DECODER = fast.decoder()


def _with_rule(monkeypatch: pytest.MonkeyPatch, tag: str, rule: Any) -> None:
    monkeypatch.setitem(schema.ROW_RULES, tag, (*schema.ROW_RULES[tag], rule))
    schema.row_data_struct.cache_clear()
    schema.row_struct.cache_clear()


_TURN_POSITIVE = schema.Rule("row-malformed", "turn",
                             lambda o: Annotated[int, Meta(ge=1, le=MAX_SAFE)],
                             "turn must be positive")
_GAPS_UNDER_A_SECOND = schema.Rule("row-malformed", "dt",
                                   lambda o: list[Annotated[int, Meta(ge=0, lt=1000)]],
                                   "gaps must be under a second")


@pytest.mark.parametrize(("rule", "old", "new"), [
    (_TURN_POSITIVE, b'"turn":1,', b'"turn":0,'),
    (_GAPS_UNDER_A_SECOND, b'"dt":[23,', b'"dt":[5000,'),
], ids=["on turn", "on dt"])
def test_a_row_rule_added_to_the_schema_is_enforced_by_both_readers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_rules_restored: None,
        rule: schema.Rule, old: bytes, new: bytes) -> None:
    """One new line in `schema.ROW_RULES`: the full check takes it at once, the fast
    reader once its decoder is rebuilt from the table (what an import does)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(_edit("chat", ROW, old, new))
    assert _codes(_agree(path)) == set() and _fast_takes(path.read_bytes())
    _with_rule(monkeypatch, "text-chunks", rule)
    assert _fast_takes(path.read_bytes())  # the old decoder lags behind the table
    assert _codes(read_outcome(path, "full")) == {"row-malformed"}
    monkeypatch.setattr(fast, "_DECODER", fast.decoder())
    assert _codes(_agree(path)) == {"row-malformed"}
    assert not _fast_takes(path.read_bytes())


def test_a_row_check_added_to_the_schema_is_enforced_by_both_readers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_rules_restored: None) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_edit("chat", ROW, b'"texts":["The ', b'"texts":["'))
    assert _codes(_agree(path)) == set() and _fast_takes(path.read_bytes())
    no_empty = schema.RowCheck("row-malformed", lambda rows: next(
        (i for i, members in enumerate(rows.members) if "" in members), None),
        "a member is empty")
    _with_rule(monkeypatch, "text-chunks", no_empty)
    assert _codes(_agree(path)) == {"row-malformed"}
    assert not _fast_takes(path.read_bytes())


# -- provenance (SPEC 4.1 step 5): `surface.SOURCE_RULES` --------------------------------


def test_a_provenance_rule_added_to_the_planner_is_enforced_by_both_readers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SAMPLES / "chat.jsonl"  # seq 33 cites 29 seqs
    assert _codes(_agree(path)) == set() and _fast_takes(path.read_bytes())
    at_most_20 = surface.SourceRule(
        "sources-too-many", lambda run: all(len(s) <= 20 for s in run.sources),
        lambda kind, seq, sources: f"cites {len(sources)} seqs, more than 20")
    monkeypatch.setattr(surface, "SOURCE_RULES", (*surface.SOURCE_RULES, at_most_20))
    assert _codes(_agree(path)) == {"sources-too-many"}
    assert not _fast_takes(path.read_bytes())
    with pytest.raises(AdmissionError, match="seq 33 assistant/message: cites 29 seqs"):
        surface.check_sources("assistant/message", 33, list(range(4, 33)))


_SOURCE_VALUES = st.one_of(st.integers(-2, 12), st.sampled_from([1.0, 2.5, True, None, "3"]))


@given(st.lists(st.tuples(
    st.sampled_from(["user/message", "assistant/message", "tool/result"]),
    st.one_of(st.lists(_SOURCE_VALUES, max_size=4), st.lists(st.integers(0, 12), max_size=4,
                                                              unique=True).map(sorted),
              st.sampled_from([None, 5, {"0": 1}]))), max_size=5),
    st.sampled_from([None, -1, 3]))
def test_step_5_over_a_run_answers_as_event_by_event(
        run: list[tuple[str, Any]], above: int | None) -> None:
    """`check_sources_run` (what the fast reader calls for a stretch) refuses exactly when
    `check_sources` (what `plan_event` calls) refuses one of the events, with its error."""
    kinds, sources = [k for k, _ in run], [s for _, s in run]
    seqs = list(range(10, 10 + len(run)))

    def outcome(call: Callable[[], Any]) -> Any:
        try:
            call()
        except AdmissionError as err:
            return err.code, err.seq, str(err)
        return None

    def one_by_one() -> None:
        for kind, seq, cited in zip(kinds, seqs, sources, strict=True):
            surface.check_sources(kind, seq, cited)

    assert outcome(lambda: surface.check_sources_run(kinds, seqs, sources, above=above)) == (
        outcome(one_by_one))


@given(st.lists(st.one_of(st.integers(0, 6), st.sampled_from([1.0, 2.5, True, None, "2"])),
                max_size=6))
def test_step_1_over_a_run_answers_as_event_by_event(values: list[Any]) -> None:
    """`first_misplaced` (what the fast reader calls for a stretch) finds the first value
    `seq_is` (what `plan_event` calls) refuses."""
    seqs = list(range(len(values)))
    expected = next((i for i, (v, n) in enumerate(zip(values, seqs, strict=True))
                     if not surface.seq_is(v, n)), None)
    assert surface.first_misplaced(values, seqs) == expected


# -- generated logs -----------------------------------------------------------------------

BASES = ["chat", "long-compaction", "pruned-tool-results", "tools-parallel",
         "crash-needs-repair"]


@st.composite
def _mutated_logs(draw: st.DrawFn) -> bytes:
    lines = _lines(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(0, 3))):
        if len(lines) < 2:
            break
        kind = draw(st.sampled_from([
            "drop", "duplicate", "number", "escape", "big", "nest", "crlf", "bom",
            "truncate", "row", "swap"]))
        i = draw(st.integers(1, len(lines) - 1))
        line = lines[i]
        if not line:
            continue
        if kind == "drop":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "number":
            digits = [m.start() for m in re.finditer(rb"[0-9]", line)]
            if digits:
                at = draw(st.sampled_from(digits))
                lines[i] = line[:at] + draw(st.sampled_from(
                    [b"0", b"9", b"-1", b"1.0", b"1.5", b"99999999999999999999"])) + line[at + 1:]
        elif kind == "escape":
            lines[i] = line.replace(b'"text":"', draw(st.sampled_from(
                [b'"text":"\\u00e9\\n\\"', b'"text":"\\ud800', b'"text":"\\\\', b'"text":"\xc3\xa9',
                 b'"text":"\xff'])), 1)
        elif kind == "big":
            lines[i] = line.replace(b'"data":{', b'"data":{"n":' + draw(st.sampled_from(
                [b"1e400", b"1.7976931348623159e308", b"1e308", b"1" + b"0" * 400,
                 b"123456789012345678901234", b"-0.0"])) + b",", 1)
        elif kind == "nest":
            depth = draw(st.sampled_from([10, 299, 301, 399, 401, 1100]))
            lines[i] = line.replace(b'"data":{', b'"data":{"d":' + b"[" * depth
                                    + b"]" * depth + b",", 1)
        elif kind == "crlf":
            lines[i] = line.replace(b"\n", b"\r\n")
        elif kind == "bom":
            lines[i] = b"\xef\xbb\xbf" + line
        elif kind == "truncate":
            cut = draw(st.integers(0, len(line) - 1))
            lines[i:] = [line[:cut]]
        elif kind == "row":  # a packed row's members or gaps changed
            gap = draw(st.sampled_from([b"0", b"-5", b"23.0", b"2147483648", b"1.5"]))
            lines[i] = line.replace(b'"dt":[', b'"dt":[' + gap + b",", 1).replace(
                b'"texts":[', b'"texts":["x",', 1).replace(b'"args":[', b'"args":["x",', 1)
        else:
            j = draw(st.integers(1, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


def _same_outcome(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "generated.jsonl"
    path.write_bytes(data)
    _agree(path)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                       HealthCheck.too_slow])


@settings(max_examples=60, **_SETTINGS)  # type: ignore[arg-type]
@given(data=_mutated_logs())
def test_generated_logs_get_the_same_outcome_from_both_readers(
        tmp_path: Path, data: bytes) -> None:
    _same_outcome(tmp_path, data)


@pytest.mark.slow
@settings(max_examples=300, **_SETTINGS)  # type: ignore[arg-type]
@given(data=_mutated_logs())
def test_many_generated_logs_get_the_same_outcome_from_both_readers(
        tmp_path: Path, data: bytes) -> None:
    _same_outcome(tmp_path, data)


@pytest.mark.parametrize("name", [*BASES, "legacy-linear"])
def test_both_readers_and_a_session_keep_the_same_plan_for_every_event(name: str) -> None:
    fast_, full = read_log(SAMPLES / f"{name}.jsonl"), read_log(SAMPLES / f"{name}.jsonl",
                                                                  check="full")
    assert full.plans is not None and len(full.plans) == len(full.events)
    assert list(fast_.plans or []) == list(full.plans)
    if full.mode == "surface":
        session = full.session()
        assert list(session.surface.plans)[: len(full.events)] == list(full.plans)
    assert full.plans.fold() == full.fold  # type: ignore[attr-defined]
