"""Corpus scale: every engine writes byte-identical tables, DuckDB agrees with pandas over
the per-session frames, retries never duplicate, damaged sessions are rows of problems."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from shared_logs import require_shared

from surface_lab import SurfaceLabError, corpus, read_log
from surface_lab.agent.samples import generate_corpus
from surface_lab.cli import main
from surface_lab.notebook import events_df, lost_evidence_df

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus") / "logs"
    generate_corpus(folder, 24)
    return folder


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def serial(logs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("serial") / "out"
    corpus.to_parquet(logs, out, engine="serial", task_mb=0.5)
    return out


@pytest.fixture(scope="module")
def cluster() -> Any:
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as lc, Client(lc) as client:
        yield client


class TestEngines:
    def test_processes_match_serial_byte_for_byte(self, logs: Path, serial: Path,
                                                  tmp_path: Path) -> None:
        out = tmp_path / "out"
        corpus.to_parquet(logs, out, engine="processes", workers=2, task_mb=0.5)
        assert _files(out) == _files(serial)

    def test_dask_in_process_matches_serial(self, logs: Path, serial: Path,
                                            tmp_path: Path) -> None:
        from dask.distributed import Client, LocalCluster

        with LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                          dashboard_address=None) as lc, Client(lc) as client:
            out = tmp_path / "out"
            corpus.to_parquet(logs, out, engine="dask", client=client, task_mb=0.5)
        assert _files(out) == _files(serial)

    @pytest.mark.slow
    def test_dask_two_workers_match_serial(self, logs: Path, serial: Path, tmp_path: Path,
                                           cluster: Any) -> None:
        out = tmp_path / "out"
        manifest = corpus.to_parquet(logs, out, engine="dask", client=cluster, task_mb=0.5)
        assert manifest.tasks > 3
        assert _files(out) == _files(serial)

    def test_dask_without_a_scheduler_starts_a_local_cluster(
            self, logs: Path, serial: Path, tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "out"
        assert main(["corpus", "build", str(logs), str(out), "--engine", "dask",
                     "--workers", "1", "--task-mb", "0.5"]) == 0
        assert "(dask)" in capsys.readouterr().err
        assert corpus.Manifest.load(out).engine == "dask"
        assert _files(out) == _files(serial)


class TestQueries:
    def test_duckdb_agrees_with_the_session_frames(self, logs: Path, serial: Path) -> None:
        c = corpus.open_corpus(serial)
        frames = pd.concat([events_df(read_log(p)).assign(session_id=read_log(p).session_id)
                            for p in sorted(logs.glob("*.jsonl"))], ignore_index=True)
        sql = c.sql("select session_id, type, count(*) as n, sum(chars) as chars from events "
                    "group by all order by 1, 2")
        pandas = (frames.assign(type=frames["type"].astype(str))
                  .groupby(["session_id", "type"], observed=True)
                  .agg(n=("seq", "size"), chars=("chars", "sum")).reset_index())
        assert sql["n"].tolist() == pandas["n"].tolist()
        assert sql["chars"].fillna(0).astype(int).tolist() == pandas["chars"].tolist()
        shadowed = c.sql("select count(*) as n from events where shadowed_by is not null")
        assert int(shadowed["n"][0]) == int(frames["shadowed_by"].notna().sum())
        members = c.sql("select count(*) as n from replace_members")["n"][0]
        assert members == int(shadowed["n"][0])  # each shadowed event has one member row
        assert c.sql("select count(*) as n from sessions")["n"][0] == 24
        c.close()

    def test_the_lost_evidence_table_has_the_frame_s_rows(self, logs: Path,
                                                        serial: Path) -> None:
        frames = pd.concat([lost_evidence_df(p).assign(session_id=read_log(p).session_id)
                            for p in sorted(logs.glob("*.jsonl"))], ignore_index=True)
        c = corpus.open_corpus(serial)
        table = c.sql("select session_id, seq, replace_seq, kind from lost_evidence "
                      "order by 1, 2, 3")
        c.close()
        expected = frames.sort_values(["session_id", "seq", "replace_seq"])
        assert len(table) == len(expected) > 0
        assert table["kind"].tolist() == expected["kind"].astype(str).tolist()
        assert table["seq"].tolist() == expected["seq"].tolist()

    def test_rows_are_sorted_and_partitioned_by_date(self, serial: Path) -> None:
        c = corpus.open_corpus(serial)
        dates = c.sql("select distinct date from events order by 1")["date"].astype(str)
        assert list(dates) == ["2026-01-01", "2026-01-02", "2026-01-03"]
        for path in sorted(serial.glob("events/date=*/part-*.parquet")):
            frame = pd.read_parquet(path)
            assert list(frame.index) == list(range(len(frame)))
            keys = list(zip(frame["session_id"], frame["seq"], strict=True))
            assert keys == sorted(keys)
        c.close()

    def test_dask_events_and_map_sessions(self, serial: Path) -> None:
        lazy = corpus.events(serial, engine="dask")
        assert int(lazy["seq"].count().compute()) == corpus.Manifest.load(serial).events
        sizes = corpus.map_sessions(lambda f: (f["session_id"].iloc[0], len(f)), serial)
        assert len(sizes) == 24 and sum(n for _, n in sizes) == corpus.Manifest.load(
            serial).events
        in_processes = corpus.map_sessions(len, serial, engine="processes", workers=2)
        assert sorted(in_processes) == sorted(n for _, n in sizes)


class TestFailures:
    @pytest.mark.slow
    def test_a_killed_worker_leaves_no_duplicates(self, logs: Path, serial: Path,
                                                  tmp_path: Path, cluster: Any) -> None:
        import signal

        out = tmp_path / "out"
        errors: list[BaseException] = []

        def build() -> None:
            try:
                corpus.to_parquet(logs, out, engine="dask", client=cluster, task_mb=0.1)
            except BaseException as err:  # reported below
                errors.append(err)

        thread = threading.Thread(target=build)
        thread.start()
        deadline = time.monotonic() + 60
        while not list(out.rglob("*.parquet")) and time.monotonic() < deadline:
            time.sleep(0.01)
        pids = cluster.run(os.getpid)
        os.kill(next(iter(pids.values())), signal.SIGKILL)  # one worker dies mid-build
        thread.join(timeout=300)
        assert errors == []
        assert _files(out).keys() >= set()  # the build finished
        c = corpus.open_corpus(out)
        counts = c.sql("select count(*) as n, count(distinct (session_id, seq)) as u "
                       "from events")
        assert int(counts["n"][0]) == int(counts["u"][0]) == corpus.Manifest.load(
            serial).events
        c.close()
        cluster.wait_for_workers(2, timeout=60)

    def test_damaged_sessions_are_rows_of_problems(self, logs: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        folder = tmp_path / "logs"
        shutil.copytree(logs, folder)
        shutil.copy(ROOT / "sample_logs" / "invalid-surface.jsonl", folder / "bad.jsonl")
        shutil.copy(ROOT / "sample_logs" / "invalid-crash-tail.jsonl", folder / "tail.jsonl")
        (folder / "empty.jsonl").write_bytes(b"")
        out = tmp_path / "out"
        assert main(["corpus", "build", str(folder), str(out), "--engine", "serial",
                     "--no-progress"]) == 0
        printed = capsys.readouterr().err  # the damaged sessions' problems: on stderr
        assert "bad.jsonl:132: seq 250 user/message: replace-sources-incomplete" in printed
        assert "tail.jsonl:29: seq-gap" in printed
        assert "empty.jsonl:1: log-corrupt" in printed
        c = corpus.open_corpus(out)
        problems = c.sql("select source, problem_code, problem_line from sessions "
                         "where problems > 0 order by source")
        assert problems["problem_code"].tolist() == ["replace-sources-incomplete",
                                                     "log-corrupt", "seq-gap"]
        assert problems["problem_line"].tolist() == [132, 1, 29]
        # the readable prefix of a damaged session is still there
        assert c.sql("select count(*) as n from events e join sessions s using "
                     "(session_id) where s.source like '%tail.jsonl'")["n"][0] == 61
        c.close()
        assert main(["corpus", "sql", str(out), "select count(*) as n from sessions",
                     "--csv"]) == 0
        assert capsys.readouterr().out.splitlines() == ["n", "27"]
        # log text is untrusted: a cell or a name a spreadsheet would run as a formula
        # is printed as text; numbers, negative ones included, stay numbers
        assert main(["corpus", "sql", str(out), "select '=HYPERLINK(1)' as \"@a\", -1 as n",
                     "--csv"]) == 0
        assert capsys.readouterr().out.splitlines() == ["'@a,n", "'=HYPERLINK(1),-1"]

    def test_a_dataset_without_a_manifest_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(Exception, match="not a finished corpus build"):
            corpus.open_corpus(tmp_path)

    def test_other_agents_logs_and_databases_are_sources(self, tmp_path: Path) -> None:
        shared = require_shared("real_logs/other") / "real_logs" / "other"
        out = tmp_path / "out"
        manifest = corpus.to_parquet([shared, ROOT / "sample_logs" / "sessions.db"], out)
        c = corpus.open_corpus(out)
        formats = c.sql("select format, count(*) as n from sessions group by 1 order by 1")
        assert dict(zip(formats["format"], formats["n"], strict=True)) == {
            "atif": 1, "claude-code": 4, "codex": 1, "pi": 1, "surface": 3}
        assert manifest.sessions == 10
        c.close()


def test_memory_stays_flat_as_the_corpus_grows(tmp_path: Path) -> None:
    def peak(n: int) -> int:
        folder = tmp_path / f"logs{n}"
        generate_corpus(folder, n, days=1)
        tracemalloc.start()
        corpus.to_parquet(folder, tmp_path / f"out{n}", task_mb=0.2)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    small, large = peak(6), peak(30)
    assert large < 2 * small  # batches stream: five times the sessions, not five times the memory


class TestSourcesAndDuplicates:
    @pytest.fixture(scope="class")
    def samples(self, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
        out = tmp_path_factory.mktemp("samples") / "out"
        return out, corpus.to_parquet(ROOT / "sample_logs", out, task_mb=0.001)

    def test_every_row_keeps_its_source_and_session_key(self, samples: tuple[Path, Any]
                                                        ) -> None:
        out, _ = samples
        c = corpus.open_corpus(out)
        for table in corpus.TABLES:
            bad = c.sql(f"select count(*) as n from {table} t where t.session_key <> "
                        f"t.source || '#' || t.session_id or t.source is null")
            assert int(bad["n"][0]) == 0, table
        orphans = c.sql("select count(*) as n from events e anti join sessions s "
                        "using (session_key)")
        assert int(orphans["n"][0]) == 0
        c.close()

    def test_one_session_id_in_several_sources_is_kept_once(
            self, samples: tuple[Path, Any]) -> None:
        out, manifest = samples
        c = corpus.open_corpus(out)
        ids = c.sql("select session_id, count(*) as n, any_value(source) as source "
                    "from sessions group by 1 order by 1")
        assert set(ids["n"]) == {1}
        chat = ids[ids["session_id"] == "chat"]["source"].iloc[0]
        assert chat == str(ROOT / "sample_logs" / "chat.jsonl")
        samples_dir = ROOT / "sample_logs"
        assert {d["session_id"]: (d["kept"], d["dropped"]) for d in manifest.duplicates}[
            "chat"] == ([f"{samples_dir / 'chat.jsonl'}#chat"],
                        [f"{samples_dir / 'invalid-crash-tail.jsonl'}#chat",
                         f"{samples_dir / 'sessions.db'}#chat"])
        assert manifest.sessions == len(ids) == 12
        c.close()

    def test_joins_on_the_session_key_count_each_replace_once(
            self, samples: tuple[Path, Any]) -> None:
        out, _ = samples
        c = corpus.open_corpus(out)
        joined = c.sql("select s.session_id, count(*) as n from replaces r join sessions s "
                       "using (session_key) group by 1 order by 1")
        expected = {name: len(read_log(ROOT / "sample_logs" / f"{name}.jsonl")
                              .fold.replacements)
                    for name in ("long-compaction", "pruned-tool-results")}
        assert expected == {"long-compaction": 7, "pruned-tool-results": 1}
        assert dict(zip(joined["session_id"], joined["n"], strict=True)) == expected
        c.close()

    def test_copies_on_different_dates_are_kept_apart_and_warned_about(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        logs = tmp_path / "logs"
        logs.mkdir()
        chat = (ROOT / "sample_logs" / "chat.jsonl").read_bytes()
        (logs / "a.jsonl").write_bytes(chat)
        header, body = chat.split(b"\n", 1)
        later = {**json.loads(header), "createdAt": json.loads(header)["createdAt"] + 86400000}
        (logs / "b.jsonl").write_bytes(json.dumps(later).encode() + b"\n" + body)
        out = tmp_path / "out"
        assert main(["corpus", "build", str(logs), str(out), "--engine", "serial"]) == 0
        err = capsys.readouterr().err
        keys = [f"{logs / 'a.jsonl'}#chat", f"{logs / 'b.jsonl'}#chat"]
        assert f"warning: session 'chat' is in 2 sources: kept {keys[0]}, {keys[1]}" in err
        c = corpus.open_corpus(out)
        assert c.sql("select session_key from sessions order by 1")["session_key"].tolist() \
            == keys
        c.close()


class TestBuildCommand:
    def test_an_empty_folder_fails_clearly_and_writes_nothing(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "notes.txt").write_text("not a log\n")
        out = tmp_path / "out"
        assert main(["corpus", "build", str(tmp_path / "empty"), str(out)]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""  # the error, one line on stderr, and no progress bar
        assert captured.err.startswith(f"{tmp_path / 'empty'}: source-empty: holds no session "
                                       f"log")
        assert captured.err.count("\n") == 1
        assert not out.exists()

    def test_an_empty_build_keeps_the_previous_one(self, logs: Path, serial: Path,
                                                   tmp_path: Path) -> None:
        out = tmp_path / "out"
        shutil.copytree(serial, out)
        with pytest.raises(SurfaceLabError, match=r"nothing-\*\.jsonl: matches no file"):
            corpus.to_parquet(tmp_path / "nothing-*.jsonl", out)
        assert corpus.Manifest.load(out).sessions == 24

    def test_no_progress_bar_when_stderr_is_not_a_terminal(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "out"
        assert main(["corpus", "build", str(ROOT / "sample_logs" / "chat.jsonl"), str(out),
                     "--engine", "serial"]) == 0
        err = capsys.readouterr().err
        assert err.splitlines() == [f"{out}: 1 session, 61 events in 1 tasks (serial); 0 "
                                    f"session(s) with problems, 0 session id(s) in several "
                                    f"sources"]


_PINNED = ROOT / "tests" / "data" / "corpus_sample_tables.json"
_PLACED = ("source", "session_key", "file")  # where the checkout sits, not what was read


def _digests(out: Path) -> dict[str, Any]:
    """Each table of a build: its schema, rows and a hash of its rows in the files' order
    (the columns that name the checkout's folder left out)."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    found: dict[str, Any] = {}
    for name in corpus.TABLES:
        parts = [pq.read_table(p) for p in sorted((out / name).rglob("*.parquet"))]
        table = pa.concat_tables(parts)
        kept = table.drop_columns([c for c in _PLACED if c in table.column_names])
        rows = json.dumps(kept.to_pylist(), sort_keys=True, default=str).replace(
            str(ROOT), "<root>")  # a problem's text names its file
        found[name] = {"schema": [f"{f.name}:{f.type}" for f in table.schema],
                       "rows": table.num_rows,
                       "sha256": hashlib.sha256(rows.encode()).hexdigest()}
    return found


def test_the_sample_logs_build_the_pinned_tables(tmp_path: Path) -> None:
    """Every table's schema and values, pinned: a faster or leaner build writes the same
    rows (to refresh after a deliberate change: `SURFACE_LAB_REPIN=1`)."""
    out = tmp_path / "out"
    corpus.to_parquet(ROOT / "sample_logs", out, task_mb=0.001)
    found = _digests(out)
    if os.environ.get("SURFACE_LAB_REPIN"):
        _PINNED.write_text(json.dumps(found, indent=1) + "\n")
    assert found == json.loads(_PINNED.read_text())


def test_the_tables_do_not_depend_on_the_task_size(logs: Path, serial: Path,
                                                   tmp_path: Path) -> None:
    one = tmp_path / "one"
    corpus.to_parquet(logs, one, task_mb=1000)  # a task a date, not many small ones
    assert _digests(one) == _digests(serial)


def test_a_session_is_built_a_slice_of_events_at_a_time(
        logs: Path, serial: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large session's events are never held whole: they are made and set aside a
    slice (of at most a row group, whole lines) at a time, and the tables are the same."""
    from surface_lab.analysis import events as event_module

    sizes: list[int] = []
    whole = event_module.event_arrays

    def spy(log: Any, seqs: range | None = None) -> dict[str, Any]:
        assert seqs is not None
        lines = log.events.first_seqs
        one_line = lines[lines.index(seqs.start) + 1] == seqs.stop
        sizes.append(min(len(seqs), 50) if one_line else len(seqs))  # a row is one line
        return whole(log, seqs)

    monkeypatch.setattr(event_module, "event_arrays", spy)
    monkeypatch.setattr(corpus, "ROW_GROUP", 50)
    out = tmp_path / "sliced"
    corpus.to_parquet(logs, out, task_mb=0.5)
    total = corpus.Manifest.load(out).events
    assert max(sizes) <= 50 and len(sizes) > total // 50
    assert _digests(out) == _digests(serial)


@pytest.mark.parametrize("held", [0, 1 << 40])
def test_the_tables_do_not_depend_on_what_the_spill_keeps_in_memory(
        logs: Path, serial: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        held: int) -> None:
    """Every batch through the spill's file, or none: the same tables."""
    monkeypatch.setattr(corpus, "SPILL_HELD_BYTES", held)
    out = tmp_path / "out"
    corpus.to_parquet(logs, out, task_mb=0.5)
    assert _digests(out) == _digests(serial)


def test_a_build_leaves_the_default_rules_memos_alone(logs: Path, tmp_path: Path) -> None:
    """Each task audits with its own copy of the rules, so what they remember of the
    texts they stripped goes with the task, not into the process for the next ones."""
    from surface_lab.analysis.facts import DEFAULT_RULES

    before = dict(DEFAULT_RULES.__dict__.get("_stripped", {}))
    manifest = corpus.to_parquet(logs, tmp_path / "out", task_mb=0.5)
    assert manifest.tables["mentions"] and sum(f["rows"] for f in manifest.tables["mentions"])
    assert DEFAULT_RULES.__dict__.get("_stripped", {}) == before


@pytest.mark.parametrize("held", [0, 1 << 40])
def test_the_tables_do_not_depend_on_what_the_memo_of_hidden_texts_keeps(
        logs: Path, serial: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        held: int) -> None:
    """The memo forgotten at every text (no session reuses another's matches), or never:
    the same tables as the module's build."""
    monkeypatch.setattr(corpus, "_MEMO_BYTES", held)
    out = tmp_path / "out"
    corpus.to_parquet(logs, out, task_mb=0.5)
    assert _digests(out) == _digests(serial)


def test_a_hidden_text_is_matched_once_a_build(logs: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions that hide the same text (the generated ones share their tool outputs)
    find its mentions once, whichever task they are in; a new build starts afresh."""
    from surface_lab.analysis import facts

    seen: list[tuple[str, str]] = []
    raw_mentions = facts._raw_mentions

    def spy(text: str, author: str, rules: Any) -> Any:
        seen.append((text, author))
        return raw_mentions(text, author, rules)

    monkeypatch.setattr(facts, "_raw_mentions", spy)
    corpus.to_parquet(logs, tmp_path / "out", task_mb=0.5)
    first = list(seen)
    assert first and len(set(first)) == len(first)
    seen.clear()
    corpus.to_parquet(logs, tmp_path / "again", task_mb=0.5)
    assert seen == first
    assert corpus._MEMOS and not corpus._MEMOS[0][1].session  # no session's texts kept


class TestTextMemo:
    def test_it_holds_digests_and_mentions_never_the_texts(self) -> None:
        memo = corpus._TextMemo()
        text = "a hidden tool output " * 100
        memo[(text, "tool")] = {("output", "path", False): 2}
        assert memo[(text, "tool")] == {("output", "path", False): 2}
        assert memo.get((text, "user")) is None and memo.get(("other", "tool")) is None
        memo.session.clear()  # what a build does once a session's facts are found
        assert memo[(text, "tool")] == {("output", "path", False): 2}
        memo.session.clear()
        assert [len(digest) for digest, _ in memo._found] == [16]
        with pytest.raises(TypeError, match="holds digests, not texts"):
            list(memo)

    def test_it_forgets_everything_past_its_bound(self, monkeypatch: pytest.MonkeyPatch
                                                  ) -> None:
        monkeypatch.setattr(corpus, "_MEMO_BYTES", 3 * corpus._MEMO_ENTRY)
        memo = corpus._TextMemo()
        memo[("one", "tool")] = {}
        memo[("two", "tool")] = {}
        assert len(memo) == 2
        memo[("three", "tool")] = {("x", "symbol", False): 1}  # 2 entries' worth more
        assert len(memo) == 1
        assert memo.get(("one", "tool")) == {}  # the session's own memo keeps it
        memo.session.clear()
        assert memo.get(("one", "tool")) is None

    def test_other_rules_get_a_memo_of_their_own(self) -> None:
        import dataclasses

        from surface_lab.analysis.facts import DEFAULT_RULES, LEGACY_RULES

        default = corpus._hidden_texts(dataclasses.replace(DEFAULT_RULES))
        assert corpus._hidden_texts(dataclasses.replace(DEFAULT_RULES)) is default
        assert corpus._hidden_texts(LEGACY_RULES) is not default
