"""`corpus sql` is read-only and reaches no file outside the corpus unless asked
(issue 30, point 8); every storage error has a code; an input named twice is audited
once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from surface_lab import StorageError, SurfaceLabError, corpus
from surface_lab.cli import expand_audit_paths, main
from surface_lab.storage import JsonlStore

from .common import PROJECT, record

pytestmark = pytest.mark.reliability
CHAT = PROJECT / "sample_logs" / "chat.jsonl"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "out"
    corpus.to_parquet([CHAT], out, engine="serial")
    return out


@pytest.mark.parametrize("query", [
    "COPY (SELECT 1) TO '{outside}/copied.csv'",
    "COPY events TO '{corpus}/events-copy.parquet'",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_parquet('{corpus}/../outside.parquet')",
    "SELECT * FROM glob('/etc/*')",
    "ATTACH '{outside}/attached.db' AS a",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "CREATE TABLE t AS SELECT 1",
    "SELECT 1; COPY (SELECT 1) TO '{outside}/second.csv'",
])
def test_a_query_cannot_write_or_reach_outside_the_corpus(
        built: Path, tmp_path: Path, query: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in built.rglob("*"))
    text = query.format(outside=tmp_path, corpus=built)
    assert main(["corpus", "sql", str(built), text]) == 1
    printed = capsys.readouterr()
    # the error is on stderr, its first line names the code (DuckDB's own lines may follow)
    first = printed.err.split("\n")[0]
    assert printed.out == "" and ("query-refused" in first or "query-invalid" in first), printed
    assert list(tmp_path.iterdir()) == []
    assert sorted(p.name for p in built.rglob("*")) == before


def test_reading_the_corpus_still_works(built: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corpus", "sql", str(built), "select count(*) as n from events"]) == 0
    assert capsys.readouterr().out.split() == ["n", "61"]  # the chat sample's events


def test_allow_external_lets_a_query_read_outside_but_not_write(
        built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "names.csv").write_text("name\nalice\n")
    assert main(["corpus", "sql", str(built), f"select * from read_csv('{tmp_path}/names.csv')",
                 "--allow-external"]) == 0
    assert "alice" in capsys.readouterr().out
    assert main(["corpus", "sql", str(built), f"COPY events TO '{tmp_path}/x.csv'",
                 "--allow-external"]) == 1
    assert not (tmp_path / "x.csv").exists()
    record("corpus-sql-sandbox", refused_queries=13)


def test_the_python_api_is_read_only_too(built: Path, tmp_path: Path) -> None:
    c = corpus.open_corpus(built)
    try:
        with pytest.raises(SurfaceLabError, match="only SELECT") as caught:
            c.sql(f"COPY events TO '{tmp_path}/x.csv'")
        assert caught.value.code == "query-refused"
    finally:
        c.close()


class TestStorageErrorCodes:
    def test_every_storage_error_has_a_code(self, tmp_path: Path) -> None:
        store = JsonlStore(tmp_path / "store")
        with pytest.raises(StorageError) as missing:
            store.load("nobody")
        assert missing.value.code == "session-not-found"
        assert StorageError("anything").code == "storage-failed"

    def test_a_cli_refusal_names_its_code(self, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["validate", str(tmp_path / "nope.jsonl")]) == 1
        assert ": error: " not in capsys.readouterr().out


class TestNamedTwice:
    def test_one_file_by_two_spellings_or_a_link_is_audited_once(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        shutil.copy(CHAT, tmp_path / "chat.jsonl")
        os.symlink(tmp_path / "chat.jsonl", tmp_path / "link.jsonl")
        monkeypatch.chdir(tmp_path)
        items = expand_audit_paths(["chat.jsonl", str(tmp_path / "chat.jsonl"),
                                    "./chat.jsonl", "link.jsonl"])
        assert len(items) == 1
