"""Nothing dropped silently (issue 30, point 4): a step or record that is not an object
(null, a string, a list) is a located problem or a counted omission in every importer
(ATIF dropped a non-object step without a note, losing the system prompt)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from surface_lab.importers import FORMATS, ImportResult, import_any

from .test_import_fuzz import BUILT, SEEDS, SHARED

pytestmark = pytest.mark.reliability
NON_OBJECTS: list[Any] = [None, "a step", [1, 2]]


def _seed(fmt: str, folder: Path) -> Path:
    folder.mkdir()
    if SEEDS.get(fmt):
        source = folder / SEEDS[fmt][0].name
        shutil.copy(SEEDS[fmt][0], source)
        return source
    if fmt in BUILT:
        return BUILT[fmt](folder / "source")
    pytest.skip(f"no shared {fmt} file under {SHARED}")


def _longest_object_list(value: Any) -> list[Any] | None:
    """The longest list of objects in a JSON document (its steps, events or turns)."""
    best: list[Any] | None = None
    queue = [value]
    while queue:
        node = queue.pop()
        children = node.values() if isinstance(node, dict) else node \
            if isinstance(node, list) else ()
        if isinstance(node, list) and node and all(isinstance(x, dict) for x in node) and (
                best is None or len(node) > len(best)):
            best = node
        queue.extend(children)
    return best


def _insert_non_objects(source: Path) -> None:
    if source.is_dir():  # a folder of one JSON object per file: three files of other values
        files = sorted(p for p in source.rglob("*.json") if p.is_file())
        folder = max({p.parent for p in files}, key=lambda d: sum(p.parent == d for p in files))
        events = sorted(p for p in files if p.parent == folder)
        for value, path in zip(NON_OBJECTS, events[1:], strict=False):
            path.write_text(json.dumps(value))
        return
    if source.name.endswith(".jsonl"):
        lines = source.read_text().splitlines()
        source.write_text("\n".join([lines[0], *map(json.dumps, NON_OBJECTS), *lines[1:]])
                          + "\n")
        return
    document = json.loads(source.read_text())
    steps = _longest_object_list(document)
    assert steps is not None, "no list of objects in the document"
    steps[1:1] = NON_OBJECTS
    source.write_text(json.dumps(document))


def _accounted(result: ImportResult) -> int:
    return len(result.problems) + len(result.omitted)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_non_object_is_a_problem_or_an_omission(fmt: str, tmp_path: Path) -> None:
    clean = import_any(_seed(fmt, tmp_path / "clean"), fmt=fmt)
    source = _seed(fmt, tmp_path / "mutated")
    _insert_non_objects(source)
    result = import_any(source, fmt=fmt)
    assert _accounted(result) >= _accounted(clean) + len(NON_OBJECTS), (
        [str(p) for p in result.problems], result.omitted_summary())
    new = [p for p in result.problems if str(p) not in {str(q) for q in clean.problems}]
    assert all(p.path for p in new)
