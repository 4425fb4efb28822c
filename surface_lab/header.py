"""The session header (SPEC 2): checking and normalising it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NoReturn

from .errors import AdmissionError, UnsupportedFormatError
from .events import SESSION_FORMAT_VERSION
from .jsonvalue import FrozenDict, as_int

__all__ = ["HEADER_KEYS", "check_header", "is_placeholder"]

# Key order of a header (after the JSONL line's leading "type": "session").
HEADER_KEYS = (
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
)
_RETIRED_KEYS = ("sandboxMode", "approvalPolicy")
_PLACEHOLDER = re.compile(r"\{\{[A-Za-z0-9_.-]+\}\}")


def is_placeholder(value: Any) -> bool:
    """Whether a string holds `{{placeholder}}` text, as dsh's snapshot fixtures do."""
    return isinstance(value, str) and _PLACEHOLDER.search(value) is not None


def _invalid(field: str, value: Any, expected: str) -> NoReturn:
    raise AdmissionError(
        f"header field {field} is {value!r}; expected {expected}", code="header-invalid"
    )


def check_header(raw: Any) -> FrozenDict:
    """Check a header and return it in canonical key order (integers normalised; the JSONL
    `type` key and unknown keys dropped). A missing `delegationDepth` is allowed here;
    stores that resume a session refuse it themselves. As in dsh's snapshot fixtures, a
    string field may hold `{{placeholder}}` text, and a `cwd` holding one need not be
    absolute.

    Raises:
        UnsupportedFormatError: `format-unsupported` for a numeric version other than 0.
        AdmissionError: `header-invalid` for any other broken rule.
    """
    if not isinstance(raw, Mapping):
        _invalid("(header)", raw, "a JSON object")
    out: dict[str, Any] = {}
    version = raw.get("version")
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        n = as_int(version)
        if n != SESSION_FORMAT_VERSION:
            newer = version > SESSION_FORMAT_VERSION
            raise UnsupportedFormatError(
                f"session format version {version!r} is not supported (this reads version "
                f"{SESSION_FORMAT_VERSION}): "
                + ("written by a newer version" if newer else "no upgrade path"),
                code="format-unsupported",
            )
        out["version"] = n
    else:
        _invalid("version", version, f"the integer {SESSION_FORMAT_VERSION}")
    for key in _RETIRED_KEYS:
        if key in raw:
            _invalid(key, raw[key], "nothing: this field is retired")
    sid = raw.get("id")
    if not isinstance(sid, str) or not sid:
        _invalid("id", sid, "a non-empty string")
    out["id"] = sid
    created = as_int(raw.get("createdAt"))
    if created is None or created < 0:
        _invalid("createdAt", raw.get("createdAt"), "an integer >= 0 (epoch milliseconds)")
    out["createdAt"] = created
    if "cwd" in raw:
        cwd = raw["cwd"]
        if not isinstance(cwd, str) or not (cwd.startswith("/") or is_placeholder(cwd)):
            _invalid("cwd", cwd, "an absolute path string (starting with /)")
        out["cwd"] = cwd
    for key in ("parentSession", "agentPreset"):
        if key in raw:
            if not isinstance(raw[key], str):
                _invalid(key, raw[key], "a string")
            out[key] = raw[key]
    for key in ("seedLength", "delegationDepth"):
        if key in raw:
            n = as_int(raw[key])
            if n is None or n < 0:
                _invalid(key, raw[key], "an integer >= 0")
            out[key] = n
    if "origin" in raw:
        origin = raw["origin"]
        if origin != "subagent" and not is_placeholder(origin):
            _invalid("origin", origin, "'subagent' (the only origin)")
        out["origin"] = origin
    return FrozenDict({k: out[k] for k in HEADER_KEYS if k in out})
