"""Billed requests and dollars (surface_lab.analysis.requests, .prices, requests_df): every
request the source records, once, equal to the file's own figures to the token, with a
truth computed here straight from the files, without the importer or the reader."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from surface_lab.analysis.prices import BundledPrices, Rates, RateTable, price_requests
from surface_lab.analysis.requests import (
    RequestsError,
    mark_on_path,
    read_requests,
    source_format,
    totals,
)
from surface_lab.importers import import_any
from surface_lab.notebook import requests_df, tokens_df

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SURFACE_LAB_SHARED", ROOT.parent / "shared"))
CLAUDE = SHARED / "agent_logs" / "claude_code"
OTHER = SHARED / "real_logs" / "other"
TRAJ = SHARED / "agent_logs" / "trajectories"
needs_shared = pytest.mark.skipif(not CLAUDE.is_dir(), reason=f"{SHARED} is not here")


def _lay_out(tmp: Path, main: Path) -> Path:
    """The shared copies flatten `<stem>/subagents/agent-*.jsonl` into one name: put them
    back where Claude Code writes them."""
    shutil.copy(main, tmp / main.name)
    for sub in CLAUDE.glob(f"{main.stem}_subagents_agent-*.jsonl"):
        folder = tmp / main.stem / "subagents"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(sub, folder / sub.name.split("_subagents_")[1])
    return tmp / main.name


def _claude_truth(*paths: Path) -> dict[str, int]:
    """ccusage's count: one entry per message.id + requestId (the final record of a
    response, whose output is not partial), every file of the session, no synthetic."""
    final: dict[Any, dict[str, Any]] = {}
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines()):
            record = json.loads(line)
            message = record.get("message") or {}
            if record.get("type") != "assistant" or "usage" not in message or \
                    message.get("model") == "<synthetic>":
                continue
            key = ((message.get("id"), record.get("requestId"))
                   if message.get("id") and record.get("requestId") else (path, number))
            final[key] = message["usage"]
    return {"requests": len(final),
            "input_uncached": sum(u.get("input_tokens", 0) for u in final.values()),
            "cache_read": sum(u.get("cache_read_input_tokens", 0) for u in final.values()),
            "cache_write": sum(u.get("cache_creation_input_tokens", 0)
                               for u in final.values()),
            "output": sum(u.get("output_tokens", 0) for u in final.values())}


def _summed(requests: list[Any]) -> dict[str, int]:
    t = totals(requests)
    return {"requests": len(requests), **{k: t.get(k, 0) for k in (
        "input_uncached", "cache_read", "cache_write", "output")}}


MAINS = sorted(p for p in CLAUDE.glob("*.jsonl") if "_subagents_" not in p.name) \
    if CLAUDE.is_dir() else []


@needs_shared
class TestClaudeCode:
    @pytest.mark.parametrize("main", MAINS, ids=lambda p: p.name[-20:])
    def test_totals_equal_the_files_with_subagents_and_summarizer(self, tmp_path: Path,
                                                                  main: Path) -> None:
        path = _lay_out(tmp_path, main)
        requests = read_requests(path)
        files = [path, *sorted((tmp_path / main.stem / "subagents").glob("*.jsonl"))]
        assert _summed(requests) == _claude_truth(*files)
        assert {r.agent for r in requests} == {"main", "subagent", "summarizer"}
        assert len({r.request_id for r in requests}) == len(requests)

    def test_the_final_record_of_a_response_holds_its_output(self, tmp_path: Path) -> None:
        path = _lay_out(tmp_path, MAINS[0])
        main = [r for r in read_requests(path, subagents=False)]
        assert sum(r.output or 0 for r in main) == 38_899  # the first records sum 10,458
        assert len(main) == 152  # of 299 records with usage

    def test_one_hour_cache_writes_are_apart(self, tmp_path: Path) -> None:
        requests = read_requests(_lay_out(tmp_path, MAINS[0]))
        assert all(r.cache_write == (r.cache_write_5m or 0) + (r.cache_write_1h or 0)
                   for r in requests)
        assert sum(r.cache_write_1h or 0 for r in requests) > 0
        assert all(r.input_total == r.input_uncached + r.cache_read + r.cache_write
                   for r in requests)

    def test_on_path_marks_what_the_import_shows(self, tmp_path: Path) -> None:
        path = _lay_out(tmp_path, MAINS[0])
        frame = requests_df(path, prices={})
        main = frame[frame["agent"] == "main"]
        assert main["on_path"].all() and not frame[frame["agent"] != "main"]["on_path"].any()
        on_path = tokens_df(list(import_any(path).events))
        assert set(on_path["request_id"]) == set(main["request_id"])
        assert on_path["output"].sum() == main["output"].sum()

    def test_a_rewound_branch_is_billed_and_off_the_path(self) -> None:
        path = OTHER / "daaain__claude-code-log__test_test_data_dag_compact_after_rewind.jsonl"
        frame = requests_df(path, prices={})
        assert _summed(read_requests(path)) == _claude_truth(path)
        assert list(frame["on_path"]).count(False) == 1 and len(frame) == 5


@needs_shared
class TestOtherAgents:
    def test_codex_counts_each_last_token_usage_once(self) -> None:
        path = next(OTHER.glob("*stage0_agents_codex_small.jsonl"))
        truth, previous = [], None
        for line in path.read_text().splitlines():
            payload = json.loads(line).get("payload") or {}
            info = payload.get("info") if payload.get("type") == "token_count" else None
            if isinstance(info, dict) and info["total_token_usage"] != previous:
                previous = info["total_token_usage"]
                if any(info["last_token_usage"].values()):
                    truth.append(info["last_token_usage"])
        requests = read_requests(path)
        assert [r.input_total for r in requests] == [u["input_tokens"] for u in truth]
        assert [r.cache_read for r in requests] == [u["cached_input_tokens"] for u in truth]
        assert [r.output for r in requests] == [u["output_tokens"] for u in truth]
        assert [r.reasoning for r in requests] == [u["reasoning_output_tokens"]
                                                   for u in truth]

    def test_pi_usage_and_its_own_cost(self) -> None:
        path = next(OTHER.glob("*stage0_agents_pi_small.jsonl"))
        records = [json.loads(line) for line in path.read_text().splitlines()]
        usages = [r["message"]["usage"] for r in records if r.get("type") == "message"
                  and r["message"]["role"] == "assistant"]
        requests = mark_on_path(read_requests(path), import_any(path).events)
        assert [r.input_uncached for r in requests] == [u["input"] for u in usages]
        assert [r.output for r in requests] == [u["output"] for u in usages]
        assert [r.recorded_cost for r in requests] == [u["cost"]["total"] for u in usages]
        assert all(r.on_path for r in requests)

    def test_atif_totals_equal_each_file_s_final_metrics_with_its_continuation(self
                                                                              ) -> None:
        root = next(OTHER.glob("*linear-history.trajectory.json"))
        requests = read_requests(root)
        files = list(dict.fromkeys(r.file for r in requests))
        assert [Path(f).name for f in files] == [root.name, root.name.replace(
            ".json", ".cont-1.json")]  # the continuation, as the importer follows it
        for file in files:
            final = json.loads(Path(file).read_text())["final_metrics"]
            own = [r for r in requests if r.file == file]
            assert totals(own)["input_total"] == final["total_prompt_tokens"]
            assert totals(own)["output"] == final["total_completion_tokens"]
            assert sum(r.recorded_cost or 0 for r in own) == pytest.approx(
                final["total_cost_usd"])
        assert len({r.request_id for r in requests}) == len(requests)

    def test_atif_labels_what_its_steps_do_not_itemise(self) -> None:
        path = next(OTHER.glob("*linear-history.trajectory.cont-1.json"))
        rest = [r for r in read_requests(path) if r.agent == "unitemized"]
        assert len(rest) == 1 and rest[0].source == "usage-total"
        assert rest[0].on_path is None and rest[0].input_total == 7802 - 4250

    @pytest.mark.parametrize("path", sorted(TRAJ.glob("*mini-swe-agent*")) if TRAJ.is_dir()
                             else [], ids=lambda p: p.name[-22:])
    def test_mini_swe_agent_per_call_usage_matches_its_model_stats(self, path: Path
                                                                   ) -> None:
        document = json.loads(path.read_text())
        calls = [m["extra"]["response"]["usage"] for m in document["messages"]
                 if m.get("role") == "assistant" and "usage" in m.get("extra", {}).get(
                     "response", {})]
        requests = read_requests(path)
        assert source_format(path) == "mini-swe-agent"
        assert len(requests) == document["info"]["model_stats"]["api_calls"] == len(calls)
        assert totals(requests)["input_total"] == sum(u["prompt_tokens"] for u in calls)
        assert totals(requests)["output"] == sum(u["completion_tokens"] for u in calls)
        assert sum(r.recorded_cost or 0 for r in requests) == pytest.approx(
            document["info"]["model_stats"]["instance_cost"])

    def test_swe_agent_model_stats_are_its_own_count_and_say_so(self) -> None:
        path = TRAJ / "SWE-agent__SWE-agent__pydicom__pydicom-1458.traj"
        stats = json.loads(path.read_text())["info"]["model_stats"]
        (row,) = read_requests(path)
        assert (row.source, row.agent, row.calls) == ("agent-count", "unitemized", 12)
        assert (row.input_total, row.output) == (stats["tokens_sent"],
                                                 stats["tokens_received"])
        cost = BundledPrices().cost(row)
        assert cost.usd is None and "does not split cached input" in (cost.problem or "")


def _request(**figures: Any) -> Any:
    from surface_lab.analysis.requests import _request as make

    base = {"uncached": 0, "read": 0, "write": 0, "output": 0}
    return make("r", "f", 1, figures.pop("time", None), figures.pop("model", "m"),
                figures.pop("provider", None), "main", **{**base, **figures})


class TestPrices:
    def test_a_fake_table_prices_cache_reads_and_writes_at_their_rates(self) -> None:
        table = RateTable({"m": Rates(input=10, output=100, cache_read=1, cache_write=20,
                                      cache_write_1h=40)})
        r = _request(uncached=1_000_000, read=2_000_000, write=3_000_000, write_1h=1_000_000,
                     output=500_000)
        cost = table.cost(r)
        assert cost.usd == pytest.approx(10 + 2 + 2 * 20 + 40 + 50)
        assert (cost.priced_model, cost.source) == ("m", "user table")

    def test_a_table_matches_the_longest_model_prefix_and_says_what_it_misses(self
                                                                             ) -> None:
        table = RateTable({"claude": Rates(1, 1), "claude-opus": Rates(2, 2)})
        assert table.cost(_request(model="claude-opus-4-6")).priced_model == "claude-opus"
        missing = table.cost(_request(model="gpt-4o"))
        assert missing.usd is None and missing.problem == "no rates for model 'gpt-4o'"

    def test_the_bundled_table_has_history_and_reads_the_request_s_time(self) -> None:
        big = {"uncached": 300_000, "output": 1000, "model": "claude-opus-4-6",
               "provider": "anthropic"}
        before = BundledPrices().cost(_request(time=1_770_000_000_000, **big))  # 2026-02
        after = BundledPrices().cost(_request(time=1_780_000_000_000, **big))  # 2026-05
        assert before.usd is not None and after.usd is not None
        # past 200k input the long-context tier applied until 2026-03-13
        assert (before.usd, after.usd) == (pytest.approx(3.0375), pytest.approx(1.525))
        assert before.source.startswith("genai-prices ")

    def test_an_override_wins_over_the_bundled_table(self) -> None:
        table = BundledPrices({"claude-opus-4-6": Rates(input=1, output=1)})
        cost = table.cost(_request(uncached=1_000_000, model="claude-opus-4-6"))
        assert (cost.usd, cost.source) == (1.0, "override")

    def test_the_bundled_table_needs_no_network(self, monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
        def refuse(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("a price lookup opened a connection")

        monkeypatch.setattr(socket.socket, "connect", refuse)
        cost = BundledPrices().cost(_request(uncached=1000, model="gpt-4o",
                                             provider="openai"))
        assert cost.usd == pytest.approx(1000 * 2.5 / 1e6)

    @needs_shared
    def test_a_session_that_switches_model_prices_each_request_by_its_own(
            self, tmp_path: Path) -> None:
        requests = read_requests(_lay_out(tmp_path, MAINS[1]))
        costs = price_requests(requests)
        assert {c.priced_model for c in costs} == {"claude-opus-4-6", "claude-haiku-4-5"}
        assert all(c.usd is not None for c in costs)

    @needs_shared
    def test_bundled_prices_agree_with_the_dollars_sources_state(self) -> None:
        for path in [*TRAJ.glob("*mini-swe-agent*"), *OTHER.glob("*linear-history*.json")]:
            requests = [r for r in read_requests(path) if r.calls == 1]
            costs = price_requests(requests)
            assert sum(c.usd or 0 for c in costs) == pytest.approx(
                sum(r.recorded_cost or 0 for r in requests), rel=1e-6), path.name


class TestErrors:
    def test_a_missing_file_names_itself(self, tmp_path: Path) -> None:
        with pytest.raises(RequestsError, match=r"nope\.jsonl: no such file"):
            read_requests(tmp_path / "nope.jsonl")

    def test_a_surface_log_s_requests_come_from_its_events(self) -> None:
        frame = requests_df(ROOT / "sample_logs" / "long-compaction.jsonl", prices={})
        main = frame[frame["agent"] == "main"]
        assert len(main) == len(tokens_df(ROOT / "sample_logs" / "long-compaction.jsonl"))
        assert main["on_path"].all() and not frame[frame["agent"] == "summarizer"][
            "on_path"].any()
        assert set(frame["agent"]) == {"main", "summarizer"}  # its compactions' requests
        assert set(frame["tokens_source"]) == {"usage"}


@needs_shared
class TestAudit:
    def test_a_real_compaction_s_tokens_and_cost_are_the_recorded_ones(self, tmp_path: Path
                                                                       ) -> None:
        from surface_lab.analysis.source import load_source
        from surface_lab.notebook import compaction_audit

        path = _lay_out(tmp_path, MAINS[0])
        before = after = boundary = None  # the main chain's requests around the boundary
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("subtype") == "compact_boundary":
                boundary = True
                continue
            usage = (record.get("message") or {}).get("usage")
            if record.get("type") == "assistant" and usage and not record.get("isSidechain"):
                total = (usage["input_tokens"] + usage["cache_read_input_tokens"]
                         + usage["cache_creation_input_tokens"])
                if boundary is None:
                    before = total
                elif after is None:
                    after = (total, usage["cache_creation_input_tokens"])
        imported = import_any(path)
        log = load_source(list(imported.events), progress=False)
        log.path = str(path)  # as `surface-lab audit` gives an agent's file
        (row,) = compaction_audit(log, progress=False).to_dict("records")
        assert after is not None
        assert (row["tokens_before"], row["tokens_after"]) == (before, after[0])
        assert (row["tokens_source"], row["next_cache_write"]) == ("usage", after[1])
        assert row["estimated_tokens_before"] < row["tokens_before"]  # no system prompt
        summarizer = [r for r in read_requests(path) if r.agent == "summarizer"]
        assert row["summarizer_input"] == summarizer[0].input_total
        assert row["summarizer_usd"] == pytest.approx(BundledPrices().cost(summarizer[0]).usd)
        assert row["next_cache_write_usd"] > 0

    def test_without_recorded_usage_the_estimate_is_labelled(self) -> None:
        from surface_lab.notebook import compaction_audit

        events = [e for e in import_any(OTHER / (
            "daaain__claude-code-log__test_test_data_dag_compact_after_rewind.jsonl")).events]
        stripped = [{**e, "data": {k: v for k, v in e["data"].items() if k != "usage"}}
                    if e["type"] == "assistant/message" else e for e in events]
        audit = compaction_audit(stripped, progress=False)
        assert len(audit) and set(audit["tokens_source"]) == {"estimate"}
        assert (audit["tokens_before"] == audit["estimated_tokens_before"]).all()
        assert audit["summarizer_usd"].isna().all()

    def test_the_cli_table_and_the_html_say_which_figures_are_estimates(
            self, tmp_path: Path) -> None:
        from surface_lab.notebook.audit import audit_report

        events = list(import_any(OTHER / (
            "daaain__claude-code-log__test_test_data_dag_compact_after_rewind.jsonl")).events)
        stripped = [{**e, "data": {k: v for k, v in e["data"].items() if k != "usage"}}
                    if e["type"] == "assistant/message" else e for e in events]
        estimated = audit_report(stripped, tmp_path, name="est", progress=False)
        recorded = audit_report(events, tmp_path, name="rec", progress=False)
        assert "-> 35 est " in " ".join(estimated["summary_rows"][2].split()) + " "
        assert "est" not in recorded["summary_rows"][2].split()
        html = Path(estimated["html"]).read_text()
        assert "tokens source" in html and "tokens (estimate)" in html
        assert "tokens (usage)" in Path(recorded["html"]).read_text()


class TestPathRequests:
    def test_the_packed_log_and_its_events_in_memory_give_the_same_requests(self) -> None:
        """The typed-column path (decoding only what a request reads) agrees with the
        one over materialised events."""
        from surface_lab import read_log

        path = ROOT / "sample_logs" / "long-compaction.jsonl"
        packed = tokens_df(path)
        in_memory = tokens_df([dict(e) for e in read_log(path).events])
        assert packed.equals(in_memory)
        assert len(packed) == 28 and packed["usage_source"].eq("chunk").all()

    def test_cited_seqs_in_any_json_form_and_order_give_the_same_requests(
            self, tmp_path: Path) -> None:
        """The packed path reads only the last few cited seqs of a compact array: an
        array with spaces is decoded whole, and a usage chunk cited first (not among
        the last few) is still found."""
        import json
        import re

        from surface_lab import read_log

        path = ROOT / "sample_logs" / "long-compaction.jsonl"
        lines = []
        for line in path.read_text().splitlines(keepends=True):
            cited = re.search(r'"sourceEventSeqs":(\[[0-9,]*\])', line)
            if '"type":"assistant/message"' in line and cited:
                seqs = json.loads(cited.group(1))
                moved = (", ".join(map(str, seqs)) if len(lines) % 2
                         else ",".join(map(str, [seqs[-2], *seqs[:-2], seqs[-1]])))
                line = f"{line[:cited.start(1)]}[{moved}]{line[cited.end(1):]}"
            lines.append(line)
        changed = tmp_path / "cited.jsonl"
        changed.write_text("".join(lines))
        assert type(read_log(changed).events).__name__ == "LogEvents"  # the packed path
        assert tokens_df(changed).equals(tokens_df(path))


OTHER_CLAUDE = sorted(p for p in OTHER.glob("*.jsonl") if source_format(p) == "claude-code") \
    if OTHER.is_dir() else []


@needs_shared
@pytest.mark.parametrize("path", OTHER_CLAUDE, ids=lambda p: p.name[-30:])
def test_every_other_claude_code_log_totals_its_own_figures(path: Path) -> None:
    assert _summed(read_requests(path)) == _claude_truth(path)


@needs_shared
def test_compare_policies_counts_recorded_input_with_the_cache_for_every_agent() -> None:
    from surface_lab.notebook import compare_policies

    for path in (CLAUDE / MAINS[0].name, next(OTHER.glob("*linear-history.trajectory.json"))):
        events = list(import_any(path).events)
        recorded = compare_policies(events, {}).frame.iloc[0]["recorded_input_tokens"]
        assert recorded == tokens_df(events)["input_total"].sum()
    claude = tokens_df(list(import_any(CLAUDE / MAINS[0].name).events))
    assert (claude["input_total"] > claude["input_uncached"]).all()  # the cache counts


DSH = sorted((SHARED / "real_logs" / "dsh").glob("*.jsonl")) if CLAUDE.is_dir() else []


@needs_shared
@pytest.mark.parametrize("path", DSH, ids=lambda p: p.name[-34:])
def test_a_dsh_log_bills_its_requests_and_its_summarizer(path: Path) -> None:
    """Truth: each assistant message's own usage (one per step) and each
    compaction/summary's usage, read from the lines."""
    truth_in = truth_out = 0
    steps = set()
    for line in path.read_text().splitlines()[1:]:
        record = json.loads(line)
        usage = (record.get("data") or {}).get("usage")
        if not isinstance(usage, dict):
            continue
        if record["type"] == "assistant/message":
            key = (record["data"].get("turn"), record["data"].get("step"))
            if key in steps:
                continue
            steps.add(key)
        elif record["type"] != "compaction/summary":
            continue
        truth_in += usage.get("inputTokens", 0) + usage.get("cacheReadTokens", 0) + \
            usage.get("cacheWriteTokens", 0)
        truth_out += usage.get("outputTokens", 0)
    frame = requests_df(path, prices={})
    assert (frame["input_total"].sum(), frame["output"].sum()) == (truth_in, truth_out)


@needs_shared
def test_a_dsh_compaction_s_summarizer_is_in_the_audit() -> None:
    from surface_lab.notebook import compaction_audit

    path = next((SHARED / "real_logs" / "dsh").glob("*compaction-recovery*"))
    summary = next(json.loads(line) for line in path.read_text().splitlines()
                   if '"compaction/summary"' in line)
    (row,) = compaction_audit(path, progress=False).to_dict("records")
    assert (row["summarizer_input"], row["summarizer_output"]) == (
        summary["data"]["usage"]["inputTokens"], summary["data"]["usage"]["outputTokens"])
    assert row["tokens_source"] == "usage"


class TestUntrustedFiles:
    def test_a_subagent_link_out_of_the_session_folder_is_not_read(self, tmp_path: Path
                                                                   ) -> None:
        from surface_lab.analysis.requests import subagent_files

        session = tmp_path / "s.jsonl"
        session.write_text("")
        (tmp_path / "s" / "subagents").mkdir(parents=True)
        (tmp_path / "elsewhere.jsonl").write_text("")
        (tmp_path / "s" / "subagents" / "agent-x.jsonl").symlink_to(
            tmp_path / "elsewhere.jsonl")
        (tmp_path / "s" / "subagents" / "agent-y.jsonl").write_text("")
        assert [p.name for p in subagent_files(session)] == ["agent-y.jsonl"]

    def test_a_codex_count_whose_cache_exceeds_its_input_is_kept_unsplit(
            self, tmp_path: Path) -> None:
        path = tmp_path / "rollout.jsonl"
        lines = [{"type": "session_meta", "payload": {"id": "s1"}},
                 {"type": "turn_context", "payload": {"model": "gpt-4o"}},
                 {"type": "event_msg", "timestamp": "2026-01-01T00:00:00Z", "payload": {
                     "type": "token_count", "info": {
                         "total_token_usage": {"input_tokens": 10},
                         "last_token_usage": {"input_tokens": 10, "cached_input_tokens": 50,
                                              "output_tokens": 3}}}}]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        (row,) = read_requests(path, fmt="codex")
        assert (row.input_total, row.input_uncached, row.cache_read) == (10, None, 50)
        assert (row.request_id, row.model, row.on_path) == ("s1:3", "gpt-4o", True)
        cost = BundledPrices().cost(row)
        assert cost.usd is None and "does not split" in (cost.problem or "")

    def test_lines_that_are_not_json_objects_are_no_requests(self, tmp_path: Path) -> None:
        path = tmp_path / "t.jsonl"
        good = {"type": "assistant", "uuid": "u1", "requestId": "r1", "message": {
            "id": "m1", "model": "claude-opus-4-6",
            "usage": {"input_tokens": 1, "output_tokens": 2}}}
        path.write_text("not json\n[1, 2]\n" + json.dumps(good) + "\n")
        (row,) = read_requests(path, fmt="claude-code")
        assert (row.request_id, row.line, row.input_total, row.output) == (
            "m1:r1", 3, 1, 2)


def test_the_running_surface_sums_equal_a_fold_at_each_request() -> None:
    """path_requests keeps the surface as running sums; the surface folded anew before
    each request's first message (request_tokens) gives the same figures."""
    from surface_lab import read_log
    from surface_lab.analysis.tokens import path_requests, request_tokens
    from surface_lab.surface import fold_surface

    log = read_log(ROOT / "sample_logs" / "long-compaction.jsonl")
    events = list(log.events)
    words = lambda text: len(text.split())  # noqa: E731
    for r in path_requests(log.events, log.plans, tokenizer=words):
        nodes = fold_surface(events[: r.seq]).nodes
        folded = request_tokens(events, nodes, r.seq, words)
        assert (r.surface_entries, r.estimated, r.counted) == (
            folded.surface_entries, folded.estimated, folded.counted)


def test_each_compaction_takes_the_summarizer_made_between_its_requests() -> None:
    from surface_lab.analysis.prices import compaction_costs
    from surface_lab.analysis.requests import _request as make
    from surface_lab.analysis.tokens import AroundReplace

    def summarizer(rid: str, time: int) -> Any:
        return make(rid, "f", None, time, "m", None, "summarizer", uncached=1_000_000,
                    read=0, write=0, output=0)

    billed = [summarizer("late", 500), summarizer("first", 150), summarizer("second", 250)]
    around = [AroundReplace(10, 5, 1_000_000, "a", "b", 100, 200, None, "m"),
              AroundReplace(10, 5, None, "c", "d", 200, 300, None, "m"),
              AroundReplace(10, 5, None, "e", "f", 300, 400, None, "m")]
    table = RateTable({"m": Rates(input=2, output=0, cache_write=4)})
    costs = compaction_costs(around, billed, table)
    assert [c.summarizer_request for c in costs] == ["first", "second", None]
    assert [c.summarizer_usd for c in costs] == [2.0, 2.0, None]
    assert [c.next_cache_write_usd for c in costs] == [4.0, None, None]
