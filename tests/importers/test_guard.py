"""One guard for every importer (`common.no_foreign_errors`): a foreign exception is an
`importer-error` naming the file and how far the import got; an error of the package's
own without a place gets the file as its place."""

from __future__ import annotations

from typing import Any

import pytest

from surface_lab.errors import AdmissionError
from surface_lab.importers import FORMATS, import_any
from surface_lab.importers.common import GUARDED, Builder, ImportFailure

from .helpers import OTHER, break_builder

needs_shared = pytest.mark.skipif(not OTHER.is_dir(), reason="../shared is absent")
CODEX = "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_codex_small.jsonl"


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_importer_wears_the_one_guard(fmt: str) -> None:
    assert FORMATS[fmt] in GUARDED


@needs_shared
def test_a_foreign_exception_in_any_importer_is_a_located_importer_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex had only import_any's backstop (`record-malformed`); now the importer itself
    refuses, whoever calls it, with the line of the last record imported."""
    source = OTHER / CODEX
    for run in (lambda: import_any(source), lambda: FORMATS["codex"](source)):
        with monkeypatch.context() as patch:
            break_builder(patch, "assistant", KeyError("content"))
            with pytest.raises(ImportFailure) as caught:
                run()
        err = caught.value
        assert (err.code, err.path) == ("importer-error", str(source))
        assert str(source) in err.message and "KeyError ('content')" in err.message
        assert "after line " in err.message and "nothing imported" in err.message


@needs_shared
def test_a_refusal_of_the_session_without_a_place_gets_the_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    source = OTHER / CODEX

    def refuses(self: Builder, *args: Any, **kwargs: Any) -> Any:
        raise AdmissionError("message-content: not a list", code="message-content")

    monkeypatch.setattr(Builder, "assistant", refuses)
    with pytest.raises(ImportFailure) as caught:
        FORMATS["codex"](source)
    assert (caught.value.code, caught.value.path) == ("message-content", str(source))
    assert caught.value.message.startswith(f"{source}: message-content")



@needs_shared
def test_a_recursion_error_says_the_records_nest_too_deep(
        monkeypatch: pytest.MonkeyPatch) -> None:
    break_builder(monkeypatch, "assistant", RecursionError("maximum recursion depth"),
                  on_call=1)
    with pytest.raises(ImportFailure, match=r"RecursionError \(records nested too deep\)"
                       r" on a record of an unexpected shape") as caught:
        import_any(OTHER / CODEX)
    assert caught.value.code == "importer-error"
