"""Facts at risk: the mentions in hidden content a model may need again (paths, URLs, code
symbols, error lines, what the user decided), with the noise a log is full of (counters,
hashes, call ids, repeated log lines) filtered out and the rest ranked.

The rules are data: `FactRules` (kinds of mention with their patterns and weights, noise
filters, the repeated-line and series thresholds) can be built from a mapping or a JSON
file, and `DEFAULT_RULES.to_dict()` is the documented starting point to edit.
`LEGACY_RULES` is the audit's first, purely lexical rule set, kept for comparison."""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property, lru_cache
from typing import Any

from ..events import message_of
from ..messages import called_tools, message_text

__all__ = [
    "DEFAULT_RULES",
    "LEGACY_RULES",
    "FactRules",
    "KeptText",
    "Mention",
    "MentionKind",
    "NoiseFilter",
    "Raw",
    "author_from",
    "author_of",
    "facts_at_risk",
    "find_mentions",
    "fold",
    "score_facts",
    "texts_at_risk",
    "tool_names",
]

_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class MentionKind:
    """One kind of mention.

    Args:
        name: the kind's name (`path`, `url`, ...).
        pattern: a regular expression; its group `m` (or the whole match) is the mention.
        weight: its rank weight (higher first).
        authors: only in messages of these authors (`user`, `assistant`, `tool`,
            `context`, `summary`); empty means any.
        ignore_case: match case-insensitively.
        consume: blank its matches before the later kinds run (a URL's parts are not
            paths of their own).
        within_word: its matches never hold whitespace, are never empty, and what they
            look at around them (`\\b`, lookarounds) treats whitespace as the text's edge:
            then a text's matches are those of its words, and each distinct word of a log
            is matched once (see `_WordMatches`). A speed-up: it never changes a result
            when true, and must not be set when it is not.
        needs: every match holds one of these strings (compared case-insensitively when
            `ignore_case`), so a text holding none is not searched: a speed-up, under the
            same condition.
    """

    name: str
    pattern: str
    weight: float = 1.0
    authors: tuple[str, ...] = ()
    ignore_case: bool = False
    consume: bool = False
    within_word: bool = False
    needs: tuple[str, ...] = ()

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.I if self.ignore_case else 0)

    @cached_property
    def _needles(self) -> tuple[str, ...] | None:
        """`needs` as looked for (folded when `ignore_case`); None: search every text (no
        needs, or one that `fold` does not compare exactly: not ASCII)."""
        if not self.needs or (self.ignore_case and not all(map(str.isascii, self.needs))):
            return None
        return tuple(map(fold, self.needs)) if self.ignore_case else self.needs

    def may_match(self, text: str, folded: Callable[[], str]) -> bool:
        """False only when `text` holds none of `needs` (`folded()` is its `fold`)."""
        needles = self._needles
        if needles is None:
            return True
        within = folded() if self.ignore_case else text
        return any(map(within.__contains__, needles))


@dataclass(frozen=True)
class NoiseFilter:
    """Mentions (of `kinds`, or of any kind when empty) that fully match `pattern` are
    noise, for `reason`."""

    name: str
    pattern: str
    reason: str = ""
    kinds: tuple[str, ...] = ()

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


@dataclass(frozen=True)
class FactRules:
    """The whole configuration of mention finding; every field is plain data.

    Args:
        kinds: the kinds of mention, matched in order.
        noise: filters; a mention matching any of them is dropped.
        strip: patterns blanked from the text before matching (structure, not content,
            such as the keys of a rendered JSON object).
        repeated_line_min: a line whose digit-blind template occurs this many times in one
            text is a repeated log line: its mentions count once, as their template
            (`module_#.o`); 0 turns this off.
        series_min: this many distinct mentions that differ only in their digits collapse
            into one template mention (`handler_#`); 0 turns this off.
        max_mentions: keep the best-ranked this many per replace (None keeps all).
        ranked: order by rank; otherwise in natural order (`handler_2` before
            `handler_10`), as the legacy rules did.
        ignore_tool_names: the names of the tools called in the log are not facts (the
            tool list is sent with every request).
    """

    kinds: tuple[MentionKind, ...]
    noise: tuple[NoiseFilter, ...] = ()
    strip: tuple[str, ...] = ()
    repeated_line_min: int = 3
    series_min: int = 4
    max_mentions: int | None = 50
    ranked: bool = True
    ignore_tool_names: bool = True

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FactRules:
        """Rules from a mapping shaped like `to_dict()`'s (missing keys keep defaults)."""
        fields = dict(data)
        fields["kinds"] = tuple(MentionKind(**_tuples(k)) for k in data.get("kinds", ()))
        fields["noise"] = tuple(NoiseFilter(**_tuples(n)) for n in data.get("noise", ()))
        fields["strip"] = tuple(data.get("strip", ()))
        return cls(**fields)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> FactRules:
        """Rules from a JSON file shaped like `to_dict()`'s."""
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def to_dict(self) -> dict[str, Any]:
        """The rules as JSON-ready data."""
        out = asdict(self)
        for name in ("kinds", "noise"):
            out[name] = [{k: list(v) if isinstance(v, tuple) else v for k, v in item.items()}
                         for item in out[name]]
        out["strip"] = list(self.strip)
        return out

    def without(self, *names: str) -> FactRules:
        """These rules with the named kinds and noise filters taken out."""
        return replace(self, kinds=tuple(k for k in self.kinds if k.name not in names),
                       noise=tuple(n for n in self.noise if n.name not in names))

    def is_noise(self, text: str, kind: str) -> bool:
        """Whether a mention of this kind matches one of the noise filters (remembered
        for the next replace that hides it; at most 2**16 verdicts are kept)."""
        verdicts = self._noise_verdicts
        verdict = verdicts.get((text, kind))
        if verdict is None:
            if len(verdicts) >= 1 << 16:
                verdicts.clear()
            verdict = verdicts[(text, kind)] = any(
                f.regex.fullmatch(text) for f in self.noise if not f.kinds or kind in f.kinds)
        return verdict

    @cached_property
    def weights(self) -> dict[str, float]:
        """Each kind's weight, by name."""
        return {k.name: k.weight for k in self.kinds}

    @cached_property
    def _noise_verdicts(self) -> dict[tuple[str, str], bool]:
        return {}

    @cached_property
    def strip_regex(self) -> re.Pattern[str] | None:
        return re.compile("|".join(f"(?:{p})" for p in self.strip)) if self.strip else None

    def stripped(self, text: str) -> str:
        """`text` with the `strip` patterns blanked (remembered for the kept side of the
        replaces that follow; at most 2**16 texts are kept)."""
        if self.strip_regex is None:
            return text
        done = self._stripped
        out = done.get(text)
        if out is None:
            if len(done) >= 1 << 16:
                done.clear()
            out = done[text] = self.strip_regex.sub(" ", text)
        return out

    @cached_property
    def _stripped(self) -> dict[str, str]:
        return {}

    def word_matches(self, kind: MentionKind) -> _WordMatches:
        """The word-by-word matcher of a `within_word` kind of these rules."""
        return self._word_matches[id(kind)]

    @cached_property
    def _word_matches(self) -> dict[int, _WordMatches]:
        return {id(k): _WordMatches(k) for k in self.kinds if k.within_word}


def _tuples(kind: Mapping[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in kind.items()}


_EXTENSIONS = (r"py|js|ts|tsx|md|txt|json|jsonl|log|ya?ml|toml|rs|go|c|h|cpp|java|sh|html|"
               r"css|sql|csv|o|ipynb|lock|cfg|ini")
_LEGACY_PATH = (r"(?<![\w/])(?:[\w.-]+/)+[\w.-]*\w|\b[\w-]+\.(?:py|js|ts|md|txt|json|"
                r"jsonl|log|ya?ml|toml|rs|go|c|h|cpp|java|sh|html|css|sql|csv|o)\b")
_SYMBOL = (r"\b[A-Za-z_][A-Za-z0-9_]*(?=\()|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"
           r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b|\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b")

LEGACY_RULES = FactRules(
    kinds=(
        MentionKind("url", r"https?://[^\s<>\"')\]]+", consume=True, within_word=True),
        MentionKind("path", _LEGACY_PATH, within_word=True),
        MentionKind("symbol", _SYMBOL, within_word=True),
        # 3+ digits, not a "12:" line-number prefix of tool output
        MentionKind("number", r"(?<![\w.])\d{3,}(?:\.\d+)?(?![\w.:])", within_word=True),
    ),
    repeated_line_min=0, series_min=0, max_mentions=None, ranked=False,
    ignore_tool_names=False,
)

DEFAULT_RULES = FactRules(
    kinds=(
        MentionKind("url", r"https?://[^\s<>\"')\]]+", weight=3.0, consume=True,
                    within_word=True),
        # a short tool result is all signal: the answer to the call
        MentionKind("output", r"\A\s*(?P<m>[^\n]{1,100}(?:\n[^\n]{0,100}){0,5}?)\s*\Z",
                    weight=2.5, authors=("tool",), consume=True),
        # a line that reports a failure, the way tools and compilers print them
        MentionKind("error", r"(?m)^[ \t]*(?P<m>[^\n]{0,80}?\b(?:error|exception|traceback|"
                             r"failed|failure|fatal|denied|not found|no such file|"
                             r"cannot|can't|panic(?:ked)?|refused|timed out)\b[^\n]{0,80})",
                    weight=3.0, authors=("tool", "assistant", "context"), ignore_case=True,
                    consume=True, needs=("error", "exception", "traceback", "fail", "fatal",
                                         "denied", "not found", "no such file", "cannot",
                                         "can't", "panic", "refused", "timed out")),
        # a clause in which the user states a requirement or a decision
        MentionKind("decision", r"(?P<m>[^.;:!?\n]{0,100}?\b(?:must|should|always|never|"
                                r"don't|do not|only|exact(?:ly)?|prefer|instead of|make sure|"
                                r"remember|keep|use|uses|finish|record)\b[^.;!?\n]{0,100})",
                    weight=3.0, authors=("user",), ignore_case=True, consume=True,
                    needs=("must", "should", "always", "never", "don't", "do not", "only",
                           "exact", "prefer", "instead of", "make sure", "remember", "keep",
                           "use", "finish", "record")),
        MentionKind("literal", r"`(?P<m>[^`\n]{2,80})`|\"(?P<m2>[^\"\n]{3,80})\"",
                    weight=2.0, authors=("user", "context"), needs=("`", '"')),
        MentionKind("path", r"(?<![\w/.-])(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]*\w"
                            r"|(?<![\w/.-])[\w-]+\.(?:" + _EXTENSIONS + r")\b",
                    weight=2.0, consume=True, within_word=True),
        MentionKind("symbol", _SYMBOL, weight=1.0, within_word=True),
        # a number that names something: a line, a port, an exit code, an issue, an id
        MentionKind("quantity", r"\b(?:line|port|pid|exit code|status|issue|pr|id|version|"
                                r"code)\s+#?\d+(?:\.\d+)*\b", weight=1.5, ignore_case=True,
                    needs=("line", "port", "pid", "status", "issue", "pr", "id", "version",
                           "code")),
        MentionKind("version", r"(?<![\w.])v?\d+\.\d+\.\d+(?:[-+][\w.]+)?(?![\w.])",
                    weight=1.5, within_word=True),
    ),
    noise=(
        NoiseFilter("counter", r"[#\d]+(?:[.:,][#\d]+)*", "a bare counter or number"),
        NoiseFilter("sequence", r"(?i)(?:seq|step|turn|row|item|event|entry)[ _-]?[#\d]+",
                    "a sequence number of the log or of tool output"),
        NoiseFilter("hash", r"(?i)(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}"
                            r"|[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}",
                    "a content hash or uuid"),
        NoiseFilter("call-id", r"(?i)(?:call|toolu|tool|msg|req|resp|fc|item|run|cmp|"
                               r"chatcmpl|ws)[_-][\w-]*[#\d][\w-]*",
                    "a tool-call, message or request id"),
        NoiseFilter("short-clause", r"\W*(?:\w+\W*){1,2}", "too short to state anything",
                    kinds=("decision",)),
        NoiseFilter("no-word", r"[\W_]*", "punctuation left after stripping structure"),
        NoiseFilter("template-only", r"[^A-Za-z]*#[^A-Za-z]*",
                    "a repeated line's template with no name in it"),
    ),
    strip=(r"['\"]type['\"]\s*:\s*['\"][\w/-]*['\"]",  # a rendered content part's type
           r"['\"][A-Za-z_][\w-]*['\"]\s*:",  # keys of a rendered JSON object or dict
           r"\[trimmed for fixture\]"),
)


@dataclass(frozen=True)
class Mention:
    """One mention: its text, kind, how often it occurs and its rank score."""

    text: str
    kind: str
    count: int = 1
    score: float = 0.0
    series: bool = False

    @property
    def regex(self) -> re.Pattern[str]:
        """Where the mention occurs in other text (a template matches any member)."""
        return _mention_regex(self.text, self.series)


@lru_cache(maxsize=1 << 14)  # an audit asks again for the mentions every replace hides
def _mention_regex(text: str, series: bool) -> re.Pattern[str]:
    parts = (r"\d+" if p == "#" else re.escape(p) for p in re.split(r"(#)", text))
    body = "".join(parts) if series else re.escape(text)
    return re.compile(r"(?<![\w])" + body + r"(?![\w])" if text[:1].isalnum()
                      and text[-1:].isalnum() else body, re.I)


def author_of(event: Mapping[str, Any]) -> str:
    """Who wrote a surface event, for the kinds' `authors`: user, assistant, tool, context
    or summary (a compaction's or an importer's replacement)."""
    message = message_of(event)
    return author_from(str(event.get("type")),
                       message.get("source") if isinstance(message, Mapping) else None)


def author_from(kind: str, source: Any) -> str:
    """`author_of` an event of type `kind` whose message has this `source`."""
    if kind == "tool/result":
        return "tool"
    if kind == "assistant/message":
        return "assistant"
    if kind == "context/message":
        return "context"
    source_kind = source.get("kind") if isinstance(source, Mapping) else None
    return "user" if source_kind in ("user", None) else "summary"


def _template(text: str) -> str:
    return _DIGITS.sub("#", text)


# a mention's template, remembered: mentions recur across the texts and replaces of a log
_mention_template = lru_cache(maxsize=1 << 16)(_template)


def find_mentions(text: str, *, author: str = "user", rules: FactRules = DEFAULT_RULES,
                  ignore: Iterable[str] = ()) -> list[Mention]:
    """The mentions in one message's text, noise removed, best first.

    Args:
        text: the message text.
        author: who wrote it (see `author_of`); some kinds apply to some authors only.
        rules: the configuration.
        ignore: exact mentions that are never facts (such as the tool names).

    Returns:
        One `Mention` per distinct mention, with its count in `text`.
    """
    return _finish(_raw_mentions(text, author, rules), rules, set(ignore))


Raw = dict[tuple[str, str, bool], int]  # (mention, kind, from a repeated line) -> count


def _raw_mentions(text: str, author: str, rules: FactRules) -> Raw:
    """How often each (mention, kind, from a repeated line) occurs in `text`, in order of
    first occurrence (kinds in their order, each kind's matches in text order).

    A match is from a repeated line when the digit-blind template of its line (from the
    line's start before the match to the line's end after it, in the text as the earlier
    consuming kinds left it) is one of the text's repeated lines. The flag is looked up
    once per line and kind, and not at all when no line repeats. A `within_word` kind is
    matched word by word (`_WordMatches`); a kind whose `needs` the text lacks is not
    searched."""
    scan = _Scan(rules.stripped(text), rules.repeated_line_min)
    out: Raw = {}
    for kind in rules.kinds:
        if kind.authors and author not in kind.authors:
            continue
        if kind.within_word:
            blanks = rules.word_matches(kind).add(scan.words(), out, bool(scan.repeated))
            if blanks:
                scan.blank_words(blanks)
        elif kind.may_match(scan.text_for(kind), scan.folded):
            _search(kind, scan, out)
    return out


def _search(kind: MentionKind, scan: _Scan, out: Raw) -> None:
    """Count the matches of `kind` in the scanned text into `out`."""
    text, repeated = scan.text(), scan.repeated
    found: list[tuple[int, int]] = []
    lines: dict[tuple[int, int], bool] = {}  # (start, end) of a line -> repeated
    for match in kind.regex.finditer(text):
        mention = _mention_of(match)
        if not mention:
            continue
        from_repeated = False
        if repeated:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            key = (start, end if end >= 0 else len(text))
            flag = lines.get(key)
            if flag is None:
                flag = lines[key] = _template(text[key[0] : key[1]].strip()) in repeated
            from_repeated = flag
        seen = (mention, kind.name, from_repeated)
        out[seen] = out.get(seen, 0) + 1
        found.append(match.span())
    if kind.consume and found:
        scan.blank_spans(found)


class _Scan:
    """One text as the kinds see it in turn: the earlier consuming kinds' matches blanked.
    Blanks of words are kept as words until a kind needs the text itself."""

    def __init__(self, text: str, repeated_line_min: int) -> None:
        self._text = text
        self.repeated: set[str] = set()
        if repeated_line_min and len(text.splitlines()) >= repeated_line_min:
            # templating the whole text is templating each line: digits are never line
            # breaks or blanks, so neither splitlines nor strip sees a difference
            counts = Counter(line.strip() for line in _template(text).splitlines())
            self.repeated = {t for t, n in counts.items() if n >= repeated_line_min and t}
        self._words: Words | None = None  # the words as they are now, when counted
        self._folded: str | None = None  # the `fold` of the text, when made
        self._pending: list[dict[str, str]] = []  # word blanks not yet in `_text`

    def text(self) -> str:
        """The text as it is now."""
        if self._pending:
            for blanks in self._pending:
                self._text = "".join([blanks.get(p, p) for p in _BLANKS.split(self._text)])
            self._pending.clear()
            self._folded = None
        return self._text

    def text_for(self, kind: MentionKind) -> str:
        """What `kind.may_match` may look at: the text before pending word blanks when
        no need holds a space (blanking only turns characters into spaces), else the
        text."""
        if self._pending and any(" " in n for n in kind.needs):
            return self.text()
        return self._text

    def folded(self) -> str:
        """`fold` of the text `text_for` gave."""
        if self._folded is None:
            self._folded = fold(self._text)
        return self._folded

    def words(self) -> Words:
        if self._words is None:
            self._words = _words(self.text(), self.repeated)
        return self._words

    def blank_words(self, blanks: dict[str, str]) -> None:
        """Blank these words (word -> the word with its matches blanked)."""
        self._pending.append(blanks)
        if self.repeated or self._words is None:
            self._words = None  # a line's blanks may change its template: count anew
            return
        words: Words = Counter()  # in order of first occurrence, as argued in _WordMatches
        for word, n in self._words.items():
            blanked = blanks.get(word)
            if blanked is None:
                words[word] += n
            else:
                for part in blanked.split():
                    words[part] += n
        self._words = words

    def blank_spans(self, spans: list[tuple[int, int]]) -> None:
        self._text = _blanked(self.text(), spans)
        self._words = self._folded = None


_BLANKS = re.compile(r"(\s+)")  # splits a text into words and the blanks between them

# A text's words, counted in order of first occurrence; a word on a repeated line is
# counted apart, marked by a line feed after it (no word holds one).
Words = Counter[str]
_MARK = "\n"


def _words(text: str, repeated: set[str]) -> Words:
    """The words of `text`; those on a `repeated` line (as `_search` finds a match's
    line: between line feeds, templated) marked."""
    if not repeated:
        return Counter(text.split())
    keys: list[str] = []
    # the template of each line is that line of the text's template (see `_Scan`)
    for line, template in zip(text.split("\n"), _template(text).split("\n"), strict=True):
        keys += ([w + _MARK for w in line.split()] if template.strip() in repeated
            else line.split())
    return Counter(keys)


def _mention_of(match: re.Match[str]) -> str:
    """A match's mention: its first group that matched, else all of it, stripped."""
    groups = match.groupdict()
    value = next((v for v in groups.values() if v), None) if groups else None
    return (value or match.group(0)).strip()


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each of these (ordered, disjoint) spans blanked by spaces."""
    pieces, at = [], 0
    for a, b in spans:
        pieces += [text[at:a], " " * (b - a)]
        at = b
    return "".join([*pieces, text[at:]])


_WORD_MEMO = 1 << 16  # words a `_WordMatches` remembers at most


class _WordMatches:
    """The matches of a `within_word` kind, one distinct word at a time: each word is
    matched once (up to `_WORD_MEMO` are remembered; then they are forgotten together).

    A text's matches are its words' matches in text order, and the first occurrence of a
    mention is in the first word (in order of first occurrence) whose matches hold it, so
    going through the distinct words in that order (those on a repeated line apart), each
    counted as often as it occurs, gives the same mentions, flags, counts and order as
    matching the text."""

    def __init__(self, kind: MentionKind) -> None:
        self.kind = kind
        self.known: dict[str, tuple[tuple[str, ...], str]] = {}  # word -> mentions, blanked
        self.hits: set[str] = set()  # the known words with a match, marked and not

    def add(self, words: Words, out: Raw, marked: bool) -> dict[str, str]:
        """Count the mentions in `words` (see `_words`; `marked` when some may be) into
        `out`; return how a consuming kind blanks the words it matched."""
        known = self.known
        plain = {w.rstrip(_MARK) for w in words} if marked else set(words)
        new = plain.difference(known)
        if new:
            if len(known) + len(new) > _WORD_MEMO:
                known.clear()
                self.hits.clear()
                new = plain
            for word in new:
                self._match(word)
        hits = self.hits
        blanks: dict[str, str] = {}
        name = self.kind.name
        for key in list(filter(hits.__contains__, words)):
            word = key.rstrip(_MARK) if marked else key
            mentions, blanked = known[word]
            n = words[key]
            on_repeated = word != key
            for mention in mentions:
                seen = (mention, name, on_repeated)
                out[seen] = out.get(seen, 0) + n
            if self.kind.consume:
                blanks[word] = blanked
        return blanks

    def _match(self, word: str) -> None:
        regex = self.kind.regex
        if regex.search(word) is None:  # most words: nothing to match, nothing blanked
            self.known[word] = ((), word)
            return
        mentions, spans = [], []
        for match in regex.finditer(word):
            mention = _mention_of(match)
            if mention:
                mentions.append(mention)
                spans.append(match.span())
        self.known[word] = (tuple(mentions), _blanked(word, spans))
        if mentions:
            self.hits.update((word, word + _MARK))


# Characters that match an ASCII letter under re.IGNORECASE but do not lower() to it.
_UNLOWERED = "\u0130\u0131\u017f\u212a"
_FOLD = str.maketrans(dict(zip(_UNLOWERED, "iisk", strict=True)))


def fold(text: str) -> str:
    """`text` lowered so that whatever an ASCII string matches in it case-insensitively
    (`re.IGNORECASE`) occurs in it lowered: the cheap test before a search."""
    if text.isascii() or not any(c in text for c in _UNLOWERED):
        return text.lower()
    return text.translate(_FOLD).lower()


def _collapsed(raw: Raw) -> Raw:
    """`raw` with each mention from a repeated line that has digits counted as its
    template (`module_#.o`), a series: what `_finish` ranks (and what an audit's memo
    keeps of a text, since collapsing texts one by one and adding them up is collapsing
    their sum, in the same order)."""
    if not any(from_repeated for _, _, from_repeated in raw):
        return raw
    out: Raw = {}
    for (mention, kind, from_repeated), n in raw.items():
        series = from_repeated and _mention_template(mention) != mention  # has digits
        key = (_mention_template(mention) if series else mention, kind, series)
        out[key] = out.get(key, 0) + n
    return out


# (order, natural key of the text, text, kind, count, series, score); order is -score
# when the rules rank, else 0
Ranked = tuple[float, tuple[tuple[int, int, str], ...], str, str, int, bool, float]


def _finish(raw: Raw, rules: FactRules, ignore: set[str] | frozenset[str]) -> list[Mention]:
    """The mentions of `raw` (collapsed or not), noise removed, best first."""
    return [Mention(text, kind, n, score, series)
            for _, _, text, kind, n, series, score in _ranked(_collapsed(raw), rules, ignore)]


def _ranked(counts: Raw, rules: FactRules, ignore: set[str] | frozenset[str]
            ) -> list[Ranked]:
    """`_finish` of collapsed counts, as sortable tuples: families of `series_min`
    members collapsed, noise and `ignore` removed, scored and ordered."""
    weights = rules.weights
    if rules.series_min:  # name_1, name_2, ... name_40: one mention
        families: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
        for key in counts:
            if not key[2]:
                template = _mention_template(key[0])
                if template != key[0]:
                    families.setdefault((template, key[1]), []).append(key)
        big = [(t, m) for t, m in families.items() if len(m) >= rules.series_min]
        if big:
            counts = dict(counts)
            for (template, kind), members in big:
                total = sum(counts.pop(m) for m in members)
                key = (template, kind, True)
                counts[key] = counts.get(key, 0) + total
    out: list[Ranked] = []
    for (text, kind, series), n in counts.items():
        if text in ignore or rules.is_noise(text, kind):
            continue
        # a family counts once, at half weight; a repeated name gains a little
        weight = weights.get(kind, 1.0)
        score = round(weight * 0.5 if series else weight + 0.25 * math.log(n), 3)
        out.append((-score if rules.ranked else 0.0, _natural(text), text, kind, n, series,
                    score))
    out.sort(key=_rank_key)
    return out


def _rank_key(item: Ranked) -> tuple[float, tuple[tuple[int, int, str], ...]]:
    return item[0], item[1]


@lru_cache(maxsize=1 << 16)
def _natural(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key that puts handler_2 before handler_10 (remembered: mentions recur, so it
    is a tuple, which no caller can change under the cache)."""
    return tuple((0, int(part), "") if part.isdecimal() else (1, 0, part)
                 for part in _DIGIT_RUNS.split(text))


_DIGIT_RUNS = re.compile(r"(\d+)")


def tool_names(events: Iterable[Mapping[str, Any]]) -> set[str]:
    """The names of the tools the assistant messages among `events` call."""
    names: set[str] = set()
    for event in events:
        if event.get("type") == "assistant/message":
            message = message_of(event)
            names.update(called_tools(message.get("content")
                                      if isinstance(message, Mapping) else None))
    return names


def facts_at_risk(hidden: Sequence[Mapping[str, Any]], kept: Sequence[Mapping[str, Any]],
                  *, rules: FactRules = DEFAULT_RULES) -> list[Mention]:
    """Mentions in the `hidden` surface events that none of the `kept` ones (the
    replacement and the rest of the surface) still shows, best first.

    A mention counts as kept when its text (or, for a template, any member) occurs in a
    kept event's text (with `rules.strip` blanked), whatever the rules would make of it.
    """
    ignore = tool_names([*hidden, *kept]) if rules.ignore_tool_names else set()
    return texts_at_risk([(message_text(e), author_of(e)) for e in hidden],
                         [message_text(e) for e in kept], rules=rules, ignore=ignore)


def texts_at_risk(hidden: Iterable[tuple[str, str]], kept: Sequence[str] | KeptText, *,
                  rules: FactRules = DEFAULT_RULES, ignore: Iterable[str] = (),
                  memo: MutableMapping[tuple[str, str], Raw] | None = None
                  ) -> list[Mention]:
    """`facts_at_risk` from texts: the hidden (text, author) pairs, the kept texts (or
    their `KeptText`) and the mentions never to report (`facts_at_risk` ignores the names
    of the tools called in either, when `rules.ignore_tool_names`).

    `memo` keeps each distinct (text, author)'s matches for the next call, for an audit
    whose replaces hide the same texts again; use one memo with one set of rules only.
    """
    raw: Raw = {}
    for text, author in hidden:
        found = memo.get((text, author)) if memo is not None else None
        if found is None:
            found = _collapsed(_raw_mentions(text, author, rules))
            if memo is not None:
                memo[(text, author)] = found
        if not raw:
            raw = dict(found)
            continue
        for key, n in found.items():
            raw[key] = raw.get(key, 0) + n
    ranked = _ranked(raw, rules, ignore if isinstance(ignore, set | frozenset)
                     else set(ignore))
    if not ranked:
        return []
    shown = kept if isinstance(kept, KeptText) else KeptText.of(kept, rules)
    limit = len(ranked) if rules.max_mentions is None else rules.max_mentions
    at_risk: list[Mention] = []
    for _, _, text, kind, n, series, score in ranked:
        if len(at_risk) >= limit:
            break
        mention = Mention(text, kind, n, score, series)
        if not shown.shows(mention):
            at_risk.append(mention)
    return at_risk


@dataclass(frozen=True)
class KeptText:
    """What a replace keeps in view: the kept messages' texts, each with `rules.strip`
    blanked, joined by newlines (`text`), and the `fold` of each joined the same way
    (`folded`, for the cheap test of `shows`)."""

    text: str
    folded: str

    @classmethod
    def of(cls, texts: Iterable[str], rules: FactRules) -> KeptText:
        stripped = [rules.stripped(t) for t in texts]
        return cls("\n".join(stripped), "\n".join(map(fold, stripped)))

    @cached_property
    def _aligned(self) -> bool:
        """Whether each character of `text` folds to one character (so `folded` has each
        at the same place): no character folds to none."""
        return len(self.folded) == len(self.text)

    def shows(self, mention: Mention) -> bool:
        """Whether the mention (or, for a template, a member) occurs in the kept text.

        An ASCII mention matches where its lowered text is in `folded` (`fold` lowers
        exactly the characters re.IGNORECASE matches to ASCII ones), with neighbours
        that are not word characters when it starts and ends with one (as
        `Mention.regex` requires): that is checked without the regex."""
        if mention.series or not mention.text.isascii():
            return mention.regex.search(self.text) is not None
        needle = mention.text.lower()
        at = self.folded.find(needle)
        if at < 0:
            return False
        if not self._aligned:
            return mention.regex.search(self.text) is not None
        if not (needle[:1].isalnum() and needle[-1:].isalnum()):
            return True
        text, after = self.text, len(needle)
        while at >= 0:
            if not (at and _is_word(text[at - 1])) and not (
                    at + after < len(text) and _is_word(text[at + after])):
                return True
            at = self.folded.find(needle, at + 1)
        return False


def _is_word(char: str) -> bool:
    """Whether `\\w` matches this character."""
    return char.isalnum() or char == "_"


def score_facts(predicted: Sequence[str], matters: Sequence[str]) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) of one replace's reported
    facts against the mentions labelled as mattering.

    A labelled mention is found when a reported one contains it or is contained in it
    (case-insensitive), or when a reported template (`handler_#`) matches it or it
    matches a reported template; each labelled mention is credited once, so a list that
    reports forty members of one family where one was needed has thirty-nine false
    positives.
    """
    credited: set[int] = set()
    tp = fp = 0
    for text in predicted:
        hit = next((i for i, gold in enumerate(matters) if i not in credited
                    and _same(text, gold)), None)
        if hit is None:
            fp += 1
        else:
            credited.add(hit)
            tp += 1
    return tp, fp, len(matters) - len(credited)


def _same(predicted: str, gold: str) -> bool:
    a, b = predicted.lower(), gold.lower()
    if a in b or b in a:
        return True
    for template, other in ((a, b), (b, a)):
        if "#" in template:
            body = "".join(r"\d+" if p == "#" else re.escape(p)
                           for p in re.split(r"(#)", template))
            if re.fullmatch(body, other) or re.fullmatch(body, _template(other)):
                return True
    return False
