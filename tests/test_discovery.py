"""Discovery: `surface_lab.discover(DIR)`, `surface-lab audit DIR` and the corpus find every
supported agent's logs where the agents keep them, with a Claude Code session's subagent
files attached to it; a folder holding logs only deeper says what lies below."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from shared_logs import require_shared

from surface_lab import discover, read_log
from surface_lab.cli import main
from surface_lab.errors import StorageError
from surface_lab.importers import detect_format

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return dst


@pytest.fixture
def home(tmp_path: Path) -> dict[str, Path]:
    """A home folder laid out as the agents lay theirs out, from real shared files (the
    shared Claude Code subagent files have flattened names: the real layout is rebuilt)."""
    shared = require_shared("agent_logs/claude_code", "real_logs/other",
                            "agent_logs/trajectories")
    other = shared / "real_logs" / "other"
    claude = shared / "agent_logs" / "claude_code"
    trajs = shared / "agent_logs" / "trajectories"
    made: dict[str, Path] = {"root": tmp_path}
    project = tmp_path / ".claude" / "projects" / "-home-u-spotter"
    for main_file in sorted(claude.glob("marot__spotter__*.jsonl")):
        if "_subagents_" in main_file.name:
            continue
        uuid = main_file.stem.rsplit("_", 1)[-1]
        made[f"claude:{uuid}"] = _copy(main_file, project / f"{uuid}.jsonl")
        for sub in sorted(claude.glob(f"{main_file.stem}_subagents_agent-*.jsonl")):
            agent = sub.name.split("_subagents_", 1)[1]
            _copy(sub, project / uuid / "subagents" / agent)
    made["claude:small"] = _copy(
        other / "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_claude_small.jsonl",
        tmp_path / ".claude" / "projects" / "-tmp-repo" / "small.jsonl")
    made["codex"] = _copy(
        other / "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_codex_small.jsonl",
        tmp_path / ".codex" / "sessions" / "2026" / "08" / "03"
        / "rollout-2026-08-03T10-48-56-019fc8be-3658-7ca3-9e29-000000000000.jsonl")
    (tmp_path / ".codex" / "config.toml").write_text("model = 'x'\n")
    made["pi"] = _copy(
        other / "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_pi_small.jsonl",
        tmp_path / ".pi" / "agent" / "sessions" / "--tmp-as-agent-fixture-project--"
        / "2026-05-12T01-02-27-657Z_019e19b4.jsonl")
    run = tmp_path / "runs" / "gemini" / "trajs"
    for traj in sorted(trajs.glob("*.traj.json")):
        instance = traj.name.split("__", 2)[2].removesuffix(".traj.json")
        made[f"traj:{instance}"] = _copy(traj, run / instance / f"{instance}.traj.json")
    for traj in sorted(trajs.glob("*.traj")):
        name = traj.name.split("__", 2)[2]
        made[f"traj:{name}"] = _copy(traj, tmp_path / "runs" / "swe-agent" / name)
    made["surface"] = _copy(SAMPLES / "long-compaction.jsonl", tmp_path / "lab" / "lc.jsonl")
    made["sqlite"] = _copy(SAMPLES / "sessions.db", tmp_path / "lab" / "sessions.db")
    store = tmp_path / "lab" / "store"
    made["store"] = store
    _copy(SAMPLES / "chat.jsonl", store / "--work--" / "chat" / "session.jsonl")
    (tmp_path / "lab" / "notes.json").write_text('{"not": "a log"}')
    return made


class TestDiscover:
    def test_it_finds_every_agents_logs_by_format(self, home: dict[str, Path]) -> None:
        found = discover(home["root"])
        formats = {f.path: f.format for f in found}
        assert formats[home["codex"]] == "codex"
        assert formats[home["pi"]] == "pi"
        assert formats[home["claude:small"]] == "claude-code"
        assert formats[home["surface"]] == "surface"
        assert formats[home["sqlite"]] == "sqlite"
        assert formats[home["store"]] == "store"
        claude = [p for k, p in home.items() if k.startswith("claude:")]
        assert all(formats[p] == "claude-code" for p in claude)

    def test_subagent_files_are_attached_to_their_session_not_listed(
            self, home: dict[str, Path]) -> None:
        found = discover(home["root"])
        listed = {f.path for f in found}
        assert not any("subagents" in p.parts for p in listed)
        sessions = [f for f in found if f.path.parent.name == "-home-u-spotter"]
        assert len(sessions) == 2
        for session in sessions:
            folder = session.path.with_suffix("") / "subagents"
            assert session.attached == tuple(sorted(folder.glob("agent-*.jsonl")))
            assert len(session.attached) >= 2

    def test_benchmark_trajectories_are_found_once_their_importer_names_them(
            self, home: dict[str, Path]) -> None:
        found = discover(home["root"])
        listed = {f.path: f.format for f in found}
        for key, path in home.items():
            if not key.startswith("traj:"):
                continue
            fmt = detect_format(path)  # the importers are written on another branch
            if fmt is None:
                assert path in found.skipped and path not in listed
            else:
                assert listed[path] == fmt

    def test_what_no_reader_names_is_left_out_and_said(self, home: dict[str, Path]) -> None:
        found = discover(home["root"])
        notes = home["root"] / "lab" / "notes.json"
        assert notes in found.skipped and notes not in {f.path for f in found}
        assert "no reader recognises" in found.summary()
        assert not any(p.name == "config.toml" for p in found.skipped)

    def test_a_folder_that_is_one_source_is_not_walked_into(self, home: dict[str, Path]
                                                             ) -> None:
        found = discover(home["store"])
        assert [(f.path, f.format) for f in found] == [(home["store"], "store")]

    def test_a_missing_folder_is_an_error_naming_it(self, tmp_path: Path) -> None:
        with pytest.raises(StorageError, match=r"missing: no such file or folder"):
            discover(tmp_path / "missing")


class TestDeeperLogs:
    def test_read_log_names_what_lies_below_without_naming_a_command(
            self, home: dict[str, Path]) -> None:
        with pytest.raises(StorageError, match=r"holds no log itself, but 3 logs: 3 "
                                               r"claude-code \(4 subagent files attached\) "
                                               r"below it; surface_lab.discover") as caught:
            read_log(home["root"] / ".claude" / "projects")
        assert "surface-lab" not in str(caught.value)

    def test_a_command_names_the_audit(self, home: dict[str, Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["info", str(home["root"] / ".codex")]) == 1
        out = capsys.readouterr().err  # an error: on stderr
        assert "holds no log itself, but 1 log: 1 codex below it; audit takes them all" in out


class TestCommandsAndCorpus:
    def test_audit_of_a_folder_audits_what_it_found_and_says_what(
            self, home: dict[str, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "out"
        code = main(["audit", str(home["root"] / ".codex"), str(home["root"] / ".pi"),
                     "--out", str(out), "--no-progress"])
        captured = capsys.readouterr()
        assert code == 0, captured.out
        assert "found 2 logs: 1 codex, 1 pi" in captured.err
        assert len(list(out.glob("*-audit.html"))) == 2

    def test_validate_of_a_folder_imports_each_agents_log(
            self, home: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
        main(["validate", str(home["root"] / ".pi"), str(home["root"] / ".codex")])
        err = capsys.readouterr().err
        assert f"{home['pi']}: valid:" in err and "imported from pi" in err
        assert f"{home['codex']}:" in err and "imported from codex" in err

    def test_the_corpus_plans_each_session_once_without_its_subagents(
            self, home: dict[str, Path]) -> None:
        from surface_lab import corpus

        tasks = corpus.plan_tasks([home["root"] / ".claude"])
        paths = sorted(Path(r.path).name for t in tasks for r in t.sessions)
        assert len(paths) == 3 and not any(p.startswith("agent-") for p in paths)


def test_a_glob_of_folders_walks_each_folder(home: dict[str, Path]) -> None:
    from surface_lab import corpus
    from surface_lab.reading.paths import expand

    pattern = str(home["root"] / ".claude" / "projects" / "*")
    found = expand([pattern])
    assert [f.format for f in found] == ["claude-code"] * 3
    tasks = corpus.plan_tasks([pattern])
    assert sum(len(t.sessions) for t in tasks) == 3


def test_the_corpus_build_says_what_it_found(home: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corpus", "build", str(home["root"] / ".pi"), str(tmp_path / "out"),
                 "--engine", "serial", "--no-progress"]) == 0
    assert f"{home['root'] / '.pi'}: found 1 log: 1 pi" in capsys.readouterr().err
