"""The field's questions about compaction, as SQL over a corpus (`corpus sql`, or
`Corpus.sql`): each is a read-only SELECT over the corpus's tables, shown in
docs/corpus.md and run by notebooks/06_corpus.ipynb. Plain strings: importing this
module imports nothing.

An *action* is a `tool/call` event; an *edit* is a call of a tool whose name is one of
`EDIT_TOOLS` (Claude Code's Edit, Write, MultiEdit, NotebookEdit; the surface agent's
write; SWE-agent's edit and create; Codex's and OpenHands' apply_patch and
str_replace_editor...). A *cold start* is a session's beginning; a compaction's window
runs from it to the next compaction of the session (or the session's end)."""

from __future__ import annotations

__all__ = ["EDIT_TOOLS", "QUESTIONS"]

EDIT_TOOLS = ("edit", "write", "multiedit", "notebookedit", "create", "insert",
              "apply_patch", "str_replace_editor", "str_replace_based_edit_tool",
              "edit_file", "write_file", "replace", "append")

_EDITS = ", ".join(f"'{name}'" for name in EDIT_TOOLS)

# the compactions with their times and windows (the next compaction's seq and time)
_COMPACTIONS = """compactions as (
    select r.session_key, r.seq, r.plugin, r.compaction_id, r.tokens_before,
           r.tokens_after, e.time,
           lead(r.seq) over w as next_seq, lead(e.time) over w as next_time
    from replaces r join events e on e.session_key = r.session_key and e.seq = r.seq
    where r.kind = 'compaction'
    window w as (partition by r.session_key order by r.seq))"""

QUESTIONS: dict[str, str] = {
    # tokens and dollars of each compaction's window: the main agent's requests from
    # the compaction to the next one, and the summarizer's own request where the log
    # names it (`compaction:<id>`)
    "tokens and dollars per compaction": f"""
with {_COMPACTIONS}
select c.session_key, c.seq, c.plugin,
       count(q.request_id) as requests,
       sum(q.input_total) as input_tokens, sum(q.cache_read) as cache_read,
       sum(q.output) as output_tokens, sum(q.cost_usd) as usd,
       any_value(s.input_total) as summarizer_input, any_value(s.output) as summarizer_output,
       any_value(s.cost_usd) as summarizer_usd
from compactions c
left join requests q on q.session_key = c.session_key and q.agent = 'main'
     and q.time >= c.time and (c.next_time is null or q.time < c.next_time)
left join requests s on s.session_key = c.session_key
     and s.request_id = 'compaction:' || c.compaction_id
group by all order by c.session_key, c.seq""",
    # actions (tool calls) before the first edit: after each compaction, within its
    # window, against the same count from a session's cold start
    "actions before the first edit": f"""
with {_COMPACTIONS},
calls as (select session_key, seq, lower(tool) in ({_EDITS}) as is_edit
          from events where type = 'tool/call'),
starts as (
    select session_key, -1 as seq, 'cold start' as after,
           (select min(seq) from compactions c where c.session_key = s.session_key)
               as until
    from sessions s
    union all
    select session_key, seq, 'compaction', next_seq from compactions),
firsts as (
    select t.session_key, t.seq, t.after,
           min(k.seq) filter (where k.is_edit) as first_edit
    from starts t join calls k on k.session_key = t.session_key and k.seq > t.seq
         and (t.until is null or k.seq < t.until)
    group by all),
counts as (
    select f.session_key, f.after, count(k.seq) as actions
    from firsts f join calls k on k.session_key = f.session_key and k.seq > f.seq
         and k.seq < f.first_edit
    where f.first_edit is not null
    group by f.session_key, f.seq, f.after
    union all  -- an edit as the first action: no action before it
    select f.session_key, f.after, 0 from firsts f
    where f.first_edit is not null and not exists (
        select 1 from calls k where k.session_key = f.session_key and k.seq > f.seq
        and k.seq < f.first_edit))
select after, count(*) as windows_with_an_edit, median(actions) as median_actions,
       avg(actions) as mean_actions, max(actions) as max_actions
from counts group by after order by after""",
    # how fast the context regrows after a compaction: the input of the main agent's
    # last request before it (the threshold it was compacted at), the first after, and
    # how many requests and minutes until a request's input is back to 90% of it
    "context regrowth after a compaction": """
with {compactions},
q as (select session_key, time, input_total from requests
      where agent = 'main' and on_path and input_total is not null and time is not null),
t as (
    select c.*,
           (select arg_max(q.input_total, q.time) from q
            where q.session_key = c.session_key and q.time < c.time) as threshold,
           (select arg_min(q.input_total, q.time) from q
            where q.session_key = c.session_key and q.time >= c.time
            and (c.next_time is null or q.time < c.next_time)) as input_after
    from compactions c),
back as (
    select t.*,
           (select min(q.time) from q where q.session_key = t.session_key
            and q.time >= t.time and q.input_total >= 0.9 * t.threshold
            and (t.next_time is null or q.time < t.next_time)) as regrown_at
    from t where t.threshold is not null)
select session_key, seq, plugin, threshold, input_after,
       round(1 - input_after / threshold, 3) as share_freed,
       regrown_at is not null as regrew,
       case when regrown_at is not null then (
           select count(*) from q where q.session_key = back.session_key
           and q.time >= back.time and q.time <= back.regrown_at) end as requests_to_regrow,
       round((regrown_at - time) / 60000, 1) as minutes_to_regrow
from back order by session_key, seq""".replace("{compactions}", _COMPACTIONS),
    # re-dos (lost evidence: the agent re-read, re-ran or re-asked what a replace hid)
    # per compaction, by agent (the log's format) and policy (the replace's plugin)
    "re-dos per compaction by agent and policy": """
select s.format as agent, coalesce(r.plugin, r.kind) as policy,
       count(distinct r.seq || r.session_key) as compactions,
       count(l.seq) as redos,
       round(count(l.seq) / count(distinct r.seq || r.session_key), 2)
           as redos_per_compaction
from replaces r join sessions s using (session_key)
left join lost_evidence l on l.session_key = r.session_key and l.replace_seq = r.seq
where r.kind = 'compaction'
group by all order by agent, policy""",
}
