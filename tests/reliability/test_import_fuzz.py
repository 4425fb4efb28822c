"""No foreign exception from any importer on any input (issue 30, point 3; issue 23,
point 7): a property-based fuzz of every importer in `surface_lab.importers.FORMATS`, over
the shared real files of its format (and a built sample where none is shared), each
outcome an import result or a package error naming the file and its rule.

The mutations are the red team's: type changes at any path, missing fields, cycles in
parent chains, duplicate ids, huge histories, deep nesting, lone surrogates, NaN and
infinities, and non-object records. The registry is looped over, so an importer added to
it is fuzzed too (with the shared files `detect_format` gives it)."""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surface_lab import SurfaceLabError
from surface_lab.importers import FORMATS, detect_format, import_any

from .common import PROJECT, record

pytestmark = pytest.mark.reliability
SHARED = Path(os.environ.get("SURFACE_LAB_SHARED", PROJECT.parent / "shared"))
# examples per seed: the default suite, and `-m slow` (more with SURFACE_LAB_FUZZ_EXAMPLES)
SHORT, LONG = 12, int(os.environ.get("SURFACE_LAB_FUZZ_EXAMPLES", "60"))
MAX_SEED_BYTES = 400_000  # larger files make each example slow; the small ones suffice


def _shared_seeds() -> dict[str, list[Path]]:
    seeds: dict[str, list[Path]] = {fmt: [] for fmt in FORMATS}
    for folder in (SHARED / "real_logs", SHARED / "agent_logs"):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.name.endswith(".md") or ".cont-" in path.name \
                    or path.stat().st_size > MAX_SEED_BYTES:
                continue
            try:
                fmt = detect_format(path)
            except SurfaceLabError:
                continue
            if fmt in seeds:
                seeds[fmt].append(path)
    return seeds


SEEDS = _shared_seeds()


def _openhands_sample(folder: Path) -> Path:
    from tests.importers.test_openhands import build

    return build(folder)


def _openhands_v0_sample(folder: Path) -> Path:
    from tests.importers.test_trajectories import _v0_events

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "trajectory.json"
    path.write_text(json.dumps(_v0_events({"forgotten_event_ids": [3, 4, 5, 6],
                                           "summary": "ran c3 and c5", "summary_offset": 1})))
    return path


# A format without a shared file gets a built sample (OpenHands keeps a folder per
# conversation; none is shared, nor a V0 trajectory).
BUILT: dict[str, Callable[[Path], Path]] = {"openhands": _openhands_sample,
                                            "openhands-v0": _openhands_v0_sample}

# -- documents: what a source holds, as JSON values that can be mutated and written back


def _read_docs(source: Path) -> list[tuple[Path, str, list[Any]]]:
    """(file, "jsonl" | "json", values) for each JSON file of a source."""
    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() \
        else [source]
    docs = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.name.endswith(".jsonl"):
            docs.append((path, "jsonl", [json.loads(line) for line in text.splitlines()
                                         if line.strip()]))
        else:
            docs.append((path, "json", [json.loads(text)]))
    return docs


def _write_docs(docs: list[tuple[Path, str, list[Any]]]) -> None:
    for path, kind, values in docs:
        # ensure_ascii spells a lone surrogate as a JSON escape; NaN and Infinity are
        # written as the tokens JSON readers disagree about
        lines = [json.dumps(v, ensure_ascii=True, allow_nan=True) for v in values]
        path.write_text("\n".join(lines) + "\n" if kind == "jsonl" else lines[0])


def _nodes(value: Any, limit: int = 3000) -> list[tuple[Any, Any]]:
    """(container, key) of the values inside `value`, breadth first, at most `limit`."""
    found: list[tuple[Any, Any]] = []
    queue = [value]
    while queue and len(found) < limit:
        node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for key, child in items:
            found.append((node, key))
            queue.append(child)
    return found


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = [value] if i % 2 else {"d": value}
    return value


ODD_VALUES: list[Any] = [
    None, True, 0, -1, 2**70, -(2**63) - 1, 1e308, 1.5, math.nan, math.inf, -math.inf, "",
    "x", "\ud800", "a\udc80b", "\u202e", [], [None], {}, {"type": None}, [[["nested"]]],
    "2026-13-45T99:99:99Z", "9" * 400, {"$ref": "#"},
]
ID_KEYS = ("uuid", "id", "step_id", "call_id", "tool_call_id", "tool_use_id", "leafUuid")
PARENT_KEYS = ("parentUuid", "parentId", "parent_id", "logicalParentUuid", "cause",
               "parent_tool_use_id")


def _mutate(docs: list[tuple[Path, str, list[Any]]], data: st.DataObject) -> str:
    """Apply one mutation drawn from `data`; returns its name (for the figures)."""
    _file, kind, values = docs[data.draw(st.integers(0, len(docs) - 1), label="doc")]
    roots = values if kind == "jsonl" else [values[0]]
    mutation = data.draw(st.sampled_from([
        "retype", "retype", "retype", "delete", "cycle", "duplicate", "huge", "deep",
        "not-an-object", "retype-record-field"]), label="mutation")
    if mutation in ("duplicate", "huge", "not-an-object") and kind == "jsonl" and values:
        i = data.draw(st.integers(0, len(values) - 1), label="record")
        if mutation == "duplicate":
            values.insert(i, json.loads(json.dumps(values[i])))
        elif mutation == "huge":
            values[i + 1 : i + 1] = [json.loads(json.dumps(values[i]))] * 300
        else:
            values[i] = data.draw(st.sampled_from([None, "record", [1, 2], 7]))
        return mutation
    container_nodes = [n for r in roots for n in _nodes(r)] if roots else []
    if not container_nodes:
        return "none"
    if mutation == "cycle":
        ids = [(c, k) for c, k in container_nodes if k in ID_KEYS and isinstance(c, dict)]
        parents = [(c, k) for c, k in container_nodes if k in PARENT_KEYS
                   and isinstance(c, dict)]
        if ids and parents:
            holder, key = parents[data.draw(st.integers(0, len(parents) - 1))]
            target, id_key = ids[data.draw(st.integers(0, len(ids) - 1))]
            holder[key] = target[id_key]
            if data.draw(st.booleans()):  # a parent of itself, or a two-record loop
                target[next(k for k in PARENT_KEYS if k in holder)] = holder.get(
                    next((k for k in ID_KEYS if k in holder), key))
            return mutation
        mutation = "retype"
    if mutation == "not-an-object":  # a step, an event or a block that is not an object
        lists = [(c, k) for c, k in container_nodes if isinstance(c, list)]
        if lists:
            container, key = lists[data.draw(st.integers(0, len(lists) - 1))]
            container[key] = data.draw(st.sampled_from([None, "step", [1], 3]))
            return mutation
        mutation = "retype"
    if mutation == "retype-record-field" and kind == "jsonl":
        tops = [(r, k) for r in roots if isinstance(r, dict) for k in r]
        if tops:
            container, key = tops[data.draw(st.integers(0, len(tops) - 1))]
            container[key] = data.draw(st.sampled_from(ODD_VALUES))
            return mutation
    container, key = container_nodes[data.draw(st.integers(0, len(container_nodes) - 1),
                                               label="node")]
    if mutation == "delete" and isinstance(container, dict):
        del container[key]
    elif mutation == "deep":
        container[key] = _deep(data.draw(st.sampled_from([60, 500, 1100])))
    else:
        container[key] = data.draw(st.sampled_from(ODD_VALUES), label="value")
        return "retype"
    return mutation


def _check_import(source: Path, fmt: str) -> str:
    """Import; the outcome must be a result or a package error naming the file and its
    rule; detecting the format gives a format or None. Returns "imported" or the error's
    code."""
    detected = detect_format(source)
    assert detected is None or detected in FORMATS
    try:
        result = import_any(source, fmt=fmt)
    except SurfaceLabError as err:
        assert err.code, f"an error without a code: {err!r}"
        names = {source.name, *(p.name for p in source.rglob("*"))}
        assert err.path is not None and Path(err.path).name in names, repr(err)
        assert "internal error" not in str(err)
        return str(err.code)
    for problem in result.problems:
        assert problem.code and problem.path, problem
    return "imported"


def _cases() -> list[tuple[str, str]]:
    cases = []
    for fmt in FORMATS:
        cases += [(fmt, str(p)) for p in SEEDS.get(fmt, [])]
        if not SEEDS.get(fmt) and fmt in BUILT:
            cases.append((fmt, "built"))
    return cases


def _fuzz(fmt: str, seed: str, tmp_path: Path, examples: int) -> None:
    work = tmp_path / "work"
    outcomes: dict[str, int] = {}

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        if seed == "built":
            source = BUILT[fmt](work / "source")
        else:
            source = work / Path(seed).name
            shutil.copy(seed, source)
        docs = _read_docs(source)
        for _ in range(data.draw(st.integers(1, 3), label="mutations")):
            _mutate(docs, data)
        _write_docs(docs)
        outcome = _check_import(source, fmt)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    run()
    record("import-fuzz", format=fmt, seed=Path(seed).name, examples=sum(outcomes.values()),
           **{k.replace("-", "_"): v for k, v in sorted(outcomes.items())})


def test_every_registered_importer_has_something_to_fuzz() -> None:
    fuzzed = {fmt for fmt, _ in _cases()}
    if not SHARED.is_dir():
        pytest.skip(f"no shared logs at {SHARED}")
    assert fuzzed == set(FORMATS), f"no seed for {set(FORMATS) - fuzzed}"


@pytest.mark.parametrize(("fmt", "seed"), _cases(), ids=lambda v: Path(v).name[-40:])
def test_no_importer_raises_a_foreign_exception(fmt: str, seed: str, tmp_path: Path) -> None:
    _fuzz(fmt, seed, tmp_path, SHORT)


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "seed"), _cases(), ids=lambda v: Path(v).name[-40:])
def test_no_importer_raises_a_foreign_exception_long(fmt: str, seed: str,
                                                     tmp_path: Path) -> None:
    _fuzz(fmt, seed, tmp_path, LONG)
