"""Importers never write to the source, never read outside its folder, and refuse
hostile input cleanly."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from surface_lab import SurfaceLabError
from surface_lab.cli import main
from surface_lab.importers import common, import_any, import_atif, import_claude_code

from .helpers import check_invariants, sample
from .test_openhands import build


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_continuation_references_never_leave_the_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"schema_version": "ATIF-v1.7", "session_id": "x",
                                  "steps": [{"step_id": 1, "source": "user",
                                             "message": "SECRET"}]}))
    folder = tmp_path / "run"
    folder.mkdir()
    for ref in ("../secret.json", str(secret), "sub/../../secret.json", "..\\secret.json"):
        root = folder / "trajectory.json"
        root.write_text(json.dumps({"schema_version": "ATIF-v1.7", "session_id": "s",
                                    "steps": [{"step_id": 1, "source": "user",
                                               "message": "hi"}],
                                    "continued_trajectory_ref": ref}))
        result = import_atif(root)
        assert [p.code for p in result.problems] == ["continuation-missing"]
        assert all("SECRET" not in json.dumps(dict(e)) for e in result.events)
        assert len(result.sources) == 1


def test_symlinked_events_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"kind": "MessageEvent", "id": "evil", "source": "user",
                                   "llm_message": {"role": "user", "content": [
                                       {"type": "text", "text": "SECRET"}]}}))
    folder = build(tmp_path / "conv")
    (folder / "events" / "event-00099-evil.json").symlink_to(outside)
    result = import_any(folder)
    assert all("SECRET" not in json.dumps(dict(e)) for e in result.events)


def test_huge_lines_and_broken_json_are_problems(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "MAX_SOURCE_LINE", 10_000)
    path = tmp_path / "claude.jsonl"
    shutil.copy(sample("compaction_session"), path)
    with open(path, "ab") as f:
        f.write(b'{"uuid":"x","parentUuid":"compact-006","sessionId":"s","type":"user",'
                b'"message":{"role":"user","content":"' + b"a" * 20_000 + b'"}}\n')
        f.write(b"{broken json\n\xff\xfe\n")
    result = import_claude_code(path)
    assert [p.code for p in result.problems].count("line-unparsable") == 3
    check_invariants(result)


@pytest.mark.parametrize("fragment", ["pi_small", "codex_small", "rewind_preserved",
                                      "trajectory.json"])
def test_sources_are_never_written(tmp_path: Path, fragment: str) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    for path in sample(fragment).parent.iterdir():
        if fragment in path.name or (fragment == "trajectory.json" and "trajectory" in
                                     path.name):
            shutil.copy(path, folder / path.name)
    before = _digest(folder)
    [source] = [p for p in folder.iterdir() if fragment in p.name]
    assert main(["convert", str(source), "-o", str(tmp_path / "out.jsonl")]) == 0
    assert _digest(folder) == before


def test_bad_sources_are_one_line_errors(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_bytes(b"\x00\x01 not anything")
    assert main(["convert", "--from", "pi", str(bad), "-o", str(tmp_path / "o.jsonl")]) == 1
    out = capsys.readouterr().err  # an error: on stderr
    assert out.count("\n") == 1 and "not a pi session" in out
    with pytest.raises(SurfaceLabError):
        import_any(bad)
    assert not (tmp_path / "o.jsonl").exists()


def test_strict_raises_the_first_problem() -> None:
    with pytest.raises(SurfaceLabError) as info:
        import_claude_code(sample("claude_small"), strict=True)
    assert info.value.code == "duplicate-id"
    import_claude_code(sample("rewind_preserved"), strict=True)  # no problems: no error
