"""Must fail type-checking on the marked line only: a literal surface type without surface_op."""

from surface_lab import Session

s = Session("typed")
s.append("turn/start", {"turn": 1})
s.append("assistant/message", {})  # MUST-FAIL
