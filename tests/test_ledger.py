"""The facts ledger and the re-dos built from a log's structure (issue 26 points 1, 2, 4):
hand-built cases of each rule of the definition (tests/data/facts_eval/GUIDELINES.md), and
what must hold on the shared real logs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_logs import require_shared

from surface_lab.analysis.ledger import classify_call, fact_ledger, is_redacted, path_forms
from surface_lab.importers import import_any
from surface_lab.notebook import compaction_audit, facts_df, redos_df

CC = "agent_logs/claude_code/marot__spotter__test_fixtures_transcripts_"
CC1 = CC + "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
CC2 = CC + "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CODEX = ("real_logs/other/"
         "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_codex_small.jsonl")


# ------------------------------------------------------------- a log by hand


class _Log:
    """A small valid log: user and assistant messages, tool calls and their results, and
    a compaction summary replacing a run."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.calls = 0

    def _add(self, kind: str, data: dict[str, Any], op: Any = "append") -> int:
        seq = len(self.events)
        event = {"type": kind, "seq": seq, "time": seq, "data": data}
        if op is not None:
            event["surfaceOp"] = op
        self.events.append(event)
        return seq

    def user(self, text: str) -> int:
        return self._add("user/message", {"id": f"u{len(self.events)}", "role": "user",
                                          "source": {"kind": "user"},
                                          "content": [{"type": "text", "text": text}]})

    def tool(self, name: str, arguments: dict[str, Any], result: str, *,
             error: bool = False, text: str = "") -> tuple[int, int]:
        self.calls += 1
        cid = f"c{self.calls}"
        blocks: list[dict[str, Any]] = ([{"type": "text", "text": text}] if text else [])
        blocks.append({"type": "tool-call", "id": cid, "name": name,
                       "arguments": json.dumps(arguments)})
        asked = self._add("assistant/message", {"message": {
            "id": f"a{len(self.events)}", "role": "assistant", "content": blocks,
            "source": {"kind": "model", "provider": "p", "model": "m"}}})
        self._add("tool/call", {"callId": cid, "name": name,
                                "arguments": json.dumps(arguments)}, op=None)
        data: dict[str, Any] = {"message": {
            "id": f"r{len(self.events)}", "role": "user",
            "source": {"kind": "tool", "callId": cid},
            "content": [{"type": "tool-result", "toolCallId": cid, "isError": error,
                         "content": [{"type": "text", "text": result}]}]}}
        got = self._add("tool/result", data)
        return asked, got

    def compact_text(self, text: str) -> int:
        """A summary that replaces nothing (an earlier one, hidden again later)."""
        return self._add("user/message", {
            "id": f"s{len(self.events)}", "role": "user",
            "source": {"kind": "summary", "plugin": "compact"},
            "content": [{"type": "text", "text": text}]})

    def say(self, text: str) -> int:
        return self._add("assistant/message", {"message": {
            "id": f"a{len(self.events)}", "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "model", "provider": "p", "model": "m"}}})

    def compact(self, start: int, end: int, summary: str) -> int:
        cited = [e["seq"] for e in self.events[start : end + 1] if "surfaceOp" in e]
        seq = self._add("user/message", {
            "id": f"s{len(self.events)}", "role": "user",
            "source": {"kind": "summary", "plugin": "compact"},
            "content": [{"type": "text", "text": summary}]},
            op={"op": "replace", "start": start, "end": end})
        self.events[seq]["sourceEventSeqs"] = cited
        return seq


def _facts(log: _Log) -> dict[int, Any]:
    return {f.seq: f for f in fact_ledger(log.events).facts}


class TestFactsFromStructure:
    def test_each_kind_from_what_the_item_is(self) -> None:
        log = _Log()
        first = log.user("please keep the public API stable")
        _, read = log.tool("Read", {"file_path": "/w/src/app.py"},
                           "1 def f():\n2     } catch (error) {\n3  {:error, :bad} ->")
        _, edit = log.tool("Edit", {"file_path": "/w/src/app.py", "old_string": "a",
                                    "new_string": "b"}, "ok")
        _, test = log.tool("Bash", {"command": "pytest -q", "description": "run tests"},
                           "3 failed, 10 passed\nExit code 1", error=True)
        _, ok = log.tool("Bash", {"command": "git status"}, "nothing to commit")
        _, pwd = log.tool("Bash", {"command": "pwd"}, "/w")
        ack = log.user("thanks")
        trigger = log.user("Keep going")
        end = log.user("https://example.com/issues/88")
        log.compact(first, end, "The user wants a fix.")
        facts = _facts(log)
        assert facts[first].kind == "instruction"
        assert facts[read].kind == "file-read" and facts[read].text == "read /w/src/app.py"
        assert facts[edit].kind == "file-edit"
        assert facts[test].kind == "error" and "3 failed" in facts[test].text
        assert facts[ok].kind == "command"
        assert facts[end].kind == "identifier" and facts[end].text == (
            "https://example.com/issues/88")
        # source code shown by a read is no error; routine steps and acks are no facts
        assert pwd not in facts and ack not in facts and trigger not in facts
        assert all(f.kind != "error" for f in facts.values() if f.seq == read)
        # one tool use, one fact: the call that made it is not a second one
        assert read - 2 not in facts

    def test_redacted_content_is_unmeasurable_never_a_fact(self) -> None:
        log = _Log()
        a = log.user("[REDACTED_OUTPUT len=900 sha=abc]")
        _, b = log.tool("Bash", {"command": "make"}, "[trimmed for fixture]")
        log.compact(a, b, "[trimmed for fixture]")
        facts = _facts(log)
        assert facts[a].kind == facts[b].kind == "unmeasurable"
        assert facts[a].rank is None and facts[a].kept is None
        [row] = compaction_audit(log.events, progress=False).to_dict("records")
        assert row["n_at_risk"] == 0 and row["n_unmeasurable"] == 2
        assert row["redos"] is None or str(row["redos"]) == "<NA>"

    def test_kept_reads_the_surface_after_one_path_relative_or_absolute(self) -> None:
        log = _Log()
        _, a = log.tool("Read", {"file_path": "/home/u/proj/src/app.py"}, "code")
        _, b = log.tool("Read", {"file_path": "/home/u/proj/lib/other.py"}, "code")
        c = log.user("use the staging database for every migration")
        log.compact(a - 2, c, "Read src/app.py. The user said: use the staging database "
                              "for every migration.")
        facts = _facts(log)
        assert facts[a].kept == "yes" and facts[b].kept == "no" and facts[c].kept == "yes"

    def test_the_count_is_true_and_the_texts_are_the_top_ten(self) -> None:
        log = _Log()
        start = log.user("read every file")
        for i in range(14):
            log.tool("Read", {"file_path": f"src/m{i}.py"}, "x")
        log.compact(start, len(log.events) - 1, "done")
        [row] = compaction_audit(log.events, progress=False).to_dict("records")
        assert row["n_at_risk"] == 15 and len(row["facts_at_risk"]) == 10
        assert row["facts_at_risk"][0] == "instruction: read every file"

    def test_what_the_surface_lost_ranks_before_what_it_kept(self) -> None:
        log = _Log()
        said = log.user("use the staging database for every migration")
        _, lost = log.tool("Read", {"file_path": "/w/lib/lost.ex"}, "code")
        _, kept = log.tool("Edit", {"file_path": "/w/lib/kept.ex", "old_string": "a",
                                    "new_string": "b"}, "ok")
        _, failed = log.tool("Bash", {"command": "mix test"}, "3 failed\nExit code 1",
                             error=True)
        log.compact(said, failed, "The user said: use the staging database for every "
                                  "migration. Edited lib/kept.ex.")
        facts = _facts(log)
        order = sorted(facts.values(), key=lambda f: f.rank)
        assert [f.seq for f in order] == [failed, lost, said, kept]  # not kept: by kind

    def test_a_masked_read_keeps_its_path_not_what_it_read(self) -> None:
        log = _Log()
        log.user("look at the config")
        _, read = log.tool("Read", {"file_path": "/w/config/test.exs"}, "config :x")
        data = json.loads(json.dumps(log.events[read]["data"]))  # the result, masked
        data["message"]["content"][0]["content"] = [{"type": "text", "text": "[hidden]"}]
        log._add("tool/result", data, op={"op": "replace", "start": read, "end": read})
        log.events[-1]["sourceEventSeqs"] = [read]
        assert _facts(log)[read].kept == "partly"

    def test_a_path_named_by_its_file_name_alone_is_partly_kept(self) -> None:
        log = _Log()
        start = log.user("fix the live view")
        _, read = log.tool("Read", {"file_path": "/w/lib/web/live/session_live.ex"}, "x")
        _, other = log.tool("Read", {"file_path": "/w/lib/web/README"}, "x")
        log.compact(start, other, "Looked at session_live.ex and the readme.")
        facts = _facts(log)
        assert facts[read].kept == "partly" and facts[other].kept == "no"

    def test_calls_by_agent(self) -> None:
        assert classify_call("shell", {"command": ["bash", "-lc", "sed -n '1,80p' a/b.py"]}
                             ).kind == "file-read"
        assert classify_call("bash", {"command": "cat src/x.py 2>/dev/null"}).target == (
            "src/x.py")
        assert classify_call("str_replace_editor", {"command": "view", "path": "/r/a.py"}
                             ).kind == "file-read"
        assert classify_call("bash", {"command": "str_replace_editor create /r/n.py"}
                             ).kind == "file-create"
        patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch"
        assert classify_call("apply_patch", {"input": patch}).target == "src/a.py"
        assert classify_call("write", {"path": "n.md", "content": "x"}).kind == "file-create"
        assert path_forms("/home/u/p/src/a.py")[0] == "src/a.py"
        assert is_redacted("[REDACTED_OUTPUT len=12 sha=ab]") and not is_redacted("[1, 2]")


class TestFactKinds:
    def test_a_file_written_whole_is_created_once_then_edited(self) -> None:
        log = _Log()
        start = log.user("write the migration")
        _, new = log.tool("Write", {"file_path": "/w/m/001.exs", "content": "a"}, "created")
        _, again = log.tool("Write", {"file_path": "m/001.exs", "content": "b"}, "updated")
        log.tool("Read", {"file_path": "/w/notes.md"}, "File does not exist.", error=True)
        _, notes = log.tool("Write", {"file_path": "/w/notes.md", "content": "n"},
                            "File created successfully at: /w/notes.md")
        _, heredoc = log.tool("bash", {"command": "cat <<'EOF' > t.py\nx = 1\nEOF"}, "")
        _, read = log.tool("bash", {"command": "cat t.py"}, "x = 1")
        _, rewrite = log.tool("bash", {"command": "cat <<'EOF' > t.py\nx = 2\nEOF"}, "")
        log.compact(start, rewrite, "Wrote the migration.")
        facts = _facts(log)
        assert facts[new].kind == "file-create" and facts[again].kind == "file-edit"
        assert facts[again].text == "edited m/001.exs"
        assert facts[notes].kind == "file-create"  # the tool says it created it
        assert facts[heredoc].kind == "file-create" and facts[heredoc].text == "created t.py"
        assert facts[read].kind == "file-read" and facts[rewrite].kind == "file-edit"

    @pytest.mark.parametrize(("output", "kind"), [
        ("Traceback (most recent call last):\n  File \"r.py\", line 3\nAttributeError: x",
         "error"),
        ("<returncode>1</returncode>\n<output>\nboom\n</output>", "error"),
        ("<returncode>0</returncode>\n<output>\nCaught exception: ValueError: bad\n</output>",
         "error"),
        ("ValueError: TimeSeries object is invalid", "error"),
        ("Your proposed edit has introduced new syntax error(s).\nE999 SyntaxError", "error"),
        ("3 warnings\nall good", "command"),
        ("<returncode>0</returncode>\n<output>\nAlt: 89.9 deg\n</output>", "command"),
    ])
    def test_a_command_fails_by_its_status_or_its_output(self, output: str, kind: str
                                                         ) -> None:
        log = _Log()
        start = log.user("reproduce the bug")
        _, run = log.tool("bash", {"command": "python r.py"}, output)
        log.compact(start, run, "Ran it.")
        assert _facts(log)[run].kind == kind

    def test_a_search_that_found_nothing_is_no_error_a_refused_edit_is(self) -> None:
        log = _Log()
        start = log.user("find the class")
        _, grep = log.tool("bash", {"command": 'grep "class T" core.py'},
                           "<returncode>1</returncode>\n<output>\n</output>")
        _, refused = log.tool("bash", {"command": "edit 287:295\n)\nend_of_edit"},
                              "Your proposed edit has introduced new syntax error(s).")
        _, missed = log.tool("str_replace_editor", {"command": "str_replace", "path": "/r/a.py",
                                                    "old_str": "x", "new_str": "y"},
                             "No replacement was performed, old_str `x` did not appear "
                             "verbatim in /r/a.py.")
        _, absent = log.tool("str_replace_editor", {"command": "view", "path": "/r/b.py"},
                             "The path /r/b.py does not exist. Please provide a valid path.")
        _, read = log.tool("str_replace_editor", {"command": "view", "path": "/r/c.py"},
                           "1 # the file does not exist yet? it does")
        log.compact(start, read, "Searched.")
        facts = _facts(log)
        assert facts[grep].kind == "command" and facts[refused].kind == "error"
        assert facts[missed].kind == "error" and facts[absent].kind == "error"
        assert facts[read].kind == "file-read"  # (the file's own words are no failure)

    def test_an_earlier_summary_with_the_users_request_is_an_instruction(self) -> None:
        log = _Log()
        first = log.compact_text("<compacted-summary>\n- user: List the files\n"
                                 "- assistant: Found 2 files.\n</compacted-summary>")
        other = log.compact_text("<summary>\nhello.py prints a greeting.\n</summary>")
        log.user("go on with the listing please")
        log.compact(first, len(log.events) - 1, "Listed.")
        facts = _facts(log)
        assert facts[first].kind == "instruction" and facts[other].kind == "other"

    def test_a_terminal_observation_is_its_commands_result(self) -> None:
        log = _Log()
        start = log.user("create hello.txt")
        log.say('{"analysis": "ready", "commands": [{"keystrokes": '
                '"echo \'test1\' > test_dir/file1.txt\\n", "duration": 0.1}]}')
        seen = log._add("context/message", {
            "id": "o1", "role": "user", "source": {"kind": "harness", "harness": "atif",
                                                    "origin": "observation"},
            "content": [{"type": "text", "text": "New Terminal Output:\n\n# echo 'test1' > "
                                                 "test_dir/file1.txt\n"}]})
        log.compact(start, seen, "Created test_dir/file1.txt.")
        fact = _facts(log)[seen]
        assert (fact.kind, fact.text, fact.kept) == (
            "file-create", "created test_dir/file1.txt", "yes")

    def test_swe_agent_commands(self) -> None:
        log = _Log()
        start = log.user("fix the handler")
        _, made = log.tool("bash", {"command": "create reproduce_bug.py"},
                           "[File: /r/reproduce_bug.py (1 lines total)]\n1:")
        _, edit = log.tool("bash", {"command": "edit 1:1\nimport numpy\nend_of_edit"},
                           "[File: /r/reproduce_bug.py (2 lines total)]\n1:import numpy")
        log.compact(start, edit, "Made the script.")
        facts = _facts(log)
        assert facts[made].kind == "file-create"
        assert (facts[edit].kind, facts[edit].text) == ("file-edit", "edited /r/reproduce_bug.py")

    def test_the_users_answer_to_a_plan_is_a_decision(self) -> None:
        log = _Log()
        start = log.user("plan the renderer change")
        _, plan = log.tool("ExitPlanMode", {"plan": "# Plan"}, "User has approved your plan.")
        log.compact(start, plan, "Planned.")
        assert _facts(log)[plan].kind == "decision"

    def test_an_empty_answer_to_a_query_is_no_fact_a_state_change_is(self) -> None:
        log = _Log()
        start = log.user("set up the folders")
        _, listing = log.tool("shell", {"command": ["bash", "-lc", "rg -n TODO"]}, "")
        _, made = log.tool("bash", {"command": "mkdir test_dir"}, "")
        log.compact(start, made, "Set up.")
        facts = _facts(log)
        assert listing not in facts and facts[made].kind == "command"

    def test_calls_that_never_ran_or_only_switch_mode_and_repeated_failures(self) -> None:
        log = _Log()
        start = log.user("look for the fixtures")
        _, sibling = log.tool("Bash", {"command": "find . -name '*.jsonl'"},
                              "<tool_use_error>Sibling tool call errored</tool_use_error>",
                              error=True)
        _, mode = log.tool("EnterPlanMode", {}, "Entered plan mode.")
        _, refused = log.tool("bash", {"command": "edit 2:3\n)\nend_of_edit"},
                              "Your proposed edit has introduced new syntax error(s).")
        _, again = log.tool("bash", {"command": "edit 2:3\n)\nend_of_edit"},
                            "Your proposed edit has introduced new syntax error(s).")
        _, revert = log.tool("bash", {"command": "rm t.py && sed -i '/t/d' pkg/__init__.py"},
                             "")
        log.compact(start, revert, "Looked.")
        facts = _facts(log)
        assert sibling not in facts and mode not in facts
        assert facts[refused].kind == "error" and again not in facts  # rule 5
        assert (facts[revert].kind, facts[revert].text) == ("file-edit",
                                                            "edited pkg/__init__.py")

    def test_a_background_command_has_its_fact_on_its_outcome(self) -> None:
        log = _Log()
        start = log.user("run the tests")
        _, notice = log.tool("Bash", {"command": "mix test", "run_in_background": True},
                             "Command running in background with ID: bd0a. Output is being "
                             "written to: /tmp/c/tasks/bd0a.output")
        _, tail = log.tool("Bash", {"command": "tail -30 /tmp/c/tasks/bd0a.output"},
                           "Compiling 8 files")
        _, poll = log.tool("TaskOutput", {"task_id": "bd0a", "block": True},
                           "<status>running</status>\n<output>Compiling</output>")
        _, done = log.tool("TaskOutput", {"task_id": "bd0a", "block": True},
                           "<status>completed</status>\n<exit_code>0</exit_code>\n"
                           "73 tests, 0 failures")
        log.compact(start, done, "Ran the tests.")
        facts = _facts(log)
        assert notice not in facts and tail not in facts and poll not in facts
        assert facts[done].kind == "command"

    def test_the_same_call_again_with_another_result_is_another_fact(self) -> None:
        log = _Log()
        start = log.user("fix the view")
        _, first = log.tool("Read", {"file_path": "lib/v.ex"}, "old")
        log.tool("Edit", {"file_path": "lib/v.ex", "old_string": "a", "new_string": "b"}, "ok")
        _, second = log.tool("Read", {"file_path": "lib/v.ex"}, "new")
        _, third = log.tool("Read", {"file_path": "lib/v.ex"}, "new")
        log.compact(start, third, "Fixed.")
        facts = _facts(log)
        assert first in facts and second in facts and third not in facts


class TestRedos:
    def _read_then_compact(self) -> tuple[_Log, int]:
        log = _Log()
        start = log.user("fix the exporter")
        _, read = log.tool("Read", {"file_path": "src/csv.py"}, "def export(): ...")
        _, run = log.tool("Bash", {"command": "cd /w && pytest -q", "description": "a"},
                          "1 failed")
        log.compact(start, run, "Working on the exporter.")
        return log, read

    def test_a_re_read_and_a_re_run_link_to_the_hidden_result(self) -> None:
        log, read = self._read_then_compact()
        again, _ = log.tool("Read", {"file_path": "/w/src/csv.py"}, "def export(): ...")
        rerun, _ = log.tool("Bash", {"command": "pytest -q", "description": "other words"},
                            "1 failed")
        redos = {r.kind: r for r in fact_ledger(log.events).redos}
        assert redos["re-read"].seq == again and redos["re-read"].hidden_seq == read
        assert redos["re-run"].seq == rerun  # matched on the command, not its description
        assert _facts(log)[read].needed

    def test_an_edit_of_a_hidden_read_is_new_work_and_a_change_ends_re_reads(self) -> None:
        log, _ = self._read_then_compact()
        log.tool("Edit", {"file_path": "src/csv.py", "old_string": "a", "new_string": "b"},
                 "ok")
        log.tool("Read", {"file_path": "src/csv.py"}, "changed")
        log.tool("Bash", {"command": "pytest -q"}, "all passed")
        assert fact_ledger(log.events).redos == []

    def test_redirections_are_never_targets(self) -> None:
        log = _Log()
        start = log.user("look around")
        log.tool("Bash", {"command": "ls src 2>/dev/null"}, "a.py")
        end = log.user("ok go on and check it please")
        log.compact(start, end, "looked")
        log.tool("Bash", {"command": "grep -r foo lib 2>/dev/null"}, "none")
        assert fact_ledger(log.events).redos == []

    def test_a_question_again_but_not_a_closing_offer(self) -> None:
        log = _Log()
        log.say("Which database should the migration use?")
        answer = log.user("use the staging database for the migration")
        log.compact(0, answer, "Migrating.")
        log.say("Would you like me to also add tests?")
        asked = log.say("Which database should the migration use, staging or prod?")
        [redo] = fact_ledger(log.events).redos
        assert (redo.kind, redo.seq, redo.hidden_seq) == ("re-ask", asked, answer)

    def test_a_question_whose_words_a_long_task_holds_is_no_re_ask(self) -> None:
        log = _Log()
        task = log.user("Build the exporter: read every module under src, write the CSV and "
                        "JSON writers, keep the public interface stable, add tests for quoting, "
                        "escaping, empty rows and unicode, document the options in the readme, "
                        "and make sure the command line tool reports errors with the file name")
        log.compact(task, task, "Task: the exporter.")
        log.say("Should the writers keep the public interface?")
        assert fact_ledger(log.events).redos == []

    def test_the_user_re_instructing_after_a_compaction(self) -> None:
        log = _Log()
        log._add("compaction/start", {"compactionId": "k"}, op=None)
        instruction = log.user("never edit the generated files under build/")
        _, read = log.tool("Read", {"file_path": "docs/plan.md"}, "the plan")
        log.compact(1, read, "Working.")
        log._add("compaction/end", {"compactionId": "k"}, op=None)
        lost = log.user("you forgot docs/plan.md, read it again")
        again = log.user("Never edit the generated files under build/ please")
        log.user("remember to run the linter before you commit")  # a new instruction
        log.user("After compaction")  # naming the compaction says nothing was lost
        kinds = {(r.seq, r.hidden_seq) for r in fact_ledger(log.events).redos
                 if r.kind == "re-instruct"}
        assert kinds == {(lost, read), (again, instruction)}


class TestRedoNeedsNothingChanged:
    """A re-read or re-run recovers a hidden item only when what it shows cannot have
    changed since: the definition's "the file did not change since that read"."""

    def test_an_edit_hidden_after_the_read_ends_re_reads_also_of_a_repeated_read(
            self) -> None:
        log = _Log()
        start = log.user("fix the test setup")
        log.tool("Read", {"file_path": "/w/test/a_test.exs", "limit": 15}, "1 setup")
        log.tool("Read", {"file_path": "/w/test/a_test.exs", "limit": 15}, "1 setup")
        _, edit = log.tool("Edit", {"file_path": "/w/test/a_test.exs", "old_string": "a",
                                    "new_string": "b"}, "ok")
        log.compact(start, edit, "Fixed the setup.")
        log.tool("Read", {"file_path": "/w/test/a_test.exs", "limit": 15}, "1 setup")
        assert fact_ledger(log.events).redos == []

    def test_an_edit_on_the_surface_before_the_replace_ends_re_reads(self) -> None:
        log = _Log()
        start = log.user("look at the module")
        _, read = log.tool("Read", {"file_path": "lib/m.ex"}, "defmodule M")
        log.compact(start, read, "Read lib/m.ex.")
        log.tool("Edit", {"file_path": "/w/lib/m.ex", "old_string": "a", "new_string": "b"},
                 "ok")
        log.tool("Read", {"file_path": "/w/lib/m.ex"}, "defmodule M")
        assert fact_ledger(log.events).redos == []

    @pytest.mark.parametrize("change", [
        "cat <<'EOF' > core.py\nx = 1\nEOF",  # written whole by a here-document
        "sed -i 's/a/b/' core.py",
        "git checkout core.py",  # a work-tree wide change
        "git stash",
        "ruff check --fix .",  # a fixer or formatter rewrites files it does not name
        "black .",
    ])
    def test_a_shell_command_that_writes_the_file_ends_re_reads(self, change: str) -> None:
        log = _Log()
        start = log.user("look at core")
        _, read = log.tool("bash", {"command": "cat core.py"}, "x = 0")
        log.compact(start, read, "Looked.")
        log.tool("bash", {"command": change}, "")
        log.tool("bash", {"command": "cat core.py"}, "x = 1")
        assert fact_ledger(log.events).redos == []

    def test_a_script_the_agent_wrote_may_change_any_file(self) -> None:
        log = _Log()
        start = log.user("look at core")
        _, read = log.tool("bash", {"command": "cat core.py"}, "x = 0")
        log.tool("bash", {"command": "cat <<'EOF' > fix.py\nopen('core.py', 'w')\nEOF"},
                 "")
        log.compact(start, read + 3, "Looked, wrote fix.py.")
        log.tool("bash", {"command": "python fix.py"}, "")
        log.tool("bash", {"command": "cat core.py"}, "x = 1")
        assert fact_ledger(log.events).redos == []

    def test_an_install_changes_the_manifest_only(self) -> None:
        log = _Log()
        start = log.user("add highlighting")
        _, manifest = log.tool("Read", {"file_path": "assets/package.json"}, "{}")
        _, build = log.tool("Read", {"file_path": "assets/build.js"}, "esbuild")
        log.tool("Bash", {"command": "cd assets && npm install highlight.js 2>&1 | tail -5"},
                 "found 0 vulnerabilities")
        log.compact(start, build + 3, "Installed highlight.js.")
        log.tool("Read", {"file_path": "assets/package.json"}, "{hl}")
        again, _ = log.tool("Read", {"file_path": "assets/build.js"}, "esbuild")
        assert [(r.seq, r.hidden_seq) for r in fact_ledger(log.events).redos] == [
            (again, build)]
        assert manifest not in {r.hidden_seq for r in fact_ledger(log.events).redos}

    @pytest.mark.parametrize(("hidden", "later", "redo"), [
        ({}, {}, True),
        ({}, {"offset": 1, "limit": 2000}, True),  # the default whole-file read, spelt out
        ({"offset": 100, "limit": 40}, {"offset": 110, "limit": 40}, True),
        ({}, {"offset": 10, "limit": 20}, False),  # a narrow part of a whole file read
        ({"limit": 10}, {}, False),  # a whole file after ten lines of it: mostly new
        ({"offset": 1, "limit": 20}, {"offset": 200, "limit": 20}, False),  # a new range
    ])
    def test_the_later_read_must_cover_mostly_the_hidden_lines(
            self, hidden: dict[str, int], later: dict[str, int], redo: bool) -> None:
        log = _Log()
        start = log.user("read the view")
        _, read = log.tool("Read", {"file_path": "lib/view.ex", **hidden}, "code")
        log.compact(start, read, "Read it.")
        log.tool("Read", {"file_path": "lib/view.ex", **later}, "code")
        assert bool(fact_ledger(log.events).redos) is redo

    def test_sed_ranges_and_a_grep_of_the_file(self) -> None:
        log = _Log()
        start = log.user("find the name logic")
        _, read = log.tool("bash", {"command": "nl -ba t.py | sed -n '1240,1250p'"}, "code")
        log.compact(start, read, "Read it.")
        log.tool("bash", {"command": "nl -ba t.py | grep -C 5 'Structured ndarray'"}, "x")
        assert fact_ledger(log.events).redos == []  # a search, not those lines again
        again, _ = log.tool("bash", {"command": "sed -n '1238,1250p' t.py"}, "code")
        assert [r.seq for r in fact_ledger(log.events).redos] == [again]

    def test_a_re_run_after_any_change_of_code_is_verification(self) -> None:
        log = _Log()
        start = log.user("reproduce it")
        _, run = log.tool("bash", {"command": "python reproduce.py"}, "13234 arcsec")
        log.tool("bash", {"command": "cat <<'EOF' > transforms.py\nx = 1\nEOF"}, "")
        log.compact(start, run + 3, "Reproduced; rewrote transforms.py.")
        log.tool("bash", {"command": "python reproduce.py"}, "13234 arcsec")
        assert fact_ledger(log.events).redos == []

    def test_a_part_of_a_hidden_compound_query_run_alone(self) -> None:
        log = _Log()
        start = log.user("implement the epic")
        _, shown = log.tool("Bash", {"command": 'bd show t.5 2>&1; echo "==="; bd show t.7 '
                                                '2>&1', "description": "all tasks"}, "t.7: X")
        log.tool("Bash", {"command": "bd close t.5"}, "closed")  # another bead changes
        log.tool("Edit", {"file_path": "lib/a.ex", "old_string": "a", "new_string": "b"},
                 "ok")  # a file changes: a bead query does not depend on it
        log.compact(start, shown + 6, "Closed t.5.")
        again, _ = log.tool("Bash", {"command": "bd show t.7 2>&1", "description": "t.7"},
                            "t.7: X")
        log.tool("Bash", {"command": "git commit -m 'x'"}, "1 file changed")
        [redo] = fact_ledger(log.events).redos
        assert (redo.kind, redo.seq, redo.hidden_seq) == ("re-run", again, shown)

    def test_a_read_piped_into_a_script_is_a_computation_not_a_re_read(self) -> None:
        log = _Log()
        start = log.user("look at the fixture")
        _, read = log.tool("Read", {"file_path": "/w/t/sub.jsonl", "limit": 5}, "1 {}")
        log.compact(start, read, "Read t/sub.jsonl.")
        log.tool("Bash", {"command": "head -5 t/sub.jsonl | python3 -c 'import sys'"}, "{}")
        log.tool("Bash", {"command": "head -c 500 t/sub.jsonl"}, "{}")
        assert fact_ledger(log.events).redos == []
        assert classify_call("bash", {"command": "cat a.py | wc -l"}).kind == "command"
        assert classify_call("bash", {"command": "cat a.py | grep x"}).kind == "file-read"

    def test_a_history_query_after_a_commit_is_no_re_run(self) -> None:
        log = _Log()
        start = log.user("commit it")
        _, shown = log.tool("Bash", {"command": "git log -5 --oneline"}, "abc first")
        log.compact(start, shown, "Looked at the history.")
        log.tool("Bash", {"command": "git commit -m 'fix'"}, "1 file changed")
        log.tool("Bash", {"command": "git log -5 --oneline"}, "def fix")
        assert fact_ledger(log.events).redos == []

    def test_a_search_repeated_after_a_change_is_no_repeat_call_a_fetch_is(self) -> None:
        log = _Log()
        start = log.user("find the callers")
        _, grep = log.tool("Grep", {"pattern": "parseDate"}, "src/dates.ts:14")
        _, fetch = log.tool("WebFetch", {"url": "https://example.com/spec"}, "the spec")
        log.compact(start, fetch, "Searched.")
        log.tool("Edit", {"file_path": "src/api.ts", "old_string": "a", "new_string": "b"},
                 "ok")
        log.tool("Grep", {"pattern": "parseDate"}, "src/dates.ts:14\nsrc/api.ts:80")
        again, _ = log.tool("WebFetch", {"url": "https://example.com/spec"}, "the spec")
        [redo] = fact_ledger(log.events).redos
        assert (redo.kind, redo.seq, redo.hidden_seq) == ("repeat-call", again, fetch)
        assert grep not in {r.hidden_seq for r in fact_ledger(log.events).redos}

    def test_only_a_call_that_asks_for_something_is_repeated(self) -> None:
        log = _Log()
        start = log.user("plan the work")
        todo = {"todos": [{"content": "fix the exporter", "status": "pending"}]}
        log.tool("TodoWrite", todo, "Todos have been modified successfully")
        _, issue = log.tool("mcp__github__get_issue", {"number": 12}, "title: exporter")
        log.compact(start, issue, "Planned.")
        log.tool("TodoWrite", todo, "Todos have been modified successfully")
        again, _ = log.tool("mcp__github__get_issue", {"number": 12}, "title: exporter")
        assert [(r.kind, r.seq) for r in fact_ledger(log.events).redos] == [
            ("repeat-call", again)]

    def test_a_question_beside_a_tool_call_is_not_put_to_the_user(self) -> None:
        log = _Log()
        task = log.user("why does the reproduction still show the large error at 10 km")
        log.compact(task, task, "Task: the ITRS error.")
        log.tool("bash", {"command": "python r.py"}, "x",
                 text="Why does the reproduction still show the large error at 10 km?")
        assert fact_ledger(log.events).redos == []


class TestFramesAndReport:
    def test_frames_keep_their_schema(self) -> None:
        log, _ = TestRedos()._read_then_compact()
        frame = facts_df(log.events, progress=False)
        assert list(frame.columns) == ["replace_seq", "replace_kind", "seq", "kind", "text",
                                       "kept", "needed", "redo_seqs", "rank"]
        assert list(redos_df(log.events, progress=False).columns)[:3] == [
            "seq", "kind", "replace_seq"]

    def test_the_report_shows_each_fact_and_the_summary_beside_the_hidden(
            self, tmp_path: Path) -> None:
        from surface_lab.notebook import audit_report

        log, read = TestRedos()._read_then_compact()
        log.tool("Read", {"file_path": "src/csv.py"}, "again")
        audit_report(log.events, tmp_path, name="hand")
        html = next(tmp_path.glob("*.html")).read_text()
        assert "<th>kind</th><th>fact</th><th>hidden entry</th><th>kept</th>" in html
        replace = max(int(s) for s in re.findall(r'id="seq-(\d+)"', html))
        assert f'href="#seq-{replace}-hid-{read}"' in html
        assert f'id="seq-{replace}-hid-{read}"' in html
        assert "read src/csv.py" in html and "yes (seq" in html
        assert "class='sl-beside'" in html


class TestRealLogs:
    def test_claude_code_reads_are_never_errors_of_their_code(self) -> None:
        shared = require_shared(CC1, CC2)
        for name in (CC1, CC2):
            ledger = fact_ledger(list(import_any(shared / name).events))
            kinds = {f.kind for f in ledger.facts}
            assert {"instruction", "file-read", "file-edit", "command"} <= kinds
            for f in ledger.facts:
                if f.kind == "error":  # an error is a failed run, not a word in code
                    assert not re.search(r"catch \(error\)|\{:error,", f.text)
            for r in ledger.redos:  # a re-do is never an edit or write
                assert r.tool not in ("Edit", "Write", "MultiEdit", "NotebookEdit")
                assert r.detail != "/dev/null"

    def test_a_redacted_codex_rollout_is_unmeasurable(self) -> None:
        shared = require_shared(CODEX)
        ledger = fact_ledger(list(import_any(shared / CODEX).events))
        for f in ledger.facts:
            if f.kind != "unmeasurable":
                assert "[REDACTED" not in f.text and f.text != "[trimmed for fixture]"
        assert sum(f.kind == "unmeasurable" for f in ledger.facts) > 50
        assert any(ledger.unmeasurable_redos.values())


@pytest.mark.parametrize("name", ["long-compaction.jsonl", "pruned-tool-results.jsonl"])
def test_the_samples_audit_with_true_counts(name: str) -> None:
    root = Path(__file__).resolve().parents[1] / "sample_logs"
    audit = compaction_audit(root / name, progress=False)
    frame = facts_df(root / name, progress=False)
    facts = frame[frame["kind"] != "unmeasurable"]
    assert list(audit["n_at_risk"]) == [int((facts["replace_seq"] == s).sum())
                                        for s in audit["seq"]]


class TestSurfaceMatchingShortcuts:
    """The kept-side checks work on each entry once and find a word without listing the
    surface's words; they must answer as the plain reading of the joined surface does."""

    # (Greek sigmas in three forms and a dotted capital I: lowering is context-sensitive)
    TEXTS_CHARS = (*"abcxyz019_./- \n\t\u00a0\u03a3\u03c3\u03c2A\u0130\u00df,:;!?()",
                   "ver", "path/to.py", "\u0391\u03a3")
    TEXTS = st.lists(st.sampled_from(TEXTS_CHARS), max_size=40).map("".join)

    LINES = st.lists(st.sampled_from([
        "Error: x", "ValueError: bad", "error[E0308]: m", "ERROR x", "FAILED t", "FAIL x",
        "fatal: no", "E   assert", "3 failed", "2 errors", "1 failure", "x: command not found",
        "No such file or directory", "Permission denied", "Traceback (most recent call last):",
        "Caught exception: y", "Raised an error", "introduced new syntax error", "ok", "E",
        "  E  x", "Exception", "E\n\nx", "warning: a", "Failed", "passed", ""]), max_size=6)

    PATHS = st.lists(st.sampled_from(["a", "b", "src", ".", "", "x.py"]), min_size=1,
                     max_size=5).map("/".join)

    @settings(max_examples=500, deadline=None)
    @given(PATHS, st.lists(st.sampled_from(["a/b", "src/x.py", "/w/a", "b/x.py", "a//b",
                                            "./src", " ", "x.py"]), max_size=4).map(" ".join))
    def test_a_path_is_found_by_its_forms_that_do_not_hold_the_shortest(
            self, path: str, text: str) -> None:
        from surface_lab.analysis.ledger import _Kept, _Parts

        parts = _Parts({1: text})
        kept = _Kept([1], parts, lambda nodes: [])
        forms = path_forms(path)
        plain = "yes" if any(f in text for f in forms) else None
        assert (kept.path(path) == "yes") == (plain == "yes")

    @settings(max_examples=500, deadline=None)
    @given(LINES)
    def test_the_quick_test_before_the_error_pattern_changes_no_answer(
            self, lines: list[str]) -> None:
        from surface_lab.analysis.ledger import _ERROR_LINE, error_line

        text = "\n".join(lines)
        m = _ERROR_LINE.search(text)
        assert error_line(text) == (m.group(0).strip()[:200] if m else None)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(TEXTS, max_size=6), st.data())
    def test_spaced_and_words_are_those_of_the_joined_surface(
            self, parts: list[str], data: Any) -> None:
        from surface_lab.analysis.ledger import _WORD, _has_word, _Kept, _Parts

        kept = _Kept(list(range(len(parts))), _Parts(dict(enumerate(parts))), [])
        joined = "\n".join(parts).lower()
        assert kept.spaced == " ".join(joined.split())
        words = set(_WORD.findall(joined))
        asked = data.draw(st.lists(st.sampled_from(
            [*sorted(words), "abcx", "path/to.py", "xyz0", "ver."])))
        for word in asked:
            assert _has_word(kept.spaced, word) == (word in words)

    @settings(max_examples=300, deadline=None)
    @given(TEXTS, st.integers(min_value=1, max_value=12))
    def test_a_shortened_text_is_the_head_of_the_whole_spaced_text(
            self, text: str, n: int) -> None:
        from surface_lab.analysis.ledger import _short

        spaced = " ".join(text.split())
        assert _short(text, n) == (spaced if len(spaced) <= n else spaced[: n - 1] + "…")

    # exit-code wordings in odd cases and the letters re.I folds (U+0131, U+0130, U+212A, U+017F)
    EXITS = st.lists(st.sampled_from([
        "exit code 1", "EXIT STATUS: 2", "Exited with code 3", "exit_code>4", "returncode=5",
        "ReturnCode 6", "Process exited with code 7", "ex\u0131t code 8", "ex\u0130t code 9",
        "EX\u0130T status 1", "retur ncode 1", "exi t code", "x", "it", "code 1", "\n", " ",
        "e", "\u212a", "\u017f", "-1", "0"]), max_size=12).map("".join)

    @settings(max_examples=500, deadline=None)
    @given(EXITS, st.integers(min_value=0, max_value=900))
    def test_the_quick_test_before_the_exit_pattern_changes_no_answer(
            self, text: str, pad: int) -> None:
        from surface_lab.analysis.ledger import _EXIT, _exit_code

        for whole in (text, "y" * pad + text, text + "y" * pad, text + "y" * pad + text):
            m = _EXIT.search(whole[:400]) or (_EXIT.search(whole[-400:]) if len(whole) > 400
                                              else None)
            assert _exit_code(whole) == (int(m.group(1)) if m else None)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(["", " ", "a", "b c", "\t", "\u00a0"]), max_size=8),
           st.sampled_from(["\n", "\r", "\r\n", "\x0b", "\u2028", "\x1c"]),
           st.integers(min_value=0, max_value=2100))
    def test_the_first_line_is_looked_for_in_the_opening_first(
            self, lines: list[str], end: str, pad: int) -> None:
        from surface_lab.analysis.ledger import _first_line

        for text in (end.join(lines), " " * pad + end.join(lines),
                     end * (pad // 2) + end.join(lines), "x" * pad + end + end.join(lines),
                     " " * (pad - 1) + "\r\nq" if pad else "\r\nq"):
            plain = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
            assert _first_line(text) == plain

    @settings(max_examples=400, deadline=None)
    @given(st.lists(TEXTS, max_size=6), TEXTS)
    def test_said_stops_counting_words_once_the_band_is_known(
            self, parts: list[str], text: str) -> None:
        from surface_lab.analysis.ledger import _Kept, _Parts

        kept = _Kept(list(range(len(parts))), _Parts(dict(enumerate(parts))), [])
        low = " ".join(text.lower().split())
        share = kept.share(low)
        plain = ("yes" if low and low[:200] in kept.spaced else
                 "yes" if share >= 0.8 else "partly" if share >= 0.4 else "no")
        assert kept.said(text) == plain

    def test_the_ascii_whitespace_is_every_ascii_character_split_cuts_at(self) -> None:
        from surface_lab.analysis.ledger import ASCII_WHITESPACE

        every = "".join(c for c in map(chr, range(128)) if c.isspace() and c != " ")
        assert every == ASCII_WHITESPACE

    @settings(max_examples=500, deadline=None)
    @given(st.lists(st.sampled_from([*TEXTS_CHARS, "\u2028", "\u3000", "\x1c", "\x85", "\r\n",
                                     "    ", "\u0130", "X", "\x0b\x0c", "\x1d\x1f", "AbC",
                                     "  \t "]), max_size=60).map("".join))
    def test_spaced_lower_is_the_lowered_text_split_and_joined(self, text: str) -> None:
        from surface_lab.analysis.ledger import spaced_lower

        assert spaced_lower(text) == " ".join(text.lower().split())

    @settings(max_examples=500, deadline=None)
    @given(st.text(st.sampled_from([chr(c) for c in range(128)]), max_size=80))
    def test_spaced_lower_of_an_ascii_text(self, text: str) -> None:
        from surface_lab.analysis.ledger import spaced_lower

        assert spaced_lower(text) == " ".join(text.lower().split())

    @settings(max_examples=400, deadline=None)
    @given(st.lists(TEXTS, max_size=6), st.lists(TEXTS, max_size=4), TEXTS)
    def test_a_text_is_looked_for_in_each_entry_as_in_the_joined_surface(
            self, parts: list[str], calls: list[str], needle: str) -> None:
        from surface_lab.analysis.ledger import _Kept, _Parts

        kept = _Kept(list(range(len(parts))), _Parts(dict(enumerate(parts))),
                     lambda nodes: list(calls))
        joined = "\n".join(parts)
        for probe in (needle, needle[:3], joined[1:4], joined[2:], ""):
            assert kept.holds(probe) == (probe in joined)
            assert kept.calls_hold(probe) == (probe in "\n".join(calls))
        assert kept.text == joined and kept.calls == "\n".join(calls)
        assert kept.holds(needle) == (needle in joined)
