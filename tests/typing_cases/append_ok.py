"""Type-checks cleanly: every surface append names its surface_op."""

from surface_lab import Session

s = Session("typed")
s.append("user/message", {"id": "u", "role": "user", "content": [], "source": {"kind": "user"}},
         surface_op="append")
s.append("tool/result", {}, surface_op={"op": "replace", "start": 0, "end": 0},
         source_event_seqs=[0])
s.append("turn/start", {"turn": 1})
s.append("my-plugin/event", None)
widened: str = "user/message"
s.append(widened, {})  # a widened string: only the runtime check can see it
