"""What-if replays a paper can cite (issue 27): the agents' own policies as presets, checked
against the agent itself (SWE-agent's `LastNObservations`), costed per request with a
cache model and a price table, and compared across sessions with intervals."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from shared_logs import SHARED

from surface_lab.analysis.policies import (
    BudgetMiss,
    ClearToolUses,
    Compact,
    LastNObservations,
    OpenHandsSummarizing,
    PiCompaction,
    SummarizeEvery,
    replay_policy,
)
from surface_lab.analysis.prices import Rates
from surface_lab.analysis.source import load_source
from surface_lab.analysis.whatif import cost_replay, overhead_estimate, request_surfaces
from surface_lab.importers import import_any
from surface_lab.messages import message_text

TRAJECTORIES = SHARED / "agent_logs" / "trajectories"


# --- a SWE-agent trajectory built by the rule ----------------------------------------------

def _elide(history: Sequence[dict[str, Any]], n: int, polling: int = 1
           ) -> list[dict[str, Any]]:
    """The rule as issue 27 states it, written independently of the preset."""
    obs = [i for i, e in enumerate(history)
           if e.get("message_type") == "observation" and not e.get("is_demo")]
    last = max(0, (len(obs) // polling) * polling - n)
    out = []
    for i, entry in enumerate(history):
        entry = dict(entry)
        tags = set(entry.get("tags", []))
        if (i in obs[1:last] and "keep_output" not in tags) or "remove_output" in tags:
            lines = len(entry["content"].splitlines())
            entry["content"] = f"Old environment output: ({lines} lines omitted)"
        out.append(entry)
    return out


def _trajectory(steps: int, n: int, polling: int = 1) -> dict[str, Any]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant.", "agent": "main",
         "message_type": "system"},
        {"role": "user", "content": "Fix the bug in parse().\nIt fails on empty input.",
         "agent": "main", "message_type": "observation"}]
    trajectory = []
    for k in range(steps):
        query = _elide(history, n, polling)
        thought = f"Step {k}: look at file {k}."
        action = f"cat file_{k}.py"
        history.append({"role": "assistant", "content": f"{thought}\n\n```\n{action}\n```",
                        "thought": thought, "action": action, "agent": "main",
                        "message_type": "action"})
        output = "\n".join(f"line {j} of file {k}" for j in range(k + 2))
        history.append({"role": "user", "content": output, "agent": "main",
                        "message_type": "observation"})
        trajectory.append({"action": action, "observation": output, "response": thought,
                           "thought": thought, "state": "{}", "query": query})
    return {"history": history, "trajectory": trajectory,
            "info": {"exit_status": "submitted", "model_stats": {"api_calls": steps}}}


def _texts(events: Sequence[Any], plans: Sequence[Any]) -> list[list[str]]:
    return [[message_text(events[s]) for s in r.nodes]
            for r in request_surfaces(events, plans)]


@pytest.mark.parametrize(("n", "polling"), [(2, 1), (3, 1), (2, 3)])
def test_last_n_observations_gives_back_what_each_swe_agent_step_sent(
        tmp_path: Path, n: int, polling: int) -> None:
    path = tmp_path / "built.traj"
    path.write_text(json.dumps(_trajectory(9, n, polling)))
    imported = import_any(path)
    assert any(e["type"] == "compaction/prune" for e in imported.events)  # it did elide
    recorded = load_source(list(imported.events), progress=False)
    replayed = load_source(replay_policy(imported, LastNObservations(n, polling)),
                           progress=False)
    sent = _texts(recorded.events, recorded.plans)
    assert len(sent) == 9
    assert _texts(replayed.events, replayed.plans) == sent
    assert "Old environment output: (3 lines omitted)" in sent[-1]


def test_another_n_does_not_give_back_what_was_sent(tmp_path: Path) -> None:
    path = tmp_path / "built.traj"
    path.write_text(json.dumps(_trajectory(9, 2)))
    imported = import_any(path)
    recorded = load_source(list(imported.events), progress=False)
    replayed = load_source(replay_policy(imported, LastNObservations(4)), progress=False)
    assert _texts(replayed.events, replayed.plans) != _texts(recorded.events,
                                                             recorded.plans)


def _processors(document: dict[str, Any]) -> list[Any]:
    """The history processors a trajectory's own config names (`replay_config`)."""
    config = document.get("replay_config")
    if isinstance(config, str):
        config = json.loads(config)
    agent = (config or {}).get("agent") or {}
    out: list[Any] = []
    for processor in agent.get("history_processors") or []:
        if processor.get("type") == "last_n_observations":
            out.append(LastNObservations(int(processor["n"]),
                                         int(processor.get("polling", 1))))
        elif processor.get("type") not in (None, "default", "cache_control"):
            pytest.skip(f"processor {processor.get('type')} has no preset")
    return out


def test_every_shared_swe_agent_trajectory_replays_to_what_it_sent() -> None:
    paths = sorted(TRAJECTORIES.glob("*.traj"))  # SWE-agent's (mini-swe-agent: .traj.json)
    if not paths:
        pytest.skip(f"no SWE-agent trajectory in {TRAJECTORIES} (set SURFACE_LAB_SHARED)")
    for path in paths:
        document = json.loads(path.read_text())
        imported = import_any(path)
        recorded = load_source(list(imported.events), progress=False)
        replayed = load_source(replay_policy(imported, _processors(document)),
                               progress=False)
        sent = _texts(recorded.events, recorded.plans)
        assert sent, path.name
        assert _texts(replayed.events, replayed.plans) == sent, path.name


# --- the other presets ---------------------------------------------------------------------

def test_summarize_every_n_keeps_the_last_m_rounds(tmp_path: Path) -> None:
    path = tmp_path / "built.traj"
    path.write_text(json.dumps(_trajectory(12, 100)))
    calls: list[int] = []

    def fake(events: Sequence[Any]) -> str:
        calls.append(len(events))
        return "summary"

    replayed = replay_policy(import_any(path), SummarizeEvery(every=5, keep_last=2),
                             summarizer=fake)
    log = load_source(replayed, progress=False)
    last = request_surfaces(log.events, log.plans)[-1]
    kinds = [log.events[s]["type"] for s in last.nodes]
    assert kinds.count("assistant/message") <= 5
    assert len(calls) >= 2  # summarized, then summarized again with the summary in
    assert message_text(log.events[last.nodes[0]]).startswith("Fix the bug")


def test_clear_tool_uses_keeps_the_latest_tool_uses_and_refuses_inputs() -> None:
    long = Path(__file__).resolve().parents[1] / "sample_logs" / "long-compaction.jsonl"
    replayed = replay_policy(long, ClearToolUses(trigger=500, keep=2))
    results = [s for s in replayed.surface.nodes
               if replayed.events[s]["type"] == "tool/result"]
    texts = [message_text(replayed.events[s]) for s in results]
    assert texts[:-2] and all(t == "[tool result cleared]" for t in texts[:-2])
    assert "[tool result cleared]" not in texts[-2:]
    with pytest.raises(ValueError, match="keeps the recorded actions"):
        ClearToolUses(clear_tool_inputs=True)


def test_pi_and_openhands_presets_carry_their_documented_parameters() -> None:
    assert PiCompaction().budget_tokens == 200_000 - 16_384
    assert PiCompaction().keep_recent_tokens == 20_000
    assert OpenHandsSummarizing().max_size == 120
    assert LastNObservations().n == 10 and SummarizeEvery() == SummarizeEvery(21, 10)


def test_a_policy_over_its_budget_says_so_per_request_with_why() -> None:
    claude = SHARED / "agent_logs" / "claude_code"
    sessions = sorted(claude.rglob("*.jsonl")) if claude.exists() else []
    long = Path(__file__).resolve().parents[1] / "sample_logs" / "long-compaction.jsonl"
    misses: list[BudgetMiss] = []
    replay_policy(long, Compact(60, 20), misses=misses)
    assert misses and all(m.tokens > m.budget == 60 for m in misses)
    assert all(m.why for m in misses)
    if sessions:
        misses = []
        replay_policy(sessions[0], Compact(20000, 5000), misses=misses)
        assert all(m.why and m.tokens > 20000 for m in misses)


# --- the cost model ------------------------------------------------------------------------

RATES = {"fake-model": Rates(input=1.0, output=2.0, cache_read=0.1, cache_write=1.25)}


def _events_log(tmp_path: Path) -> Any:
    path = tmp_path / "built.traj"
    path.write_text(json.dumps(_trajectory(6, 2)))
    return import_any(path)


def test_the_cached_prefix_is_the_longest_common_prefix_with_the_previous_request(
        tmp_path: Path) -> None:
    imported = _events_log(tmp_path)
    raw = load_source(replay_policy(imported, None), progress=False)
    costs = cost_replay(raw.events, raw.plans, prices=RATES, model="fake-model",
                        overhead_tokens=100)
    assert costs[0].cached_tokens == 0 and costs[0].cache_write_tokens == costs[0].input_tokens
    for before, after in itertools.pairwise(costs):
        assert after.cached_tokens == before.input_tokens  # append-only: all of it cached
    masked = load_source(replay_policy(imported, LastNObservations(2)), progress=False)
    mcosts = cost_replay(masked.events, masked.plans, prices=RATES, model="fake-model",
                         overhead_tokens=100)
    assert any(a.cached_tokens < b.input_tokens for b, a in itertools.pairwise(mcosts))
    for c in costs + mcosts:  # the price is the table's, exactly
        expected = (c.uncached_tokens * 1.0 + c.cached_tokens * 0.1
                    + c.cache_write_tokens * 1.25 + c.output_tokens * 2.0) / 1e6
        assert c.cost_usd == pytest.approx(expected)


def test_automatic_caching_reads_long_prefixes_and_writes_nothing(tmp_path: Path) -> None:
    raw = load_source(replay_policy(_events_log(tmp_path), None), progress=False)
    auto = cost_replay(raw.events, raw.plans, prices=RATES, model="fake-model",
                       caching="automatic", overhead_tokens=2000)
    assert all(c.cache_write_tokens == 0 for c in auto)
    assert all(c.cached_tokens >= 1024 for c in auto[1:])
    none = cost_replay(raw.events, raw.plans, prices=RATES, model="fake-model",
                       caching="none")
    assert all(c.cached_tokens == 0 == c.cache_write_tokens for c in none)
    with pytest.raises(ValueError, match="caching is one of"):
        cost_replay(raw.events, raw.plans, caching="free")


def test_summarizer_calls_are_requests_with_their_own_tokens_and_cost(tmp_path: Path
                                                                      ) -> None:
    path = tmp_path / "built.traj"
    path.write_text(json.dumps(_trajectory(12, 100)))
    log = load_source(replay_policy(import_any(path), SummarizeEvery(5, 2),
                                    summarizer=lambda events: "short summary"),
                      progress=False)
    costs = cost_replay(log.events, log.plans, prices=RATES, model="fake-model",
                        overhead_tokens=50)
    summaries = [c for c in costs if c.agent == "summarizer"]
    assert summaries and all(c.input_tokens > 50 and c.output_tokens > 0 for c in summaries)
    assert all(c.cost_usd is not None and c.cost_usd > 0 for c in summaries)


def test_the_overhead_estimate_is_stated() -> None:
    assert overhead_estimate(5000, 1200) == (3800, "first request's usage")
    assert overhead_estimate(None, 1200) == (0, "none recorded (0 assumed)")


def test_a_tokenizer_counts_the_surface(tmp_path: Path) -> None:
    raw = load_source(replay_policy(_events_log(tmp_path), None), progress=False)
    costs = cost_replay(raw.events, raw.plans, tokenizer=lambda text: 1)
    assert [c.input_tokens for c in costs] == [5 * c.surface_entries for c in costs]
    assert all(c.cost_usd is None and c.cost_problem == "no price table" for c in costs)


# --- across sessions -----------------------------------------------------------------------

def _folder(tmp_path: Path, sizes: Sequence[int]) -> Path:
    folder = tmp_path / "trajs"
    folder.mkdir(parents=True)
    for i, steps in enumerate(sizes):
        (folder / f"task-{i}.traj").write_text(json.dumps(_trajectory(steps, 1000)))
    return folder


def test_compare_policies_over_a_folder_has_a_row_per_session_and_policy(tmp_path: Path
                                                                         ) -> None:
    from surface_lab.notebook import SessionsComparison, compare_policies

    folder = _folder(tmp_path, [6, 9, 12, 15])
    result = compare_policies(folder, {"raw": None, "masking": LastNObservations(2)},
                              prices=RATES, model="fake-model", recorded=None,
                              overhead_tokens=300, resamples=200)
    assert isinstance(result, SessionsComparison)
    assert len(result.sessions) == 8
    assert set(result.sessions["policy"]) == {"raw", "masking"}
    raw = result.sessions[result.sessions["policy"] == "raw"]
    masked = result.sessions[result.sessions["policy"] == "masking"]
    assert (masked["input_tokens"].to_numpy() < raw["input_tokens"].to_numpy()).all()
    assert (masked["cache_hit_share"].to_numpy() < raw["cache_hit_share"].to_numpy()).all()
    per_session = result.requests.groupby(["session", "policy"])["cost_usd"].sum()
    for row in result.sessions.to_dict("records"):
        assert row["cost_usd"] == pytest.approx(per_session[(row["session"],
                                                             row["policy"])])
    summary = result.summary.set_index(["policy", "measure"])
    assert set(result.summary["measure"]) == {"input_tokens", "cost_usd", "cache_hit_share",
                                              "hidden_then_used", "cost_ratio"}
    for (_, _), row in summary.iterrows():
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    assert summary.loc[("raw", "cost_ratio"), "mean"] == pytest.approx(1.0)
    assert summary.loc[("masking", "input_tokens"), "sessions"] == 4
    assert len(result.figure.axes) == 5  # one panel per measure, an interval per policy
    assert "exposure, not outcome" in result.figure.axes[3].get_title()


def test_the_intervals_are_reproducible_with_a_seed(tmp_path: Path) -> None:
    from surface_lab.notebook import compare_sessions

    few = compare_sessions(_folder(tmp_path / "a", [4, 12]), {"raw": None},
                           prices=RATES, model="fake-model", resamples=300, seed=1)
    again = compare_sessions(_folder(tmp_path / "b", [4, 12]), {"raw": None},
                             prices=RATES, model="fake-model", resamples=300, seed=1)
    assert few.summary.equals(again.summary)
    with pytest.raises(ValueError, match="names the recorded policy"):
        compare_sessions([], {"recorded": None}, recorded="recorded")


def test_a_summarizer_that_calls_a_model_is_costed(tmp_path: Path) -> None:
    from surface_lab.notebook import compare_sessions

    class FakeModel:  # what a summarizer calling a model looks like, without the model
        provider, model = "fake", "fake-model"

        def summarize(self, events: Sequence[Any]) -> list[dict[str, Any]]:
            return [{"type": "text", "text": f"{len(events)} entries summarized"}]

    result = compare_sessions(_folder(tmp_path, [30]), {"summary": SummarizeEvery(21, 10)},
                              summarizer=FakeModel(), prices=RATES, resamples=50)
    row = result.sessions.iloc[0]
    assert row["summarizer_requests"] >= 1
    summaries = result.requests[result.requests["agent"] == "summarizer"]
    assert (summaries["model"] == "fake-model").all() and (summaries["cost_usd"] > 0).all()


def test_a_request_over_budget_is_flagged_in_the_request_rows(tmp_path: Path) -> None:
    from surface_lab.notebook import compare_sessions

    result = compare_sessions(_folder(tmp_path, [8]), {"tight": Compact(30, 10)},
                              resamples=10)
    flagged = result.requests[result.requests["over_budget"] != ""]
    assert len(flagged) == result.sessions.iloc[0]["over_budget_requests"] > 0
    assert flagged["over_budget"].str.contains("over a budget of 30").all()


def test_an_unanswered_call_is_named_as_why_the_budget_is_missed() -> None:
    from builders import assistant_data, ev, tool_data, user

    text = "words " * 20  # 30 estimated tokens an entry: each fits the budget alone
    events = [user(0, text=text),
              ev(1, "assistant/message", assistant_data("a1", text=text, calls=("c1", "c2")),
                 op="append"),
              ev(2, "tool/result", tool_data("c1", text), op="append")]
    for k in range(3, 9):
        events.append(ev(k, "assistant/message", assistant_data(f"a{k}", text=text,
                                                                step=k), op="append"))
    misses: list[BudgetMiss] = []
    replay_policy(events, Compact(120, 20), misses=misses)
    assert misses
    assert "an unanswered tool call (seq 1)" in misses[-1].why


def test_openhands_and_pi_presets_bound_the_context_as_documented(tmp_path: Path) -> None:
    path = tmp_path / "built.traj"
    path.write_text(json.dumps(_trajectory(40, 1000)))
    imported = import_any(path)
    first = message_text(imported.events[next(e["seq"] for e in imported.events
                                              if e["type"] == "user/message")])
    log = load_source(replay_policy(imported, OpenHandsSummarizing(max_size=20,
                                                                   keep_first=2)),
                      progress=False)
    surfaces = request_surfaces(log.events, log.plans)
    assert max(len(r.nodes) for r in surfaces) <= 21
    assert all(message_text(log.events[r.nodes[0]]) == first for r in surfaces)
    assert sum(e["type"] == "compaction/summary" for e in log.events) >= 2
    misses: list[BudgetMiss] = []
    pi = PiCompaction(context_window=600, reserve_tokens=200, keep_recent_tokens=100)
    log = load_source(replay_policy(imported, pi, misses=misses), progress=False)
    costs = [c for c in cost_replay(log.events, log.plans) if c.agent == "main"]
    # every request over pi's budget (600 - 200) is said, with why: here the growing
    # extractive summary itself becomes larger than the budget
    assert sum(c.input_tokens > 400 for c in costs) == len(misses) > 0
    assert any("larger than the budget by itself" in m.why for m in misses)


def test_a_built_corpus_is_compared_session_by_session(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    from surface_lab.corpus import open_corpus, to_parquet
    from surface_lab.notebook import compare_policies

    folder = _folder(tmp_path, [5, 7])
    to_parquet([folder], tmp_path / "corpus")
    corpus = open_corpus(tmp_path / "corpus")
    try:
        result = compare_policies(corpus, {"raw": None}, recorded=None, resamples=20)
    finally:
        corpus.close()
    assert sorted(result.sessions["session"]) == ["task-0.traj", "task-1.traj"]


def test_the_unrecorded_system_prompt_is_estimated_from_a_real_first_request() -> None:
    from surface_lab.notebook import compare_sessions

    folder = SHARED / "agent_logs" / "claude_code"
    mains = sorted(p for p in folder.glob("*.jsonl") if "_subagents_" not in p.name)
    if not mains:
        pytest.skip(f"no Claude Code session in {folder} (set SURFACE_LAB_SHARED)")
    result = compare_sessions(mains[:1], {"raw": None}, recorded="recorded", resamples=10)
    for row in result.sessions.to_dict("records"):
        assert row["overhead_source"] == "first request's usage"
        assert row["overhead_tokens"] > 1000  # Claude Code's system prompt and tools
    first = result.requests[(result.requests["policy"] == "raw")
                            & (result.requests["agent"] == "main")].iloc[0]
    from surface_lab.notebook import tokens_df

    recorded_first = tokens_df(list(import_any(mains[0]).events)).iloc[0]["input_total"]
    assert first["input_tokens"] == recorded_first  # overhead + surface = what was billed
