"""The one schema of every frame: column names, dtypes and meanings, as data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import pandas as pd

from ..analysis import events as event_columns
from ..events import KNOWN_TYPES

__all__ = ["SCHEMAS", "Column", "empty_frame", "frame_from_columns", "schema_table"]

TYPES = sorted(KNOWN_TYPES)
ROLES = list(event_columns.ROLES)
OPS = list(event_columns.OPS)
STATES = ["not yet", "visible", "replacement", "shadowed"]
KINDS = ["compaction", "prune", "rollback", "replace"]
EVIDENCE = ["repeated-call", "same-target", "re-asked"]  # the old evidence rules
REDOS = ["re-read", "re-run", "repeat-call", "re-ask", "re-instruct"]
FACT_KINDS = ["instruction", "decision", "identifier", "file-read", "file-edit",
              "file-create", "command", "error", "finding", "other", "unmeasurable"]
KEPT = ["yes", "partly", "no"]
USAGE_SOURCES = ["message", "chunk"]
TOKEN_SOURCES = ["usage", "tokenizer", "estimate"]
FLOAT = "float64"


@dataclass(frozen=True)
class Column:
    name: str
    dtype: Any
    doc: str


def _cat(categories: list[str]) -> pd.CategoricalDtype:
    return pd.CategoricalDtype(categories, ordered=False)


INT, NINT, BOOL, TEXT, OBJ = "int64", "Int64", "bool", pd.StringDtype(), "object"
TS: Final = "datetime64[ms, UTC]"

_EVENT = [
    Column("seq", INT, "position in the log (the true order)"),
    Column("type", _cat(TYPES), "event type (unknown types are added as categories)"),
    Column("time", INT, "epoch milliseconds as logged"),
    Column("ts", TS, "time as a UTC timestamp"),
    Column("turn", NINT, "data.turn when present"),
    Column("step", NINT, "data.step when present"),
    Column("line", NINT, "physical line in the JSONL file (header = 1)"),
]
_SIZES = [
    Column("chars", NINT, "characters of the message text (surface types)"),
    Column("tokens", NINT, "estimated tokens of the message text (4 characters a token)"),
]

SCHEMAS: dict[str, list[Column]] = {
    "events": [
        *_EVENT,
        Column("surface_op", _cat(OPS), "append or replace (surface types only)"),
        Column("replace_start", NINT, "surfaceOp.start of a replace"),
        Column("replace_end", NINT, "surfaceOp.end of a replace"),
        Column("source_event_seqs", OBJ, "list of cited seqs, or None when not recorded"),
        Column("on_surface", BOOL, "the event is on the surface at the end of the log"),
        Column("shadowed_by", NINT, "seq of the replace that shadowed it"),
        Column("role", _cat(ROLES), "message role (surface types)"),
        Column("message_id", TEXT, "message id (surface types)"),
        Column("text", TEXT, "the first 200 characters of the message text"),
        *_SIZES,
        Column("data_bytes", INT, "size of the event's data as compact JSON"),
    ],
    "surface": [
        Column("position", INT, "index on the surface"),
        Column("seq", INT, "the entry's event seq"),
        Column("type", _cat(TYPES), "event type"),
        Column("role", _cat(ROLES), "message role"),
        Column("surface_op", _cat(OPS), "how the entry got there"),
        Column("is_replacement", BOOL, "the entry replaced earlier entries"),
        Column("message_id", TEXT, "message id"),
        Column("text", TEXT, "the first 200 characters of the message text"),
        *_SIZES,
    ],
    "replacements": [
        Column("seq", INT, "the replacing event"),
        Column("type", _cat(TYPES), "its type"),
        Column("kind", _cat(KINDS), "compaction (a summary), prune (a tool-result rewrite), "
                                    "rollback (an imported undo) or another replace"),
        Column("start", INT, "surfaceOp.start"),
        Column("end", INT, "surfaceOp.end"),
        Column("shadowed_seqs", OBJ, "list of the seqs it shadowed, in surface order"),
        Column("shadowed_types", OBJ, "list of their types"),
        Column("n_shadowed", INT, "how many entries it shadowed"),
        Column("restored_seqs", OBJ, "shadowed seqs its bracket re-appended as copies "
                                     "(imported logs): moved, not lost"),
        Column("removed_seqs", OBJ, "shadowed seqs that really left the model's view"),
        Column("chars_before", INT, "characters of the shadowed entries"),
        Column("tokens_before", INT, "estimated tokens of the shadowed entries"),
        Column("chars_after", INT, "characters of what took the run's place: the "
                                   "replacement, and the entries a widened import's "
                                   "bracket appended after it"),
        Column("tokens_after", INT, "estimated tokens of the same"),
        Column("plugin", TEXT, "source.plugin of the replacement, when known"),
        Column("compaction_id", TEXT, "compactionId, when known"),
        Column("shadows_replacement", BOOL, "it shadowed an earlier replacement"),
        Column("recorded_matches", "boolean", "the recorded shadowedSeqs equal the fold's "
                                              "(NA when nothing was recorded)"),
    ],
    "messages": [
        Column("position", INT, "index among the messages the model sees"),
        Column("seq", INT, "the event it comes from"),
        Column("role", _cat(ROLES), "message role"),
        Column("source_kind", TEXT, "source.kind (user, model, tool, plugin, ...)"),
        Column("message_id", TEXT, "message id"),
        Column("block_types", OBJ, "list of the content block types"),
        Column("text", TEXT, "the whole message text"),
        *_SIZES,
    ],
    "lost_evidence": [
        Column("seq", INT, "the assistant message whose action shows hidden content was "
                           "needed"),
        Column("kind", _cat(EVIDENCE), "repeated-call (same tool, same arguments as a call "
                                       "whose result was hidden), same-target (same tool "
                                       "on a file or command a hidden result was about) "
                                       "or re-asked (a question naming something a "
                                       "hidden user or context message said)"),
        Column("replace_seq", INT, "the replace that hid the earlier content"),
        Column("replace_kind", _cat(KINDS), "its kind, as in replacements_df"),
        Column("hidden_seq", INT, "the hidden event (tool result or user message)"),
        Column("turn", NINT, "data.turn of the acting message"),
        Column("tool", TEXT, "the tool called (NA for a question)"),
        Column("arguments", TEXT, "the call's arguments, or the question"),
        Column("detail", TEXT, "what matched: the arguments, the shared target or the "
                               "mention"),
        Column("events_after", INT, "events between the replace and the action"),
    ],
    "facts": [
        Column("replace_seq", INT, "the replace that hid the item"),
        Column("replace_kind", _cat(KINDS), "its kind, as in replacements_df"),
        Column("seq", INT, "the hidden item carrying the fact"),
        Column("kind", _cat(FACT_KINDS), "instruction, decision or identifier (a user "
                                         "message), file-read, file-edit, file-create, "
                                         "command or error (a tool use, from its call's "
                                         "arguments and its result's status), other (an "
                                         "earlier summary hidden again), or unmeasurable "
                                         "(redacted or encrypted: never a fact)"),
        Column("text", TEXT, "the fact in a few words (read <path>, <command> -> outcome, "
                             "the user's words)"),
        Column("kept", _cat(KEPT), "whether the surface after the replace keeps it: yes, "
                                   "partly (the path or command but not the content or "
                                   "outcome), no; NA when unmeasurable"),
        Column("needed", BOOL, "a later action re-did it (redos_df)"),
        Column("redo_seqs", OBJ, "the acting events of those re-dos"),
        Column("rank", NINT, "its rank within the replace (1 first; NA when "
                             "unmeasurable)"),
    ],
    "redos": [
        Column("seq", INT, "the acting event (assistant or user message)"),
        Column("kind", _cat(REDOS), "re-read (a file whose read result was hidden, not "
                                    "changed since), re-run (the same command), "
                                    "repeat-call (the same tool and arguments), re-ask "
                                    "(a question a hidden user message answered), "
                                    "re-instruct (the user restating a hidden "
                                    "instruction or saying something was lost, after a "
                                    "recorded compaction)"),
        Column("replace_seq", INT, "the replace that hid the item"),
        Column("replace_kind", _cat(KINDS), "its kind, as in replacements_df"),
        Column("hidden_seq", INT, "the hidden item it recovers"),
        Column("tool", TEXT, "the tool called (NA for a message)"),
        Column("arguments", TEXT, "the call's arguments, or the message"),
        Column("detail", TEXT, "what matched: the path, the command, the restated text"),
        Column("call_id", TEXT, "the tool call's id (NA for a message)"),
    ],
    "tokens": [
        Column("seq", INT, "the request's first assistant message (one row per model "
                           "request on the imported path: a step)"),
        Column("last_seq", INT, "its last assistant message (whose usage is the request's)"),
        Column("turn", NINT, "data.turn"),
        Column("step", NINT, "data.step"),
        Column("request_id", TEXT, "responseId:requestId where recorded (Claude Code's "
                                   "message.id:requestId, as in requests_df), else the "
                                   "response id, else turn.step"),
        Column("model", TEXT, "the model that answered"),
        Column("surface_entries", INT, "entries on the surface the request was sent with"),
        Column("estimated_tokens", INT, "their tokens by the 4-characters estimate"),
        Column("tokenizer_tokens", NINT, "their tokens by the tokenizer= given (NA without)"),
        Column("input_uncached", NINT, "recorded input not read from or written to the "
                                       "cache (usage)"),
        Column("cache_read", NINT, "recorded cache-read input tokens"),
        Column("cache_write", NINT, "recorded cache-write input tokens"),
        Column("output", NINT, "recorded output tokens (reasoning included)"),
        Column("reasoning", NINT, "recorded reasoning tokens, part of output"),
        Column("input_total", NINT, "input_uncached + cache_read + cache_write "
                                    "(OpenTelemetry gen_ai.usage.input_tokens)"),
        Column("usage_source", _cat(USAGE_SOURCES), "where the usage came from: the "
                                                    "message's usage field or a usage "
                                                    "chunk it cites (NA: none recorded)"),
        Column("input_tokens", INT, "the best figure for the request's input"),
        Column("input_source", _cat(TOKEN_SOURCES), "which source input_tokens came from: "
                                                    "usage (input_total), tokenizer or "
                                                    "estimate (of the surface text)"),
    ],
    "requests": [
        Column("request_id", TEXT, "the source's id of the request (Claude Code "
                                   "message.id:requestId; see docs/tokens.md)"),
        Column("file", TEXT, "the file that records it (a subagent file for a subagent)"),
        Column("line", NINT, "the line of its final record (JSONL sources)"),
        Column("time", NINT, "when it was made, epoch milliseconds (NA: not recorded)"),
        Column("model", TEXT, "the model, as the source names it"),
        Column("provider", TEXT, "the provider, as the source names it"),
        Column("agent", TEXT, "main, subagent, summarizer (the compaction's own "
                              "request) or unitemized (a total the source states "
                              "beyond its itemised requests)"),
        Column("on_path", "boolean", "the imported log shows it (NA: a total, or the "
                                     "import failed)"),
        Column("calls", NINT, "model calls the row stands for (1; the agent's count for "
                              "a total)"),
        Column("input_uncached", NINT, "input billed at the input rate"),
        Column("cache_read", NINT, "input read from the cache"),
        Column("cache_write", NINT, "input written to the cache (all TTLs)"),
        Column("cache_write_5m", NINT, "of which 5-minute writes, where recorded"),
        Column("cache_write_1h", NINT, "of which 1-hour writes, where recorded"),
        Column("output", NINT, "output tokens (reasoning included)"),
        Column("reasoning", NINT, "reasoning tokens, part of output, where recorded"),
        Column("input_total", NINT, "all input (OpenTelemetry gen_ai.usage.input_tokens)"),
        Column("tokens_source", TEXT, "usage (the provider's figures), usage-total (the "
                                      "file's stated total less its itemised requests) "
                                      "or agent-count (the agent's own count)"),
        Column("cost_usd", FLOAT, "the request's price (NaN: unpriced, see cost_problem)"),
        Column("priced_model", TEXT, "the model the price table priced"),
        Column("cost_source", TEXT, "the price table (genai-prices VERSION, override, "
                                    "user table)"),
        Column("cost_problem", TEXT, "why there is no price"),
        Column("recorded_cost_usd", FLOAT, "the dollars the source itself states"),
    ],
    "policies": [
        Column("policy", TEXT, "the policy's name (recorded: the log as it happened)"),
        Column("events", INT, "events in its log"),
        Column("requests", INT, "model requests (assistant messages)"),
        Column("replaces", INT, "replaces committed"),
        Column("compactions", INT, "replaces by a summary"),
        Column("prunes", INT, "tool-result rewrites (prunes and masks)"),
        Column("failed_compactions", INT, "compactions that ended with an error"),
        Column("peak_tokens", INT, "the largest surface a request was sent with"),
        Column("mean_tokens", FLOAT, "the mean surface a request was sent with"),
        Column("total_tokens", INT, "the surfaces of all requests added up (input cost)"),
        Column("tokens_source", TEXT, "tokenizer or estimate: how the surfaces were counted"),
        Column("recorded_input_tokens", NINT, "the usage's input tokens added up (the "
                                              "recorded policy only; NA when not logged)"),
        Column("facts_at_risk", INT, "facts at risk over all replaces (compaction_audit)"),
        Column("lost_evidence", INT, "actions showing hidden content was needed "
                                     "(lost_evidence_df)"),
    ],
    "policy_steps": [
        Column("policy", TEXT, "the policy's name"),
        Column("request", INT, "the model request's index (the same actions in every "
                               "policy)"),
        Column("seq", INT, "the assistant message of that request in the policy's log"),
        Column("tokens", INT, "the surface the request was sent with"),
        Column("tokens_source", _cat(TOKEN_SOURCES), "tokenizer or estimate"),
    ],
    "policy_sessions": [
        Column("session", TEXT, "the session (its file name, or its id)"),
        Column("policy", TEXT, "the policy's name (recorded: the log as it happened)"),
        Column("requests", INT, "model requests of the agent (the recorded actions)"),
        Column("summarizer_requests", INT, "summarizer calls (committed compactions)"),
        Column("input_tokens", INT, "input over all requests, summarizer calls included "
                                    "(overhead + surface)"),
        Column("cached_tokens", INT, "input read from the cache (longest common prefix "
                                     "with the previous request)"),
        Column("cache_write_tokens", INT, "input written to the cache (anthropic caching)"),
        Column("output_tokens", INT, "output over all requests (recorded usage, else "
                                     "the estimate)"),
        Column("cache_hit_share", FLOAT, "cached_tokens / input_tokens"),
        Column("cost_usd", FLOAT, "dollars (NaN: some request unpriced)"),
        Column("peak_tokens", INT, "the largest input a request was sent with"),
        Column("replaces", INT, "replaces the policy committed"),
        Column("hidden_then_used", INT, "exposure, not outcome: actions after a replace "
                                        "that repeat or revisit what it hid "
                                        "(lost_evidence_df)"),
        Column("over_budget_requests", INT, "requests the policy sent over its own budget"),
        Column("overhead_tokens", INT, "system prompt and tools per request (estimated)"),
        Column("overhead_source", TEXT, "how overhead_tokens was found"),
        Column("tokens_source", TEXT, "tokenizer or estimate: how surfaces were counted"),
        Column("caching", TEXT, "the caching rule: anthropic, automatic or none"),
    ],
    "policy_summary": [
        Column("policy", TEXT, "the policy's name"),
        Column("measure", TEXT, "a policy_sessions column, or cost_ratio (cost_usd over "
                                "the baseline's, session by session)"),
        Column("sessions", INT, "sessions with a value"),
        Column("mean", FLOAT, "the mean over sessions"),
        Column("ci_low", FLOAT, "bootstrap 95% interval, low end (sessions resampled)"),
        Column("ci_high", FLOAT, "bootstrap 95% interval, high end"),
    ],
    "policy_requests": [
        Column("session", TEXT, "the session"),
        Column("policy", TEXT, "the policy's name"),
        Column("request", INT, "the request's index in the session (summarizer calls "
                               "after the agent's)"),
        Column("seq", INT, "its first assistant message (or compaction/summary) seq"),
        Column("agent", TEXT, "main or summarizer"),
        Column("model", TEXT, "the model priced"),
        Column("input_tokens", INT, "all input of the request"),
        Column("cached_tokens", INT, "read from the cache"),
        Column("cache_write_tokens", INT, "written to the cache"),
        Column("uncached_tokens", INT, "billed at the input rate"),
        Column("output_tokens", INT, "output"),
        Column("output_source", TEXT, "usage or estimate"),
        Column("cost_usd", FLOAT, "dollars (NaN: unpriced, see cost_problem)"),
        Column("cost_problem", TEXT, "why there is no price"),
        Column("over_budget", TEXT, "why the request is over the policy's budget (empty: "
                                    "it is not)"),
    ],
    "visibility": [
        Column("step", INT, "events applied so far (step k = just after event k)"),
        Column("seq", INT, "a surface entry"),
        Column("state", _cat(STATES), "not yet, visible, replacement (a visible "
                                      "replacement) or shadowed"),
    ],
}


def _with_extra_categories(dtype: Any, values: pd.Series) -> Any:
    if isinstance(dtype, pd.CategoricalDtype):
        extra = sorted(set(values.dropna()) - set(dtype.categories))
        if extra:
            return pd.CategoricalDtype([*dtype.categories, *extra], ordered=False)
    return dtype


def frame_from_columns(name: str, data: dict[str, Any]) -> pd.DataFrame:
    """A frame of schema `name`, every dtype as documented, from columns given as lists
    (values of any kind) or as arrays already typed (kept as they are, so nothing is
    converted value by value)."""
    out: dict[str, Any] = {}
    for column in SCHEMAS[name]:
        values = data.get(column.name, [])
        if column.dtype == TS:
            millis = pd.Series(values, dtype="int64")
            out[column.name] = pd.to_datetime(millis, unit="ms", utc=True).astype(TS)
            continue
        series = (pd.Series(values, dtype=OBJ) if isinstance(values, list)
                  else pd.Series(values, copy=False))
        dtype: Any = (_with_extra_categories(column.dtype, series) if series.dtype == OBJ
                      else column.dtype)
        out[column.name] = (series if column.dtype == OBJ or series.dtype == dtype
                            else series.astype(dtype))
    return pd.DataFrame(out, copy=False)


def empty_frame(name: str) -> pd.DataFrame:
    return frame_from_columns(name, {c.name: [] for c in SCHEMAS[name]})


def schema_table() -> pd.DataFrame:
    """Every frame's columns, dtypes and meanings, as a frame; `shown as` is the word the
    command and the report use for the figure (`surface_lab.glossary`), where it has
    one."""
    from ..glossary import TERMS

    shown = {t.column: t.label for t in TERMS if t.column}
    rows = [(frame, c.name, str(c.dtype), c.doc,
             shown.get(c.name, "") if frame in ("replacements", "audit") else "")
            for frame, columns in SCHEMAS.items() for c in columns]
    return pd.DataFrame(rows, columns=["frame", "column", "dtype", "meaning", "shown as"])
