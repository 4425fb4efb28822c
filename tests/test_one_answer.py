"""One answer everywhere: `read_log`, every frame, `Replay`, `replay_policy`, the corpus and
the commands take another agent's log directly, imported on the fly with the importer's
notes, as the audit does; `repair` refuses to write to one; a comparison of N policies
reads its log once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from shared_logs import SHARED, needs_shared

from surface_lab import read_log, replay_policy
from surface_lab.cli import main
from surface_lab.errors import SurfaceLabError
from surface_lab.importers import detect_format, import_any
from surface_lab.notebook import (
    Replay,
    compaction_audit,
    compare_policies,
    events_df,
    messages_df,
    replacements_df,
    surface_df,
    tokens_df,
    visibility_df,
)

ROOT = Path(__file__).resolve().parents[1]
OTHER = SHARED / "real_logs" / "other"
FOREIGN = [OTHER / f"jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_{name}.jsonl"
           for name in ("claude_small", "codex_small", "pi_small")]
IDS = ["claude-code", "codex", "pi"]

pytestmark = needs_shared("real_logs/other")


@pytest.mark.parametrize("path", FOREIGN, ids=IDS)
class TestOtherAgentsLogs:
    def test_read_log_imports_it_with_the_importers_notes(self, path: Path) -> None:
        reading = read_log(path)
        result = import_any(path)
        assert reading.source_format == detect_format(path)
        assert [e["type"] for e in reading.events] == [e["type"] for e in result.events]
        assert reading.session_id == str(result.header["id"])
        codes = [p.code for p in reading.problems]
        assert codes[: len(result.notes)] == [n.code for n in result.notes]

    def test_every_frame_takes_it(self, path: Path) -> None:
        n = len(import_any(path).events)
        assert len(events_df(path, progress=False)) == n
        for frame in (surface_df, messages_df, replacements_df, tokens_df, compaction_audit):
            frame(path, progress=False)
        assert len(visibility_df(path, steps=[n - 1], progress=False)) > 0

    def test_replay_and_replay_policy_take_it(self, path: Path) -> None:
        events = import_any(path).events
        replay = Replay(path)
        replay.seek(len(events) - 1)
        assert replay.seq == len(events) - 1
        assert len(replay_policy(path, None).events) > 0

    def test_info_and_surface_take_it(self, path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["info", str(path), "--json"]) == 0
        assert f'"session": "{read_log(path).session_id}"' in capsys.readouterr().out
        main(["surface", str(path)])
        out = capsys.readouterr().out
        assert out.startswith("nodes (") and "Traceback" not in out

    def test_repair_refuses_to_write_to_it(self, path: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        copy = tmp_path / path.name
        shutil.copy(path, copy)
        before = copy.read_bytes()
        assert main(["repair", str(copy), "--write"]) == 1
        out = capsys.readouterr().err  # an error: on stderr
        assert out.startswith(f"{copy}: repair-foreign: ") and "not a surface log" in out
        assert "never to another tool's file" in out and "nothing written" in out
        assert copy.read_bytes() == before


def test_the_corpus_takes_them(tmp_path: Path) -> None:
    from surface_lab import corpus

    manifest = corpus.to_parquet([str(p) for p in FOREIGN], tmp_path / "out")
    c = corpus.open_corpus(tmp_path / "out")
    formats = sorted(c.sql("select format from sessions")["format"])
    c.close()
    assert formats == sorted(IDS) and manifest.sessions == 3


def test_the_python_errors_name_no_command(tmp_path: Path) -> None:
    deeper = tmp_path / "sessions" / "2026" / "08" / "03" / "rollout-x.jsonl"
    deeper.parent.mkdir(parents=True)
    shutil.copy(FOREIGN[1], deeper)
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "sessions", tmp_path / "empty"):
        with pytest.raises(SurfaceLabError) as caught:
            read_log(folder)
        assert "surface-lab " not in str(caught.value)
        assert "--" not in str(caught.value).replace(str(tmp_path), "")


def test_a_comparison_of_n_policies_reads_its_log_once(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    from surface_lab import Compact, MaskObservations, Prune
    from surface_lab.storage import read

    reads: list[object] = []
    real = read.read_path

    def counted(*args: object, **kwargs: object) -> object:
        reads.append(args[0])
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(read, "read_path", counted)
    sample = ROOT / "sample_logs" / "long-compaction.jsonl"
    comparison = compare_policies(sample, {"compact": Compact(), "prune": Prune(),
                                           "mask": MaskObservations()})
    assert len(comparison.frame) == 4 and reads == [sample]
