"""One bad input never stops a multi-log `audit` or `corpus build` (issue 30, point 3):
its row says why, the rest is done (the reports and the index written)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from surface_lab import corpus
from surface_lab.cli import main
from surface_lab.importers import import_any
from surface_lab.notebook import audit as audit_module

from .common import PROJECT

pytestmark = pytest.mark.reliability
LONG = PROJECT / "sample_logs" / "long-compaction.jsonl"


def _pi_with_list_parent(path: Path) -> Path:
    """A pi session whose entry's `parentId` is a list (it stopped the import with a
    TypeError, unhashable type: 'list')."""
    header = {"type": "session", "version": 3, "id": "pi-bad", "timestamp":
              "2026-01-01T00:00:00Z", "cwd": "/w"}
    entries = [
        {"type": "message", "id": "e1", "parentId": None, "timestamp": "2026-01-01T00:00:01Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
        {"type": "message", "id": "e2", "parentId": ["e1"], "timestamp":
         "2026-01-01T00:00:02Z", "message": {"role": "assistant", "content": [
             {"type": "text", "text": "hello"}]}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in [header, *entries]) + "\n")
    return path


def test_a_list_parent_is_no_internal_error(tmp_path: Path) -> None:
    result = import_any(_pi_with_list_parent(tmp_path / "pi.jsonl"), fmt="pi")
    assert result.header["id"] == "pi-bad"


def test_an_audit_failure_of_one_log_leaves_the_others_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("a", "b", "c"):
        shutil.copy(LONG, logs / f"{name}.jsonl")
    real = audit_module.audit_report

    def flaky(source: Any, out_dir: Any, *, name: str | None = None, **kw: Any) -> Any:
        if name == "b":  # a value of a shape no check foresaw, deep in the audit
            raise TypeError("unhashable type: 'list'")
        return real(source, out_dir, name=name, **kw)

    monkeypatch.setattr(audit_module, "audit_report", flaky)
    out = tmp_path / "out"
    assert main(["audit", str(logs), "--out", str(out), "--no-progress"]) == 1
    printed = capsys.readouterr()
    assert "internal error" not in printed.err + printed.out
    assert f"{logs / 'b.jsonl'}: audit-failed: the audit of this log failed (TypeError" \
        in printed.err  # an error: on stderr
    assert (out / "a-audit.html").is_file() and (out / "c-audit.html").is_file()
    index = (out / "index.html").read_text()
    assert "not audited: audit-failed" in index and "b.jsonl" in index


def test_a_corpus_build_with_one_broken_import_finishes(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(LONG, logs / "good.jsonl")
    bad = logs / "bad.jsonl"
    bad.write_text('{"type": "session", "version": 3, "id": {"not": "a string"}, '
                   '"timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"}\n'
                   '{"type": "message", "id": ["e1"], "parentId": {"x": 1}}\n')
    corpus.to_parquet([logs], tmp_path / "out", engine="serial")
    c = corpus.open_corpus(tmp_path / "out")
    try:
        rows = c.sql("select source, problem_code, events from sessions order by source")
    finally:
        c.close()
    assert len(rows) == 2
    good = rows[rows["source"].str.endswith("good.jsonl")]
    assert good["events"].iloc[0] > 0 and good["problem_code"].isna().all()
