"""The facts ledger and the re-dos, built from a log's structure (issue 26 points 1, 2).

A fact at risk is read off what each hidden item *is*, not off words in its text: a user
message with content is an instruction, decision or identifier; a tool result is a file
read, edit or creation (the path from its call's arguments) or a command with its outcome
(the result's error status, its exit code, the error lines of a command's output, never
of a file's content); redacted or encrypted items are unmeasurable. Each row says whether
the surface after the replace keeps the fact, whether a later action needed it (a re-do
linked to it) and its rank.

A re-do is an action after a replace that gets back a hidden item: a re-read of a file
whose read result was hidden (not an edit of it), the same command re-run, the same call
repeated, a question asked again, or the user re-instructing after a compaction. See
`docs/facts.md`. Pandas-free; `notebook.facts_df` is the frame."""

from __future__ import annotations

import json
import re
import shlex
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import accumulate, repeat
from operator import contains
from typing import Any, cast

import msgspec

from ..events import message_of
from ..jsonvalue import loads
from ..reading.sequences import LogEvents, decode_line
from ..surface import PlanList, apply_plan
from .brackets import brackets, settle_points
from .facts import author_from
from .source import LogData

__all__ = [
    "FACT_KINDS",
    "REDO_KINDS",
    "Fact",
    "Ledger",
    "Redo",
    "ToolUse",
    "classify_call",
    "fact_ledger",
    "is_redacted",
]

FACT_KINDS = ("instruction", "decision", "identifier", "file-read", "file-edit",
              "file-create", "command", "error", "finding", "other")
REDO_KINDS = ("re-read", "re-run", "repeat-call", "re-ask", "re-instruct")

# Rank weights by kind: what the user said first, then failures, then changes made.
WEIGHTS = {"instruction": 5.0, "decision": 4.5, "identifier": 4.0, "error": 4.0,
           "file-edit": 3.5, "file-create": 3.5, "other": 3.0, "command": 2.5,
           "file-read": 2.0, "finding": 1.5}
TOP = 10  # facts_at_risk in the audit: the top this many texts

READ_TOOLS = frozenset({"read", "read_file", "view", "notebookread", "open", "view_file",
                        "cat"})
EDIT_TOOLS = frozenset({"edit", "multiedit", "notebookedit", "str_replace", "edit_file",
                        "replace", "insert", "apply_patch", "patch"})
CREATE_TOOLS = frozenset({"write", "create", "write_file", "create_file"})
SEARCH_TOOLS = frozenset({"grep", "glob", "search", "find", "ls", "list", "websearch",
                          "webfetch", "fetch", "find_file", "search_dir", "search_file"})
_ASKING = re.compile(r"search|fetch|list|get|query|find|read|view|show|lookup|grep|glob|"
                     r"browse|open")


@lru_cache(maxsize=1 << 10)
def _asks(tool: str) -> bool:
    """Whether a (non-shell) tool asks for something (a search, a fetch, a listing, a
    lookup), so that calling it again with the same arguments can get a hidden answer
    back; a tool that acts (a to-do list, a subagent, a mode switch) cannot."""
    low = tool.lower()
    return low in SEARCH_TOOLS or (bool(_ASKING.search(low)) and "todo" not in low)


# searches of the work tree: a repeat after a file changed may find something else
TREE_SEARCHES = frozenset({"grep", "glob", "search", "find", "ls", "list", "find_file",
                           "search_dir", "search_file"})
SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "run", "execute",
                         "terminal", "run_command", "cmd", "execute_bash"})
PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "filename", "file")
ROUTINE = frozenset({"pwd", "cd", "clear", "sleep", "true", "echo", "wait"})
READ_COMMANDS = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat"})

_REDACTED = re.compile(r"\[(?:REDACTED[A-Z_]*[^\]]*|trimmed for fixture|image[^\]]*|"
                       r"encrypted[^\]]*)\]", re.I)
_PLACEHOLDER_WORDS = ("REDACTED", "redacted", "Redacted", "trimmed", "encrypted", "image",
                      "Image", "ENCRYPTED")
_IMAGE = re.compile(r"\{'type': '(?:input_)?image'[^}]*\}")
_ACK = re.compile(r"(?:ok(?:ay)?|k|thanks?(?: you)?|thx|ty|great|cool|nice|perfect|"
                  r"got it|good|sounds good)[.! ]*", re.I)
_TRIGGER = re.compile(r"(?:start|continue|go on|keep going|carry on|second attempt|"
                      r"third attempt|begin|next|resume)[.! ]*", re.I)
_DECISION = re.compile(r"(?:yes|no|yep|nope|sure|go ahead|do it|approved?|proceed|"
                       r"option \w+|\d+|[a-d]|stop|don'?t|cancel)\b", re.I)
_URL = re.compile(r"https?://[^\s<>\"'`)\]]*[^\s<>\"'`)\].,;:!?]")
_EXIT = re.compile(r"(?:exit(?:ed)?(?: with)? (?:code|status)|exit_code>?|returncode>?|"
                   r"Process exited with code)[\s:=]*(-?\d+)", re.I)
_ERROR_LINE = re.compile(
    r"^(?:Traceback \(most recent call last\):?|(?:\w+\.)*\w*(?:Error|Exception)\b.*|"
    r"(?:Caught|Raised|Got) (?:an? )?(?:exception|error)\b.*|.*introduced new syntax error.*|"
    r"error(?:\[\w+\])?:.*|ERROR\b.*|FAILED\b.*|FAIL\b.*|fatal:.*|E\s{2,}.*|"
    r".*\b[1-9]\d* (?:failed|errors?|failures?)\b.*|.*command not found.*|"
    r".*No such file or directory.*|.*Permission denied.*)$", re.M)
# an error line that says the command failed (not a warning of a run that worked): failing
# tests, a traceback or an exception printed as the outcome, a refused edit
_FAILURE = re.compile(
    r"\b[1-9]\d* (?:failed|errors?|failures?)\b|Traceback|FAILED|^E\s{2,}|fatal:|"
    r"^(?:\w+\.)*\w+(?:Error|Exception): |^(?:Caught|Raised|Got) (?:an? )?(?:exception|error)|"
    r"introduced new syntax error", re.M)
# an edit the tool refused (SWE-agent's lint check, a string not found)
_REFUSED = re.compile(r"introduced new syntax error|edit (?:was|has) not been applied|"
                      r"^<tool_use_error>|String to replace not found|"
                      r"No replacement was performed", re.M | re.I)
# a read that found no file (the tool said so in its first line, without an error status)
_MISSING = re.compile(r"(?:The path \S+ does not exist|\S+: \S+: (?:No such file or directory|"
                      r"Is a directory)|File does not exist|[Ff]ile not found|Error\b[^\n]*"
                      r"(?:not found|does not exist))")
# commands whose exit status 1 is an answer, not a failure (no match; a difference; false)
_NO_MATCH = re.compile(r"(?:e|f)?grep\b|rg\b|ag\b|diff\b|cmp\b|test\b|\[\s")
_REJECTED = ("The user doesn't want to proceed", "[Request interrupted by user")
_LOST = re.compile(
    r"\b(?:you (?:forgot|lost|missed|never (?:read|looked|saw|opened)|didn'?t (?:read|"
    r"look)|no longer (?:have|know|remember))|(?:as )?I (?:already )?(?:said|told you|"
    r"mentioned|asked)|lost (?:the )?context|read (?:it|the file) "
    r"(?:whole|fully|in full|again))", re.I)
_OFFER = re.compile(r"^(?:would you like|want me to|do you want|shall i|should i (?:also|"
                    r"go ahead)|let me know|anything else|is there anything|can i help)",
                    re.I)
_HARNESS = re.compile(r"<(?:command-name|command-message|local-command-stdout|"
                      r"local-command-caveat|system-reminder)>|Caveat: The messages below")
_WORD = re.compile(r"[a-z0-9_./-]{4,}")
_CD = re.compile(r"^\s*cd\s+\S+\s*(?:&&|;)\s*")
WRITE_COMMANDS = frozenset({"cat", "echo", "printf", "tee"})
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
# an output redirection's target (`> f`, `>> f`, `2> f`, `&> f`; not `>&2`)
_OUT = re.compile(r"(?:^|(?<=[\s;&|]))(?:\d|&)?>>?(?!&)\s*([^\s;&|<>()]+)")
_REDIRECT = re.compile(r"\d?>>?\s*\S+|<\s*\S+|2>&1")


@dataclass(frozen=True)
class ToolUse:
    """What a tool call did, read from its name and arguments."""

    kind: str  # file-read, file-edit, file-create, command, or "" (routine)
    tool: str
    target: str  # the path, or the command (normalised), or the call's canonical args
    detail: str = ""  # a read's range, a command's text
    key: str = ""  # tool + canonical arguments
    command: str = ""  # a shell call's command line, as given


@dataclass
class Fact:
    """One row of the ledger: a hidden item of a replace and the fact it carries."""

    replace_seq: int
    seq: int
    kind: str  # a FACT_KINDS name, or "unmeasurable"
    text: str
    kept: str | None = None  # yes, partly, no (None when unmeasurable)
    needed: bool = False
    redo_seqs: list[int] = field(default_factory=list)
    rank: int | None = None
    score: float = 0.0


@dataclass(frozen=True)
class Redo:
    """One action after a replace that gets back one of its hidden items."""

    seq: int  # the acting event (assistant message or user message)
    kind: str
    replace_seq: int
    hidden_seq: int
    tool: str | None
    arguments: str | None
    detail: str
    call_id: str | None = None


@dataclass
class Ledger:
    """The ledger of a log: facts (one per replace and hidden item carrying one, plus
    the unmeasurable items), the re-dos, and each replace's counts."""

    facts: list[Fact]
    redos: list[Redo]
    unmeasurable_redos: dict[int, bool]  # replace seq -> its actions cannot be judged

    def by_replace(self) -> dict[int, list[Fact]]:
        out: dict[int, list[Fact]] = {}
        for fact in self.facts:
            out.setdefault(fact.replace_seq, []).append(fact)
        return out


# ------------------------------------------------------------------ reading calls


def _args(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _canonical(arguments: Any) -> str:
    value = _args(arguments)
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _command_of(args: Any) -> str | None:
    if isinstance(args, str):
        return args
    if not isinstance(args, Mapping):
        return None
    for key in ("command", "cmd", "script", "code", "input"):
        value = args.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[1] in ("-lc", "-c"):
                return str(value[2])
            return " ".join(value)
        if isinstance(value, str):
            return value
    return None


@lru_cache(maxsize=1 << 14)
def normal_command(command: str) -> str:
    """A command as compared for re-runs: stripped, a leading `cd X &&` taken off,
    whitespace collapsed."""
    command = command.strip()
    while True:
        stripped = _CD.sub("", command, count=1)
        if stripped == command:
            break
        command = stripped
    return " ".join(command.split())


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=False, posix=True)
    except ValueError:
        return command.split()


def _patch_paths(text: str) -> tuple[str, list[str]]:
    found = re.findall(r"^\*\*\* (Add|Update|Delete) File: (.+)$", text, re.M)
    kind = "file-create" if found and all(k == "Add" for k, _ in found) else "file-edit"
    return kind, [p.strip() for _, p in found]


def _shell_use(tool: str, command: str, key: str) -> ToolUse:
    """A shell command: a file read (cat, sed -n, head, ...), an edit (sed -i, a patch),
    a file written whole (`cat <<EOF > f`, `echo ... > f`, `tee f`), a routine step, or a
    command; with the command line itself (what it changes is read from it)."""
    return replace(_shell_kind(tool, command, key), command=command)


PAGERS = frozenset({"head", "tail", "sed", "grep", "nl", "less", "more", "cat"})


def _piped_to_viewers(command: str) -> bool:
    """Whether a read's output goes only through programs that show part of it (head,
    sed -n, grep, ...): piped into a script or a counter, the file is computed on, not
    read again."""
    stages = [p for p in command_parts(command.split("&&")[0].split(";")[0])][1:]
    return all(_words(st)[:1] and _words(st)[0].rsplit("/", 1)[-1] in PAGERS
               for st in stages)


def _in_place(command: str) -> str | None:
    """The file a part of a command line edits in place (`sed -i`, `perl -pi`), if any."""
    if "-i" not in command and "-pi" not in command:
        return None
    for part in command_parts(command):
        words = _words(_REDIRECT.sub(" ", part.split("\n", 1)[0]))
        if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in ("sed", "perl") and any(
                w.startswith(("-i", "-pi")) for w in words):
            files = [w for w in words[1:] if not w.startswith("-")]
            if len(files) >= 2:
                return files[-1]
    return None


def _shell_kind(tool: str, command: str, key: str) -> ToolUse:
    norm = normal_command(command)
    if "*** Begin Patch" in command:
        kind, paths = _patch_paths(command)
        return ToolUse(kind, tool, paths[0] if paths else norm, ", ".join(paths), key)
    first = norm.split("&&")[0].split("|")[0].split(";")[0].strip()
    words = [w for w in _words(_REDIRECT.sub(" ", first))]
    if not words:
        return ToolUse("", tool, norm, norm, key)
    head = words[0].rsplit("/", 1)[-1]
    files = [w for w in words[1:] if not w.startswith("-")]
    if head in WRITE_COMMANDS:  # the file a cat, echo, printf or tee writes whole
        written = _written(first.split("\n", 1)[0]) or (files if head == "tee" else [])
        if written:
            return ToolUse("file-create", tool, written[0], norm, key)
    if head in ROUTINE and "&&" not in norm and "|" not in norm:
        return ToolUse("", tool, norm, norm, key)
    edited = _in_place(command) if head not in READ_COMMANDS else None
    if edited:  # a compound command that edits a file in place (`rm x && sed -i ... f`)
        return ToolUse("file-edit", tool, edited, norm, key)
    if head in READ_COMMANDS and files and _piped_to_viewers(norm):
        return ToolUse("file-read", tool, files[-1], norm, key)
    if head == "sed" and "-i" not in words and files and len(files) >= 2:
        return ToolUse("file-read", tool, files[-1], files[0], key)
    if head == "sed" and any(w.startswith("-i") for w in words) and files:
        return ToolUse("file-edit", tool, files[-1], norm, key)
    if head == "str_replace_editor" and len(words) >= 3:
        sub, path = words[1], words[2]
        kind = {"view": "file-read", "create": "file-create"}.get(sub, "file-edit")
        return ToolUse(kind, tool, path, sub, key)
    # SWE-agent's own commands: `open FILE`, `create FILE`, `edit N:M` (of the open file)
    if head in ("open", "create") and len(words) >= 2 and tool.lower() in SHELL_TOOLS:
        return ToolUse("file-read" if head == "open" else "file-create", tool, words[1],
                       " ".join(words[2:3]), key)
    if head == "edit" and len(words) >= 2 and re.fullmatch(r"\d+:\d+", words[1]):
        return ToolUse("file-edit", tool, "", f"lines {words[1]}", key)
    if head in ("apply_patch", "applypatch"):
        kind, paths = _patch_paths(command)
        return ToolUse(kind, tool, paths[0] if paths else norm, ", ".join(paths), key)
    return ToolUse("command", tool, norm, norm, key)


_CLASSIFIED: dict[tuple[str, str], ToolUse] = {}


def classify_call(name: str, arguments: Any) -> ToolUse:
    """What a tool call did, from its name and arguments alone (Claude Code, Codex, pi,
    OpenHands, SWE-agent and mini-swe-agent tool names); remembered per distinct name and
    argument string (at most 2**16)."""
    if not isinstance(arguments, str):
        return _classify(str(name), arguments)
    key = (str(name), arguments)
    got = _CLASSIFIED.get(key)
    if got is None:
        if len(_CLASSIFIED) >= 1 << 16:
            _CLASSIFIED.clear()
        got = _CLASSIFIED[key] = _classify(*key)
    return got


def _classify(name: str, arguments: Any) -> ToolUse:
    tool = str(name)
    low = tool.lower()
    args = _args(arguments)
    key = f"{tool}\x00{_canonical(arguments)}"
    path = None
    if isinstance(args, Mapping):
        path = next((str(args[k]) for k in PATH_KEYS if isinstance(args.get(k), str)
                     and args.get(k)), None)
    if low == "str_replace_editor" and isinstance(args, Mapping):
        sub = str(args.get("command", ""))
        kind = {"view": "file-read", "create": "file-create"}.get(sub, "file-edit")
        return ToolUse(kind, tool, path or "", sub, key)
    if low in READ_TOOLS and path:
        rng = ""
        if isinstance(args, Mapping) and (args.get("offset") or args.get("limit")):
            rng = f"offset {args.get('offset', 0)}, limit {args.get('limit', '')}".strip()
        if isinstance(args, Mapping) and args.get("view_range"):
            rng = f"lines {args.get('view_range')}"
        return ToolUse("file-read", tool, path, rng, key)
    if low in EDIT_TOOLS:
        if path:
            return ToolUse("file-edit", tool, path, "", key)
        command = _command_of(args)
        if command:
            kind, paths = _patch_paths(command)
            return ToolUse(kind, tool, paths[0] if paths else "", ", ".join(paths), key)
        return ToolUse("file-edit", tool, "", "", key)
    if low in CREATE_TOOLS and path:
        return ToolUse("file-create", tool, path, "", key)
    if low in SHELL_TOOLS or (low not in SEARCH_TOOLS and _command_of(args) is not None
                              and isinstance(args, Mapping) and "command" in args):
        command = _command_of(args)
        if command:
            return _shell_use(tool, command, key)
    if isinstance(args, Mapping):
        what = next((str(args[k]) for k in ("pattern", "query", "url", "prompt")
                     if isinstance(args.get(k), str)), None)
        target = " ".join(x for x in (what, path) if x) or _canonical(arguments)
    else:
        target = _canonical(arguments)
    return ToolUse("command", tool, target, target, key)


def _written(line: str) -> list[str]:
    """The files a command line's output redirections write (never `/dev/...` or a
    descriptor); quoted text is no redirection."""
    bare = _QUOTED.sub("''", line)
    return [t for t in _OUT.findall(bare) if t != "''" and not t.startswith(("/dev/", "&"))]


@lru_cache(maxsize=1 << 14)
def command_parts(command: str) -> tuple[str, ...]:
    """The simple commands of a command line, split at unquoted `&&`, `||`, `;`, `|` and
    line ends (a here-document's body stays with its command)."""
    parts: list[str] = []
    cur: list[str] = []
    quote = ""
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and quote == '"' and i + 1 < n:
                cur.append(command[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            cur.append(ch)
        elif ch == "<" and command.startswith("<<", i):  # a here-document: to its end word
            m = re.match(r"<<-?\s*(['\"]?)(\w+)\1", command[i:])
            end = -1
            if m:
                body = re.search(r"^\s*" + m.group(2) + r"\s*$", command[i + m.end():], re.M)
                end = i + m.end() + body.end() if body else n
            end = end if end > i else i + 2
            cur.append(command[i:end])
            i = end
            continue
        elif ch in ";|\n" or command.startswith("&&", i):
            parts.append("".join(cur))
            cur = []
            if command.startswith(("&&", "||"), i):
                i += 1
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return tuple(p.strip() for p in parts if p.strip())


MANIFESTS = frozenset({
    "package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
    "requirements.txt", "pyproject.toml", "poetry.lock", "uv.lock", "Pipfile",
    "Pipfile.lock", "Cargo.toml", "Cargo.lock", "go.mod", "go.sum", "Gemfile",
    "Gemfile.lock", "mix.exs", "mix.lock", "composer.json", "composer.lock"})
_INSTALL = re.compile(
    r"^(?:(?:npm|pnpm|yarn|bun) (?:install|i|add|remove|rm|uninstall|update|upgrade)\b|"
    r"(?:uv )?pip3? (?:install|uninstall)\b|uv (?:add|remove|sync|lock)\b|"
    r"poetry (?:add|remove|install|update|lock)\b|cargo (?:add|remove|update)\b|"
    r"go (?:get|mod tidy)\b|bundle (?:add|install|update)\b|mix deps\.(?:get|update)\b|"
    r"composer (?:require|install|update)\b)")
# work-tree wide changes: what they change is not named in the command (a checkout, a
# patch, a formatter or fixer that rewrites files)
_TREE = re.compile(r"^(?:git (?:checkout|reset|restore|stash|apply|pull|merge|rebase|"
                   r"switch|am|cherry-pick|revert|clean)\b|patch\b|"
                   r"(?:black|isort|autopep8|autoflake|gofmt|goimports|rustfmt)\b|"
                   r"(?:go|cargo|mix|dart|terraform|ruff) fmt\b|(?:ruff|mix|dart) format\b|"
                   r".*(?:--fix|--write|--in-place)\b)")
INTERPRETERS = frozenset({"python", "python3", "node", "bash", "sh", "zsh", "ruby", "perl",
                          "deno", "bun", "tsx", "ts-node", "php"})
# programs that keep state of their own (an issue tracker, the history) or ask the
# network or the system: a query of one (`bd show X`, `git log`) depends on that state,
# not on the work tree's files
STATEFUL_TOOLS = frozenset({"git", "bd", "gh", "glab", "jira", "linear", "hg", "svn"})
ALWAYS_QUERIES = frozenset({"curl", "wget", "http", "ps", "env", "which", "whoami", "date",
                            "uname", "hostname", "df", "du"})
QUERY_VERBS = frozenset({"show", "list", "ls", "view", "ready", "status", "search", "get",
                         "describe", "info", "log", "stats", "blocked", "remote",
                         "rev-parse", "shortlog", "blame"})


@dataclass(frozen=True)
class _Effects:
    """What a call may change: files it names, files it changes without naming them
    (`anything`: a checkout, a patch), manifest files (a package install), and the
    script it runs (a change when the agent wrote that script itself)."""

    paths: tuple[str, ...] = ()
    anything: bool = False
    installs: bool = False
    script: str = ""
    # (program, the words it was given) of each part that changes a stateful program's state
    states: tuple[tuple[str, frozenset[str]], ...] = ()


_NO_EFFECTS = _Effects()


@lru_cache(maxsize=1 << 14)
def _effects(use: ToolUse) -> _Effects:
    if use.kind in ("file-edit", "file-create") and not use.command:
        named = [p.strip() for p in use.detail.split(",")] if (
            use.detail and use.tool.lower() in ("apply_patch", "patch")) else [use.target]
        return _Effects(tuple(p for p in named if p))
    if not use.command:
        return _NO_EFFECTS
    paths: list[str] = []
    anything = installs = False
    script = ""
    states: list[tuple[str, frozenset[str]]] = []
    for part in command_parts(use.command):
        line = part.split("\n", 1)[0]
        first = line.split(None, 1)[0].rsplit("/", 1)[-1] if line.strip() else ""
        if first in STATEFUL_TOOLS and _query(part) is None:
            states.append((first, frozenset(w.strip("'\"") for w in line.split()[1:])))
        paths += _written(line)
        words = _words(_REDIRECT.sub(" ", line))
        while words and (("=" in words[0] and not words[0].startswith("="))
                         or words[0] in ("sudo", "env", "time", "nohup")):
            words = words[1:]
        if not words:
            continue
        head = words[0].rsplit("/", 1)[-1]
        args = [w for w in words[1:] if not w.startswith("-")]
        text = " ".join([head, *words[1:]])
        if head == "sed" and any(w.startswith("-i") for w in words) and args:
            paths.append(args[-1])
        elif head in ("tee", "rm", "touch", "truncate", "mv") and args:
            paths += args
        elif head == "cp" and len(args) >= 2:
            paths.append(args[-1])
        elif head == "str_replace_editor" and len(words) >= 3 and words[1] != "view":
            paths.append(words[2])
        elif head in ("create", "edit") and use.kind in ("file-create", "file-edit"):
            anything = anything or not use.target
            paths += [use.target] if use.target else []
        elif _TREE.match(text) or "*** Begin Patch" in part:
            anything = True
        elif _INSTALL.match(text):
            installs = True
        elif head in INTERPRETERS and args:
            script = args[0]
        elif head.startswith("./") or words[0].startswith("./"):
            script = words[0]
    if use.kind in ("file-edit", "file-create") and use.target:
        paths.append(use.target)
    return _Effects(tuple(dict.fromkeys(p for p in paths if p)), anything, installs, script,
                    tuple(states))


@lru_cache(maxsize=1 << 14)
def _query(part: str) -> tuple[str, frozenset[str]] | None:
    """(program, what it names) of a simple command that only asks (a query of a
    program with state of its own, or of the network or the system), else None."""
    words = _words(_REDIRECT.sub(" ", part.split("\n", 1)[0]))
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    args = [w for w in words[1:] if not w.startswith("-")]
    if head in ALWAYS_QUERIES:
        return head, frozenset(args)
    if head in STATEFUL_TOOLS and any(a in QUERY_VERBS for a in args[:2]):
        return head, frozenset(a for a in args if a not in QUERY_VERBS)
    return None


@lru_cache(maxsize=1 << 14)
def _depends_on_files(use: ToolUse) -> bool:
    """Whether a command's outcome may depend on any file of the work tree (it runs code,
    builds, tests or searches), not only on what it names (a query of an issue tracker,
    the history, the network)."""
    for part in command_parts(use.command or use.target):
        words = part.split()
        if words and (words[0] in ROUTINE or _query(part) is not None):
            continue
        return True
    return False


@lru_cache(maxsize=1 << 14)
def _read_range(use: ToolUse) -> tuple[float, float] | None:
    """The lines a read covers: None for the whole file, (first, last) for a part, and
    (0, 0) for a part whose lines are not known (a grep of the file, a tail)."""
    detail = use.detail
    if use.command:  # a shell read: its own range, or its pipe's
        parts = command_parts(use.command)
        text = " ".join(parts)
        m = re.search(r"\bsed -n ['\"]?(\d+)(?:,(\d+))?p", text)
        if m:
            return float(m.group(1)), float(m.group(2) or m.group(1))
        if re.search(r"\b(?:head|tail) -c\b", text):
            return 0.0, 0.0  # bytes, not lines
        m = re.search(r"\bhead(?: -n)? -?(\d+)\b", text)
        if m:
            return 1.0, float(m.group(1))
        if re.search(r"\bhead\b", text):
            return 1.0, 10.0
        if len(parts) > 1 or re.search(r"^(?:tail|grep)\b", parts[0] if parts else ""):
            return 0.0, 0.0
        return None
    m = re.match(r"offset (\d+), limit ?(\d*)", detail)
    if m:
        first = max(float(m.group(1)), 1.0)
        last = first + float(m.group(2)) - 1 if m.group(2) else float("inf")
        # from the top, 2,000 lines or more: what a read with no range gets (the default)
        return None if first <= 1 and last >= 2000 else (first, last)
    m = re.match(r"lines \[(-?\d+),\s*(-?\d+)\]", detail)
    if m:
        last = float(m.group(2))
        return float(m.group(1)), float("inf") if last < 0 else last
    return None


def _covers(hidden: tuple[float, float] | None, later: tuple[float, float] | None) -> bool:
    """Whether a later read gets back what a hidden read showed: most of the hidden
    lines, and mostly those (a whole file read after a hidden ten lines of it reads
    mostly what was never hidden; ten lines after a hidden whole file get little back)."""
    if hidden is None or later is None:
        return hidden is later
    if hidden == (0.0, 0.0) or later == (0.0, 0.0):
        return False
    inf = float("inf")
    if inf in (hidden[1], later[1]):
        return hidden[1] == later[1] and abs(hidden[0] - later[0]) <= 20
    both = min(hidden[1], later[1]) - max(hidden[0], later[0]) + 1
    return (both >= 0.5 * (hidden[1] - hidden[0] + 1)
            and both >= 0.5 * (later[1] - later[0] + 1))


# ------------------------------------------------------------------- helpers


def is_redacted(text: str) -> bool:
    """Whether all a text says is placeholders (redacted, trimmed, encrypted, an image)."""
    head = (text[:200].lstrip() or text.lstrip())[:1]  # (no copy of a long text)
    if head not in ("[", "{") or not any(map(text.__contains__, _PLACEHOLDER_WORDS)):
        return False  # (a text of placeholders only begins with one)
    rest = _IMAGE.sub("", _REDACTED.sub("", text))
    return not rest.strip(" \n\t.,;:-")


def _may_exit(part: str) -> bool:
    """Whether `_EXIT` can match in `part` (a quick test before the pattern): a match
    holds `exit` or `returncode` in any case, and lowered those read `xit` (or x, U+0069
    U+0307, t and x, U+0131, t where the i was U+0130 or U+0131, which match i under
    re.I) or `returncode`."""
    low = part.lower()
    return "xit" in low or "returncode" in low or "x\u0131t" in low or "xi\u0307t" in low


def _exit_code(text: str) -> int | None:
    head = text[:400]
    m = _EXIT.search(head) if _may_exit(head) else None
    if m is None and len(text) > 400:
        tail = text[-400:]
        m = _EXIT.search(tail) if _may_exit(tail) else None
    return int(m.group(1)) if m else None


# words one of which every `_ERROR_LINE` match holds (a quick test before the pattern)
_ERROR_WORDS = ("rror", "RROR", "xception", "Traceback", "FAIL", "fatal:", "failed", "failure",
                "not found", "No such file", "Permission denied")
_E_LINE = re.compile(r"E\s\s")


def error_line(text: str) -> str | None:
    """The first error line of a command's output (never called on a file's content)."""
    if not any(map(text.__contains__, _ERROR_WORDS)) and not _E_LINE.search(text):
        return None  # (no alternative of the pattern can match)
    m = _ERROR_LINE.search(text)
    return m.group(0).strip()[:200] if m else None


def _short(text: str, n: int = 160) -> str:
    if len(text) > 2 * n:  # the spaced head of a text is the head of its spaced text
        head = " ".join(text[: 2 * n].split())
        if len(head) > n:
            return head[: n - 1] + "…"
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def path_forms(path: str) -> list[str]:
    """The forms of a path looked for on the surface: the path itself and its tails of
    at least two components (an absolute and a relative path to one file are one path)."""
    path = path.strip().strip("'\"")
    parts = [p for p in path.split("/") if p and p != "."]
    if not parts:
        return []
    forms = {path, "/".join(parts)}
    for i in range(1, max(len(parts) - 1, 1)):
        forms.add("/".join(parts[i:]))
    return sorted((f for f in forms if f), key=len)


@lru_cache(maxsize=1 << 14)
def _path_search(path: str) -> tuple[tuple[str, ...], str]:
    """(the forms of a path searched for on the surface, its file name): a form holding
    the shortest one is on the surface only if that one is, so the shortest and the forms
    that do not hold it (a `a//b` path); worked out once per distinct path."""
    forms = path_forms(path)
    wanted = tuple(f for f in forms if f is forms[0] or forms[0] not in f)
    return wanted, forms[0].rsplit("/", 1)[-1] if forms else ""


def _blocks(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = message_of(event)
    content = message.get("content") if isinstance(message, Mapping) else None
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _is_error_result(event: Mapping[str, Any]) -> bool:
    data = event.get("data")
    if isinstance(data, Mapping) and data.get("error"):
        return True
    return any(b.get("isError") for b in _blocks(event))


def _call_id(event: Mapping[str, Any]) -> str | None:
    message = message_of(event)
    source = message.get("source") if isinstance(message, Mapping) else None
    call_id = source.get("callId") if isinstance(source, Mapping) else None
    if call_id is None:
        call_id = next((b.get("toolCallId") for b in _blocks(event)
                        if b.get("toolCallId") is not None), None)
    return None if call_id is None else str(call_id)


# ------------------------------------------------------------------ the ledger


class _FailedBlock(msgspec.Struct, gc=False):
    isError: Any = None


class _FailedMessage(msgspec.Struct, gc=False):
    content: list[_FailedBlock] | None = None


class _FailedData(msgspec.Struct, gc=False):
    error: Any = None
    message: _FailedMessage | None = None


class _FailedLine(msgspec.Struct, gc=False):
    """A tool result's line decoded of what `_is_error_result` reads alone."""

    data: _FailedData | None = None


_FAILED = msgspec.json.Decoder(_FailedLine)
_UNKNOWN: Any = object()  # not worked out yet


class _Reader:
    """A log's events read on demand; the assistant messages' tool calls and text blocks
    decoded once, in one typed pass (`evidence.read_entries`, as the evidence walk reads
    them)."""

    def __init__(self, log: LogData) -> None:
        from .evidence import read_entries

        self.log = log
        self.events: dict[int, Mapping[str, Any]] = {}
        self.types = log.types
        self.replace_seqs = {p.seq for p in log.replaces}
        plans = log.plans if isinstance(log.plans, PlanList) else PlanList.of(log.plans)
        # seq -> ((kind, name or text, arguments, call id), ...) of an assistant message
        self.acts: dict[int, tuple[Any, ...]]
        read = log.cache.get("surface_entries")  # the evidence walk's, when it ran
        if read is not None:  # (an assistant message's acts do not depend on its text)
            self.acts = {s: e.acts for s, e in read.items()
                         if e.kind == "assistant/message"}
        else:
            asked = [s for s in log.entries if self.types[s] == "assistant/message"]
            self.acts = {s: e.acts for s, e in zip(
                asked, read_entries(log.events, plans, asked, {}, {}), strict=True)}
        self._call_ids: dict[int, str | None] = {}
        self._call_of: dict[int, tuple[int, ToolUse] | None] = {}
        # a packed log's decoded sources, by seq (`LogData.texts` fills this dict in place)
        self._sources: dict[int, Any] | None = (
            log.cache.setdefault("sources", {}) if isinstance(log.events, LogEvents)
            else None)
        self._files: _Paths | None = None
        self.assistants: list[int] | None = None  # the assistant messages' seqs, sorted
        self.calls: dict[str, tuple[int, str, Any]] = {}  # call id -> (seq, name, args)
        self.calling: set[int] = set()  # the assistant messages with a tool call
        for s, acts in self.acts.items():
            for kind, name, arguments, call_id in acts:
                if kind == "tool-call":
                    self.calls[str(call_id)] = (s, name, arguments)
                    self.calling.add(s)

    def event(self, seq: int) -> Mapping[str, Any]:
        event = self.events.get(seq)
        if event is None:
            event = self.events[seq] = self.log.read(seq)
        return event

    def call_id(self, result_seq: int) -> str | None:
        """The call a tool result answers (worked out once per result)."""
        got = self._call_ids.get(result_seq, _UNKNOWN)
        if got is not _UNKNOWN:
            return cast(str | None, got)
        # a decoded source that is a dict is what `LogData.source_of` gives (no lookup)
        source = self._sources.get(result_seq) if self._sources is not None else None
        if type(source) is not dict:
            source = self.log.source_of(result_seq)
        call_id = source.get("callId") if isinstance(source, Mapping) else None
        got = _call_id(self.event(result_seq)) if call_id is None else str(call_id)
        self._call_ids[result_seq] = got
        return got

    def call_of(self, result_seq: int) -> tuple[int, ToolUse] | None:
        """(the calling message's seq, what the call did) of a tool result, or None
        (worked out once per result)."""
        got = self._call_of.get(result_seq, _UNKNOWN)
        if got is not _UNKNOWN:
            return cast(tuple[int, ToolUse] | None, got)
        call_id = self.call_id(result_seq)
        found = self.calls.get(call_id) if call_id is not None else None
        got = None if found is None else (found[0], classify_call(found[1], found[2]))
        self._call_of[result_seq] = got
        return got

    def failed(self, result_seq: int) -> bool:
        """`_is_error_result` of a tool result; of a packed log's line, only its data's
        `error` and its blocks' `isError` are decoded (the whole event where the line
        has another shape), unless its text's decode found it out already."""
        known = self.log.cache.get("failed", {}).get(result_seq)  # (`LogData.texts`)
        if known is not None:
            return bool(known)  # (a bool)
        event = self.events.get(result_seq)
        line = (self.log.events.line_view(result_seq)
                if event is None and isinstance(self.log.events, LogEvents) else None)
        typed = decode_line(_FAILED, line)
        if typed is not None:
            data = typed.data
            if data is None:
                return False
            if data.error:
                return True
            content = data.message.content if data.message is not None else None
            return any(b.isError for b in content or ())
        return _is_error_result(self.event(result_seq))

    def tool_calls(self, seq: int) -> list[tuple[str, Any, str]]:
        """(name, arguments, call id) of an assistant message's tool calls."""
        return [(name, arguments, str(call_id)) for kind, name, arguments, call_id
                in self.acts.get(seq, ()) if kind == "tool-call"]

    def text_blocks(self, seq: int) -> list[str]:
        return [name for kind, name, _, _ in self.acts.get(seq, ()) if kind == "text"]

    def used_before(self, path: str, seq: int) -> bool:
        """Whether a call before `seq` read, edited or wrote this file (so that writing it
        whole at `seq` rewrites a file that existed). The index is built on first use."""
        if self._files is None:
            self._files = _Paths()
            for s in sorted(self.acts):
                for kind, name, arguments, _ in self.acts[s]:
                    if kind == "tool-call":
                        use = classify_call(str(name), arguments)
                        if use.kind.startswith("file-") and use.target:
                            self._files.add(use.target, s, None)
        return any(s < seq for s, _ in self._files.get_all(path))


def _user_fact(text: str, after_question: bool) -> tuple[str, str] | None:
    """(kind, text) of a user message, or None when it carries no fact."""
    body = text.strip()
    if not body or _ACK.fullmatch(body) or _TRIGGER.fullmatch(body):
        return None
    if body.startswith("<task-notification>"):  # a background task's outcome: tool output
        failed = re.search(r"<status>\s*(?:failed|error|killed)", body, re.I)
        summary = re.search(r"<summary>(.*?)</summary>", body, re.S)
        what = _short(summary.group(1) if summary else body, 120)
        return ("error" if failed else "command"), what
    if _HARNESS.match(body):
        return None
    if any(body.startswith(r) for r in _REJECTED):
        return "decision", _short(body)
    urls = _URL.findall(body)
    if urls and len(_URL.sub("", body).split()) <= 3:
        return "identifier", urls[0]
    if len(body) <= 60 and (after_question or _DECISION.match(body)):
        return "decision", _short(body)
    return "instruction", _short(body)


def _observed(reader: _Reader, log: LogData, seq: int) -> ToolUse | None:
    """The commands whose output a terminal-style observation is (a harness message of
    origin `observation`, as ATIF imports one no call answers): those the assistant message
    before it gave in its text, as one shell call."""
    source = log.source_of(seq)
    if not isinstance(source, Mapping) or source.get("origin") != "observation":
        return None
    if reader.assistants is None:
        reader.assistants = sorted(reader.acts)
    at = bisect_left(reader.assistants, seq) - 1
    if at < 0:
        return None
    text = "\n".join(reader.text_blocks(reader.assistants[at]))
    command = commands_in(text)
    return classify_call("bash", {"command": command}) if command else None


def commands_in(text: str) -> str | None:
    """The shell commands an assistant gave in its text: the keystrokes of a terminal
    agent's JSON answer (`{"commands": [{"keystrokes": ...}]}`), else its last fenced
    shell block."""
    body = text.strip()
    if body.startswith("{") and '"commands"' in body:
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if isinstance(answer, Mapping) and isinstance(answer.get("commands"), list):
            keys = [str(c.get("keystrokes", "")).strip() for c in answer["commands"]
                    if isinstance(c, Mapping)]
            return "\n".join(k for k in keys if k) or None
    blocks = re.findall(r"```(?:bash|sh|shell|console)?\n(.*?)```", body, re.S)
    return blocks[-1].strip() or None if blocks else None


def _result_fact(reader: _Reader, seq: int, text: str, given: ToolUse | None = None
                 ) -> tuple[str, str, ToolUse | None]:
    """(kind, text, use) of a tool result (or of an observation whose commands are
    `given`); kind "" when it carries no fact."""
    call = reader.call_of(seq) if given is None else (seq, given)
    use = call[1] if call is not None else None
    failed = reader.failed(seq)
    head = text[:400].lstrip() or text.lstrip()  # the text's opening, without copying it
    if head.startswith(_REJECTED):
        return "decision", _short(text), use
    if use is None:
        line = error_line(text) if failed else None
        return ("error" if failed else "command", _short(line or text, 120), None)
    if use.kind == "" or use.tool.lower() in MODE_TOOLS or "Sibling tool call errored" in (
            text[:200]):
        return "", "", use  # a routine step, a mode switch, a call that never ran
    if use.tool.lower() in ASK_TOOLS and not failed:  # the user's answer to the agent
        return "decision", _short(text), use
    if not text.strip() and not failed and not (
            use.kind.startswith("file-") or _STATEFUL.match(use.target)):
        return "", "", use  # an empty answer to a query: nothing learned
    if (use.kind == "file-create" and use.target and call is not None
            and not head.startswith("File created successfully")
            and reader.used_before(use.target, call[0])):
        use = replace(use, kind="file-edit")  # a file that existed, written whole
    if use.kind == "file-edit" and not use.target:  # the file SWE-agent's edit changed
        m = re.match(r"\[File: ([^\]\n]+?) \(\d+ lines total\)\]", head)
        if m:
            use = replace(use, target=m.group(1))
    label = use.target or use.tool
    if use.kind == "file-read":
        if failed or _MISSING.match(head[:300]):
            return "error", f"read {label}: {_short(text, 100)}", use
        rng = f" ({use.detail})" if use.detail and use.tool.lower() != "bash" else ""
        return "file-read", f"read {label}{rng}", use
    if use.kind in ("file-edit", "file-create"):
        if failed or _REFUSED.search(text[:300]):
            return "error", f"{label}: {_short(text, 100)}", use
        verb = "created" if use.kind == "file-create" else "edited"
        return use.kind, f"{verb} {label}", use
    code = _exit_code(text)
    if code == 1 and _NO_MATCH.match(use.target):
        code = 0  # a search that found nothing, two files that differ: no failure
    line = error_line(text) if (failed or code not in (None, 0) or len(text) < 20000) else None
    if failed or (code is not None and code != 0):
        return "error", f"{_short(label, 100)}: {line or _short(text, 80)}", use
    if line and _FAILURE.search(line):
        return "error", f"{_short(label, 100)}: {line}", use
    return "command", f"{_short(label, 100)} -> {_short(_first_line(text), 80)}", use


def _first_line(text: str) -> str:
    """The first line of `text` (as `splitlines` cuts it) that is not blank, stripped;
    looked for in its opening first (its lines but the last, which may go on, are the
    text's own)."""
    if len(text) > 2000:
        lines = text[:2000].splitlines()
        for ln in lines[:-1]:
            if ln.strip():
                return ln.strip()
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


class _Parts:
    """What `_Kept` reads of each surface entry, worked out once per entry for every
    surface it is on: its lowered text with whitespace runs as one space. (Entries are
    joined by newlines, which split() cuts at and which ends a final sigma: so the joined
    surface's spaced text is its entries', joined.)"""

    def __init__(self, texts: Mapping[int, str]) -> None:
        self.texts = texts
        self._spaced: dict[int, str] = {}

    def spaced(self, seq: int) -> str:
        got = self._spaced.get(seq)
        if got is None:
            got = self._spaced[seq] = spaced_lower(self.texts.get(seq, ""))
        return got


# the ASCII characters `str.split()` cuts at (`str.isspace`) besides the space
ASCII_WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"


def spaced_lower(text: str) -> str:
    """`" ".join(text.lower().split())`; of an ASCII text without a string per word:
    each whitespace character made a space, runs of spaces halved until none is left,
    the ends stripped."""
    if not text.isascii():
        return " ".join(text.lower().split())
    out = text.lower()
    for char in ASCII_WHITESPACE:
        if char in out:
            out = out.replace(char, " ")
    while "  " in out:
        out = out.replace("  ", " ")
    return out.strip(" ")


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_./-")  # `_WORD`'s class


def _has_word(text: str, word: str) -> bool:
    """Whether `word` (a `_WORD` match) is one of `_WORD.findall(text)`: those are the
    maximal runs of its characters at least 4 long, so an occurrence of the word with no
    such character on either side. (Found without listing every word of the text.)"""
    n, end = len(word), len(text)
    at = text.find(word)
    while at >= 0:
        if ((at == 0 or text[at - 1] not in _WORD_CHARS)
                and (at + n == end or text[at + n] not in _WORD_CHARS)):
            return True
        at = text.find(word, at + 1)
    return False


class _Kept:
    """The surface after a replace: its texts and, apart, the arguments of its calls."""

    def __init__(self, nodes: list[int], parts: _Parts,
                 calls_of: Callable[[list[int]], list[str]]) -> None:
        self.nodes = list(nodes)  # (the walk appends to its list in place)
        self.parts = parts
        self._texts = [parts.texts.get(n, "") for n in nodes]
        self._text: str | None = None
        self._calls_of = calls_of
        self._call_lines: list[str] | None = None
        self._calls: str | None = None
        self._spaced: str | None = None

    @property
    def text(self) -> str:
        """The entries' texts joined by newlines (joined when first asked: `holds`
        looks for a text without a newline in each entry instead)."""
        if self._text is None:
            self._text = "\n".join(self._texts)
        return self._text

    def holds(self, needle: str) -> bool:
        """`needle in self.text`; a needle without a newline lies in one entry (the
        newlines joining them are none of its characters), so it is looked for in each."""
        if self._text is not None or "\n" in needle or not needle:
            return needle in self.text
        return any(map(contains, self._texts, repeat(needle)))

    @property
    def calls(self) -> str:
        """The name and arguments of each call on the surface, one a line (worked out
        when first asked: most facts are found in the text)."""
        if self._calls is None:
            self._calls = "\n".join(self._lines_of_calls())
        return self._calls

    def _lines_of_calls(self) -> list[str]:
        if self._call_lines is None:
            self._call_lines = self._calls_of(self.nodes)
        return self._call_lines

    def calls_hold(self, needle: str) -> bool:
        """`needle in self.calls`, looked for as `holds` looks."""
        if self._calls is not None or "\n" in needle or not needle:
            return needle in self.calls
        return any(map(contains, self._lines_of_calls(), repeat(needle)))

    @property
    def spaced(self) -> str:
        """The lowered text with its whitespace runs as one space (the lowered text's
        words are its words: whitespace is none of their characters)."""
        if self._spaced is None:
            spaced = self.parts.spaced
            self._spaced = " ".join([t for t in map(spaced, self.nodes) if t])
        return self._spaced

    def path(self, path: str) -> str:
        wanted, base = _path_search(path)
        if any(map(self.holds, wanted)):
            return "yes"
        if any(map(self.calls_hold, wanted)):
            return "partly"
        if "." in base.strip(".") and len(base) >= 6 and self.holds(base) and re.search(
                r"(?<![\w./-])" + re.escape(base) + r"(?![\w/-]|\.\w)", self.text):
            return "partly"  # named by its file name alone: which file is not said
        return "no"

    def said(self, text: str) -> str:
        low = " ".join(text.lower().split())
        if low and low[:200] in self.spaced:
            return "yes"
        # `share(low)`'s band (0.8 and more, 0.4 and more, less), its words looked for
        # only until the band is known
        words = set(_WORD.findall(low))
        n, found, left = len(words), 0, len(words)
        spaced = self.spaced
        for word in words:
            left -= 1
            if _has_word(spaced, word):
                found += 1
                if found / n >= 0.8:
                    return "yes"
            most = (found + left) / n  # the share if every word left is found
            if most < 0.4:
                return "no"
            if most < 0.8 and found / n >= 0.4:
                return "partly"
        share = found / n if n else 0.0
        return "yes" if share >= 0.8 else "partly" if share >= 0.4 else "no"

    def share(self, low: str) -> float:
        """The share of a lowered text's words (4 characters or more) on the surface."""
        words = set(_WORD.findall(low))
        if not words:
            return 0.0
        spaced = self.spaced
        return sum(_has_word(spaced, w) for w in words) / len(words)


def _kept(kind: str, use: ToolUse | None, text: str, kept: _Kept) -> str:
    if kind in ("instruction", "decision", "other", "finding"):
        return kept.said(text)
    if kind == "identifier":
        return "yes" if kept.holds(text) else "no"
    if use is None:
        return kept.said(text)
    if use.kind in ("file-read", "file-edit", "file-create"):
        return kept.path(use.target) if use.target else "no"
    command = use.target
    if command and kept.holds(command[:120]):
        outcome = text.split(" -> ", 1)[-1] if " -> " in text else text.split(": ", 1)[-1]
        return "yes" if outcome and kept.holds(outcome[:60]) else "partly"
    if command and kept.calls_hold(command[:120]):
        return "partly"
    return "no"


def fact_ledger(source: Any) -> Ledger:
    """The facts ledger and re-dos of a log (a `LogData` or anything `load_source` takes)."""
    from .source import load_source

    log = source if isinstance(source, LogData) else load_source(source, progress=False)
    cached = log.cache.get("fact_ledger")
    if isinstance(cached, Ledger):
        return cached
    reader = _Reader(log)
    facts: list[Fact] = []
    uses: dict[tuple[int, int], ToolUse] = {}
    texts_by_replace: dict[int, dict[int, str]] = {}
    for plan, kept in _settled(log, reader):
        hidden = list(plan.shadowed)
        known = log.texts(hidden)  # (the log's whole cache: take the hidden ones)
        texts = {h: known.get(h, "") for h in hidden}
        texts_by_replace[plan.seq] = texts
        answered = {c for c in (reader.call_id(h) for h in hidden
                                if reader.types[h] == "tool/result") if c is not None}
        seen_keys: dict[str, list[str]] = {}  # a call's key -> its results' texts
        prev_question = False
        superseded = _background_superseded(reader, hidden, texts)
        # a masked or pruned result: the replacement stands for the result it hides
        stand_in = reader.types[plan.seq] == "tool/result"
        rows: list[Fact] = []
        for s in hidden:
            kind_of = reader.types[s]
            text = texts.get(s, "")
            if kind_of == "assistant/message":
                row = _assistant_fact(reader, plan.seq, s, answered, kept, uses)
                prev_question = "?" in text[-300:]
                if row is not None:
                    rows.append(row)
                continue
            if is_redacted(text):
                rows.append(Fact(plan.seq, s, "unmeasurable", _short(text, 80)))
                continue
            if kind_of == "tool/result":
                if s in superseded:
                    continue
                kind, fact, use = _result_fact(reader, s, text)
                if use is not None and kind:
                    seen = seen_keys.setdefault(use.key, [])
                    if text in seen:  # an identical call with an identical result
                        continue
                    seen.append(text)
                if kind:
                    said = _kept(kind, use, fact, kept)
                    if said == "yes" and kind == "file-read" and stand_in:
                        said = "partly"  # the call stays visible, what it read does not
                    rows.append(Fact(plan.seq, s, kind, fact, said))
                    if use is not None:
                        uses[(plan.seq, s)] = use
            elif kind_of == "user/message":
                author = author_from(kind_of, log.source_of(s))
                if s in reader.replace_seqs or author == "summary":
                    if text.strip():
                        rows.append(Fact(plan.seq, s, _summary_kind(text), _short(text),
                                         kept.said(text[:400])))
                    continue
                found = _user_fact(text, prev_question)
                if found is not None:
                    rows.append(Fact(plan.seq, s, found[0], found[1],
                                     _kept(found[0], None, found[1], kept)))
            elif s in reader.replace_seqs and text.strip():
                rows.append(Fact(plan.seq, s, _summary_kind(text), _short(text),
                                 kept.said(text[:400])))
            elif kind_of == "context/message" and text.strip():
                use = _observed(reader, log, s)
                if use is None:
                    continue
                kind, fact, use = _result_fact(reader, s, text, use)
                if kind:
                    rows.append(Fact(plan.seq, s, kind, fact, _kept(kind, use, fact, kept)))
                    if use is not None:
                        uses[(plan.seq, s)] = use
        facts.extend(rows)
    redos, unmeasurable = _find_redos(log, reader, facts, uses, texts_by_replace)
    needed: dict[tuple[int, int], list[int]] = {}
    for r in redos:
        needed.setdefault((r.replace_seq, r.hidden_seq), []).append(r.seq)
    for row in facts:
        got = needed.get((row.replace_seq, row.seq))
        if got:
            row.needed, row.redo_seqs = True, got
    _rank(facts)
    ledger = Ledger(facts, redos, unmeasurable)
    log.cache["fact_ledger"] = ledger
    return ledger


_BG_START = re.compile(r"running in background with ID: ([\w-]+)")
_BG_ID = re.compile(r"(?:\"(?:task_id|bash_id|shell_id)\"\s*:\s*\"|/tasks/)([\w-]+)")
_BG_NOTICE = re.compile(r"<task-id>([\w-]+)</task-id>")


def _bg_sign(text: str) -> bool:
    """Whether a text may start, poll or report a background command (a quick test)."""
    head = text[:200]
    return "running in background" in head or ("<" in head and (
        "<task-notification>" in head or "<status>" in head))

_BG_FINAL = re.compile(r"<status>\s*(?:completed|failed|killed|error)|<exit_code>")


def _background_superseded(reader: _Reader, hidden: Sequence[int], texts: Mapping[int, str]
                           ) -> set[int]:
    """The hidden results that only start or poll a background command whose outcome a
    later hidden item reports (its start notice, the polls before it): the fact goes on
    the item holding the outcome."""
    if not any(map(_bg_sign, texts.values())):
        return set()  # (most replaces: no background command started, polled or done)
    marks: list[tuple[int, str, bool]] = []  # (seq, task id, reports the outcome)
    for h in hidden:
        text = texts.get(h, "")
        kind = reader.types[h]
        if kind == "user/message":
            m = _BG_NOTICE.search(text) if text[:50].lstrip().startswith("<task-") else None
            if m:
                marks.append((h, m.group(1), True))
            continue
        if kind != "tool/result":
            continue
        m = _BG_START.search(text[:300])
        if m:
            marks.append((h, m.group(1), False))
            continue
        call = reader.call_of(h)
        m = _BG_ID.search(call[1].key) if call is not None else None
        if m:
            marks.append((h, m.group(1), bool(_BG_FINAL.search(text))))
    last: dict[str, int] = {}
    for h, task, _ in marks:
        last[task] = h
    return {h for h, task, final in marks if not final and last[task] > h}


_USER_WORDS = re.compile(r"^\W*(?:- )?user: \S|Original Task|Primary Request|"
                         r"The user (?:asked|wants|requested)", re.M)


def _summary_kind(text: str) -> str:
    """The kind of an earlier summary hidden again: `instruction` when it carries the
    user's words (its request), the most important of what it holds; else `other`."""
    return "instruction" if _USER_WORDS.search(text[:4000]) else "other"


def _assistant_fact(reader: _Reader, replace_seq: int, seq: int, answered: set[str],
                    kept: _Kept, uses: dict[tuple[int, int], ToolUse]) -> Fact | None:
    """A hidden assistant message carries a fact only through a call whose result is not
    hidden with it (or has none) and that did something by itself (read, edit, create,
    a state change); a message of encrypted reasoning alone is unmeasurable."""
    calls = reader.tool_calls(seq)
    if not calls and not any(t.strip() for t in reader.text_blocks(seq)):
        blocks = _blocks(reader.event(seq))
        if blocks and all(b.get("type") == "reasoning" for b in blocks) and all(
                not str(b.get("text", "")).strip() or is_redacted(str(b.get("text", "")))
                for b in blocks) and any(b.get("encrypted") or b.get("signature")
                                         or is_redacted(str(b.get("text", "")))
                                         for b in blocks):
            return Fact(replace_seq, seq, "unmeasurable", "encrypted reasoning")
        return None
    for name, arguments, call_id in calls:
        if call_id in answered:
            continue
        use = classify_call(name, arguments)
        if use.kind in ("file-read", "file-edit", "file-create") and use.target:
            verb = {"file-read": "read", "file-edit": "edited", "file-create": "created"}
            text = f"{verb[use.kind]} {use.target}"
            uses[(replace_seq, seq)] = use
            return Fact(replace_seq, seq, use.kind, text, _kept(use.kind, use, text, kept))
        if use.kind == "command" and _STATEFUL.match(use.target):
            uses[(replace_seq, seq)] = use
            return Fact(replace_seq, seq, "command", f"{_short(use.target, 100)}",
                        _kept("command", use, use.target, kept))
    return None


# tools that only switch the agent's mode (their result is a notice, nothing learned)
MODE_TOOLS = frozenset({"enterplanmode"})
# tools that put a question or a plan to the user: their result is the user's answer
ASK_TOOLS = frozenset({"exitplanmode", "askuserquestion", "ask_user", "askuser",
                       "request_user_input", "ask_followup_question"})
_STATEFUL = re.compile(
    r"(?:git (?:commit|push|merge|rebase|reset|checkout|tag)|pip install|npm (?:install|i)"
    r"|pnpm (?:add|install)|uv (?:add|pip)|cargo add|rm |mv |mkdir |alembic|make install)")


def _settled(log: LogData, reader: _Reader) -> Iterator[tuple[Any, _Kept]]:
    """Each replace with the surface once it settled (after its bracket's end when an
    importer re-appended kept items)."""
    wanted = settle_points(log, _brackets(log))
    replaces = {p.seq: p for p in log.replaces}
    entries = log.entries
    texts = log.texts(entries[: bisect_right(entries, max(wanted, default=-1))])
    call_args: dict[int, str] = {}
    parts = _Parts(texts)
    acts = reader.acts  # (every assistant message on the surface, and only those)

    def calls_of(seq: int) -> str:
        got = call_args.get(seq)
        if got is None:
            got = call_args[seq] = "\n".join(
                f"{name} {arguments}" for name, arguments, _ in reader.tool_calls(seq))
        return got

    def surface_calls(nodes: list[int]) -> list[str]:
        return [calls_of(n) for n in nodes if n in acts]

    plans = log.plans
    # an entry's plan is an append of itself unless it is a replace (no plan made)
    only = plans.replaces if isinstance(plans, PlanList) else None
    nodes: list[int] = []
    done = 0
    for point in sorted(wanted):
        stop = bisect_right(entries, point)
        for seq in entries[done:stop]:
            plan = plans[seq] if only is None else only.get(seq)
            if plan is None:
                nodes.append(seq)
            else:
                nodes = apply_plan(nodes, plan)
        done = stop
        kept = _Kept(nodes, parts, surface_calls)
        for seq in wanted[point]:
            yield replaces[seq], kept


def _rank(facts: list[Fact]) -> None:
    by: dict[int, list[Fact]] = {}
    for f in facts:
        if f.kind == "unmeasurable":
            continue
        # needed later first, then what the surface lost (not kept, then partly), then by
        # kind (WEIGHTS: at most 5), nearer the present first (under 0.5)
        f.score = (WEIGHTS.get(f.kind, 1.0) + (20.0 if f.needed else 0.0)
                   + {"no": 10.0, "partly": 5.0}.get(f.kept or "", 0.0))
        by.setdefault(f.replace_seq, []).append(f)
    for rows in by.values():
        n = len(rows)
        for i, f in enumerate(rows):  # later items a little first: nearer the present
            f.score += 0.5 * i / max(n, 1)
        for rank, f in enumerate(sorted(rows, key=lambda r: -r.score), start=1):
            f.rank = rank


# -------------------------------------------------------------------- re-dos


def _questions(text: str) -> list[str]:
    if "?" not in text:
        return []  # (most texts: no part of them ends with a question mark)
    out = []
    for part in re.split(r"(?<=[?])\s+|\n", text):
        part = part.strip()
        if part.endswith("?") and len(part) > 8 and not _OFFER.match(part):
            out.append(part)
    return out


def _overlap(a: str, b: str) -> float:
    """The share of `a`'s words (4 characters or more) that `b` holds."""
    wa, wb = _word_set(a), _word_set(b)
    return len(wa & wb) / len(wa) if wa else 0.0


@lru_cache(maxsize=1 << 14)
def _word_set(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def _find_redos(log: LogData, reader: _Reader, facts: list[Fact],
                uses: dict[tuple[int, int], ToolUse], texts_by_replace: dict[int, dict[int, str]]
                ) -> tuple[list[Redo], dict[int, bool]]:
    """The re-dos after each replace, up to the next replace."""
    out: list[Redo] = []
    unmeasurable: dict[int, bool] = {}
    by_replace: dict[int, list[Fact]] = {}
    for f in facts:
        by_replace.setdefault(f.replace_seq, []).append(f)
    replaces = sorted(p.seq for p in log.replaces)
    recorded = _recorded(log)
    types = reader.types
    inside = _inside_brackets(log)
    actors = log.seqs_of_type("assistant/message", "user/message")
    shown_args: dict[str, str] = {}  # a call's arguments as a re-do shows them
    changes = _Changes(reader)  # (built when a candidate re-read or re-run asks)
    for i, rseq in enumerate(replaces):
        rows = by_replace.get(rseq, [])
        hidden_texts = texts_by_replace.get(rseq, {})
        # what a re-do could get back: tool results and user messages
        # (all of them redacted, and one at least: the first one that is not decides)
        targets = (t for s, t in hidden_texts.items()
                   if types[s] in ("tool/result", "user/message") and t.strip())
        first = next(targets, None)
        unmeasurable[rseq] = first is not None and is_redacted(first) and all(
            map(is_redacted, targets))
        if unmeasurable[rseq]:
            continue
        failed = {f.seq for f in rows if f.kind == "error"}
        runs: dict[str, int] = {}
        calls: dict[str, int] = {}
        users: list[tuple[int, str]] = []
        for f in rows:
            use = uses.get((rseq, f.seq))
            if use is None:
                if f.kind in ("instruction", "decision", "identifier") and not (
                        f.seq in reader.replace_seqs or author_from(
                            types[f.seq], log.source_of(f.seq)) == "summary"):
                    users.append((f.seq, hidden_texts.get(f.seq, f.text)))
                continue
            if reader.types[f.seq] != "tool/result":
                continue
            if use.kind == "command" and use.tool.lower() in SHELL_TOOLS:
                runs[normal_command(use.target)] = f.seq
            calls[use.key] = f.seq
        # every hidden read result (also of a call repeated in the replace): path ->
        # (result seq, the read), in order; a failed read got nothing back
        reads = _Paths()
        for s in hidden_texts:
            if types[s] == "tool/result" and s not in failed:
                got = uses.get((rseq, s))
                if got is None:
                    call = reader.call_of(s)
                    got = call[1] if call is not None else None
                if got is not None and got.kind == "file-read" and got.target:
                    reads.add(got.target, s, got)
        # each part of a hidden compound command -> the latest such command's result
        parts: dict[str, int] = {}
        for c, s in runs.items():
            split = command_parts(c)
            if len(split) > 1:
                for part in split:
                    parts[_plain(part)] = s
        end = replaces[i + 1] if i + 1 < len(replaces) else len(types)
        for seq in actors[bisect_right(actors, rseq): bisect_left(actors, end)]:
            if seq in inside:
                continue
            kind = types[seq]
            if kind == "assistant/message":
                acts = reader.acts.get(seq, ())
                asks = seq not in reader.calling  # (no tool call among its acts)
                for btype, name, arguments, call_id in acts:
                    if btype == "text":
                        if not asks:  # a question beside a call is not put to the user
                            continue
                        found: set[int] = set()
                        for q in _questions(str(name)):
                            hit = max(users, key=lambda u: _overlap(q, u[1]), default=None)
                            # most of the question's words, and a fair share of the
                            # message's (not any question whose words a long task holds)
                            if hit is not None and hit[0] not in found and _overlap(
                                    q, hit[1]) >= 0.5 and _overlap(hit[1], q) >= 0.2:
                                found.add(hit[0])
                                out.append(Redo(seq, "re-ask", rseq, hit[0], None, q,
                                                _short(hit[1], 80)))
                        continue
                    if btype != "tool-call":
                        continue
                    use = classify_call(str(name), arguments)
                    call_id = str(call_id)
                    redo = None
                    if use.kind == "file-read" and use.target:
                        later = _read_range(use)
                        for hit_seq, hidden_use in reversed(reads.get_all(use.target)):
                            if _covers(_read_range(hidden_use), later) and not (
                                    changes.file_changed(use.target, hit_seq, seq)):
                                redo = ("re-read", hit_seq, use.target)
                                break
                    elif use.kind == "command" and use.tool.lower() in SHELL_TOOLS:
                        hit_seq = runs.get(normal_command(use.target))
                        if hit_seq is None:  # one part of a hidden compound command
                            hit_seq = parts.get(_plain(normal_command(use.target)))
                        if hit_seq is not None and not changes.run_changed(use, hit_seq, seq):
                            redo = ("re-run", hit_seq, use.target)
                    if (redo is None and use.kind == "command"
                            and use.tool.lower() not in SHELL_TOOLS):
                        hit_seq = calls.get(use.key) if _asks(use.tool) else None
                        if hit_seq is not None and not (
                                use.tool.lower() in TREE_SEARCHES
                                and changes.any_changed(hit_seq, seq)):
                            redo = ("repeat-call", hit_seq, use.target)
                    if redo is not None:
                        shown = (shown_args.get(arguments) if isinstance(arguments, str)
                                 else None)
                        if shown is None:
                            shown = _short(_canonical(arguments), 300)
                            if isinstance(arguments, str):
                                shown_args[arguments] = shown
                        out.append(Redo(seq, redo[0], rseq, redo[1], use.tool, shown,
                                        redo[2], call_id))
            elif kind == "user/message" and rseq in recorded:
                if author_from(kind, log.source_of(seq)) != "user":
                    continue
                text = log.texts([seq]).get(seq, "")
                body = text.lstrip()
                if not body or body.startswith(_REJECTED) or body.startswith(
                        "<task-notification>") or _HARNESS.match(body):
                    continue
                hit = max(users, key=lambda u: _overlap(text, u[1]), default=None)
                if hit is not None and _overlap(text, hit[1]) >= 0.6 and len(
                        _WORD.findall(text.lower())) >= 3:
                    out.append(Redo(seq, "re-instruct", rseq, hit[0], None, _short(text),
                                    "restates a hidden instruction"))
                elif _LOST.search(text):
                    target = _lost_target(text, rows, reads, users)
                    if target is not None:
                        out.append(Redo(seq, "re-instruct", rseq, target, None, _short(text),
                                        "says something was lost or forgotten"))
    return out, unmeasurable


@lru_cache(maxsize=1 << 14)
def _plain(command: str) -> str:
    """A simple command as compared for a re-run: its redirections taken off, spaced."""
    return " ".join(_REDIRECT.sub(" ", command).split())


class _Changes:
    """When the files of a log's work tree changed, read from every call of the log
    (built on first use): per path the seqs of the calls that changed it; the seqs of
    calls that may have changed any file (a checkout, a patch, a script the agent wrote
    itself, an edit of SWE-agent's open file); of package installs (which rewrite the
    manifest and lock files)."""

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader
        self.paths: _Paths | None = None
        self.anything: list[int] = []
        self.installs: list[int] = []
        self.every: list[int] = []
        # program -> (seq, the words it was given) of each call that changed its state
        self.states: dict[str, list[tuple[int, frozenset[str]]]] = {}

    def _build(self) -> _Paths:
        paths = _Paths()
        created = _Paths()
        every: set[int] = set()
        for seq in sorted(self.reader.acts):
            for kind, name, arguments, _ in self.reader.acts[seq]:
                if kind != "tool-call":
                    continue
                use = classify_call(str(name), arguments)
                if use.kind not in ("file-edit", "file-create") and not use.command:
                    continue
                eff = _effects(use)
                for p in eff.paths:
                    paths.add(p, seq, None)
                    every.add(seq)
                if eff.anything or (eff.script and created.get(eff.script) is not None):
                    self.anything.append(seq)
                    every.add(seq)
                if eff.installs:
                    self.installs.append(seq)
                    every.add(seq)
                if use.kind == "file-create" and use.target:
                    created.add(use.target, seq, None)
                for program, given in eff.states:
                    self.states.setdefault(program, []).append((seq, given))
        self.every = sorted(every)
        self.paths = paths
        return paths

    @staticmethod
    def _within(seqs: list[int], lo: int, hi: int) -> bool:
        return bisect_right(seqs, lo) < bisect_left(seqs, hi)

    def file_changed(self, path: str, lo: int, hi: int) -> bool:
        """Whether the file may have changed after seq `lo` and before seq `hi`."""
        paths = self.paths if self.paths is not None else self._build()
        if self._within(self.anything, lo, hi):
            return True
        parts = _parts(path)
        if not parts:
            return False
        if parts[-1] in MANIFESTS and self._within(self.installs, lo, hi):
            return True
        return any(lo < s < hi for s in paths.seqs_between(path, lo, hi))

    def any_changed(self, lo: int, hi: int) -> bool:
        """Whether any file may have changed after seq `lo` and before seq `hi`."""
        if self.paths is None:
            self._build()
        return self._within(self.every, lo, hi)

    def run_changed(self, use: ToolUse, lo: int, hi: int) -> bool:
        """Whether what a command depends on may have changed after `lo`, before `hi`:
        any file for one that runs, builds, tests or searches; else the files it names."""
        if self.paths is None:
            self._build()
        if _depends_on_files(use):
            return self._within(self.every, lo, hi)
        for part in command_parts(use.command or use.target):
            asked = _query(part)
            if asked is None:
                continue
            program, named = asked
            for seq, given in self.states.get(program, ()):
                if lo < seq < hi and (not named or named & given):
                    return True  # (a query naming nothing asks about all of it)
            if any(self.file_changed(w, lo, hi) for w in named if "/" in w or "." in w):
                return True
        return False


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.strip().strip("'\"").split("/") if p and p != ".")


class _Paths:
    """Paths to seqs (and a value each), in the order added, where a relative and an
    absolute path to one file are one path (the shorter is a tail of the longer, by whole
    components)."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[tuple[tuple[str, ...], int, Any]]] = {}

    def add(self, path: str, seq: int, value: Any) -> None:
        parts = _parts(path)
        if parts:
            self.by_name.setdefault(parts[-1], []).append((parts, seq, value))

    def get_all(self, path: str) -> list[tuple[int, Any]]:
        """(seq, value) of every entry for this path, in the order added."""
        parts = _parts(path)
        if not parts:
            return []
        return [(s, v) for p, s, v in self.by_name.get(parts[-1], ())
                if p[-len(parts):] == parts or parts[-len(p):] == p]

    def get(self, path: str) -> int | None:
        found = self.get_all(path)
        return found[-1][0] if found else None

    def seqs_between(self, path: str, lo: int, hi: int) -> Iterator[int]:
        """The seqs after `lo` and before `hi` of this path's entries, when they were
        added in the order of their seqs (as `_Changes` adds them)."""
        parts = _parts(path)
        rows = self.by_name.get(parts[-1], ()) if parts else ()
        if not rows:
            return
        at = bisect_right(rows, lo, key=lambda r: r[1])
        for p, s, _ in rows[at:]:
            if s >= hi:
                break
            if p[-len(parts):] == parts or parts[-len(p):] == p:
                yield s

    def items(self) -> Iterator[tuple[str, int]]:
        for rows in self.by_name.values():
            for parts, seq, _ in rows:
                yield "/".join(parts), seq


def _lost_target(text: str, rows: list[Fact], reads: _Paths,
                 users: list[tuple[int, str]]) -> int | None:
    """The hidden item a user's "you lost / forgot ..." is about: a hidden read of a
    file it names, else the hidden user message it overlaps most, else the latest."""
    for form, seq in reads.items():
        base = form.rsplit("/", 1)[-1]
        if base and base in text:
            return seq
    if users:
        best = max(users, key=lambda u: _overlap(text, u[1]))
        return best[0]
    facts = [f for f in rows if f.kind != "unmeasurable"]
    return facts[-1].seq if facts else None


def _brackets(log: LogData) -> list[Any]:
    got: list[Any] | None = log.cache.get("ledger_brackets")
    if got is None:
        got = log.cache["ledger_brackets"] = brackets(log)
    return got


def _recorded(log: LogData) -> set[int]:
    """The replaces that are recorded compactions (inside a compaction bracket or by a
    summary), where a user could notice the loss."""
    traces = _brackets(log)  # sorted by start
    starts = [b.start for b in traces]
    reach = list(accumulate((b.end for b in traces), max))  # the furthest end so far
    out = set()
    for plan in log.replaces:  # in a bracket: one that starts at or before it ends at or after
        at = bisect_right(starts, plan.seq) - 1
        if at >= 0 and reach[at] >= plan.seq:
            out.add(plan.seq)
    return out


def _inside_brackets(log: LogData) -> set[int]:
    got: set[int] | None = log.cache.get("ledger_inside")
    if got is None:
        replaces = {p.seq for p in log.replaces}
        got = {s for b in _brackets(log) for s in range(b.start, b.end + 1)
               if s not in replaces}
        log.cache["ledger_inside"] = got
    return got


def facts_rows(ledger: Ledger) -> list[dict[str, Any]]:
    """The ledger as rows (for `notebook.facts_df`)."""
    return [{"replace_seq": f.replace_seq, "seq": f.seq, "kind": f.kind, "text": f.text,
             "kept": f.kept, "needed": f.needed, "redo_seqs": list(f.redo_seqs),
             "rank": f.rank} for f in ledger.facts]


def audit_facts(ledger: Ledger, replace_seqs: Sequence[int]
                ) -> tuple[list[list[str]], list[int], list[int]]:
    """(facts_at_risk: the top-ranked texts, n_at_risk: the true count, n_unmeasurable)
    of each replace, in this order."""
    by = ledger.by_replace()
    tops, counts, unmeasurable = [], [], []
    for seq in replace_seqs:
        rows = by.get(seq, [])
        facts = sorted((f for f in rows if f.kind != "unmeasurable"),
                       key=lambda f: f.rank or 0)
        tops.append([f"{f.kind}: {f.text}" for f in facts[:TOP]])
        counts.append(len(facts))
        unmeasurable.append(sum(f.kind == "unmeasurable" for f in rows))
    return tops, counts, unmeasurable
