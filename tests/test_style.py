"""House style the linter does not check: no backslash line continuation in the package
(a long expression is wrapped in brackets instead; issue 24 point 4)."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "surface_lab"

# Tokens after which the next token may start on a later line without a backslash.
_LINE_ENDS = {tokenize.NEWLINE, tokenize.NL, tokenize.ENCODING}


def backslash_continuations(source: str) -> list[int]:
    """The lines (1-based) that end in a backslash continuation, outside any string.

    The tokenizer emits NEWLINE or NL at every line end except a backslash continuation
    (inside brackets too), and a string is one token however many lines it spans; so a
    token starting on a later line than the previous token ended, with no line end
    between them, follows a backslash.
    """
    lines = source.splitlines()
    found: list[int] = []
    previous: tokenize.TokenInfo | None = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if (previous is not None and previous.type not in _LINE_ENDS
                and token.start[0] > previous.end[0]):
            found.extend(row for row in range(previous.end[0], token.start[0])
                         if lines[row - 1].rstrip().endswith("\\"))
        previous = token
    return found


def test_the_scanner_finds_continuations_and_leaves_strings_alone() -> None:
    source = (
        'x = 1 + \\\n'
        '    2\n'
        'y = (1 +\n'
        '     2)\n'
        'z = [1, \\\n'
        '     2]\n'
        's = """a \\\n'
        'b"""\n'
        't = "a \\\n'
        'b"\n'
        'if x and \\\n'
        '        y:\n'
        '    pass\n'
        '# a comment \\\n'
        'u = 3\n'
    )
    assert backslash_continuations(source) == [1, 5, 11]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_backslash_continuation(path: Path) -> None:
    rows = backslash_continuations(path.read_text(encoding="utf-8"))
    where = ", ".join(f"{path.relative_to(ROOT).as_posix()}:{row}" for row in rows)
    assert not rows, f"backslash line continuation (wrap the expression in brackets): {where}"
