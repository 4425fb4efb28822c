"""The lazy sequences of a fast-read log: its events, parsed from the file's bytes when
asked for, their line numbers and the plan each committed."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

import msgspec

from ..chunks import expand_row
from ..errors import CorruptLogError
from ..events import Event, freeze_event, message_of
from ..messages import Block, blocks_called_tools, blocks_text, called_tools, message_text
from ..surface import PlanList
from ..views import ReadOnlySequence
from .codec import BadLine, parse_line
from .columns import EventColumns, event_columns
from .lines import CODE, ROW, TYPE_NAMES, Records

# PlanList: surface's
__all__ = ["LineData", "LineMessage", "LineNumbers", "LogEvents", "MessageLine", "PlanList"]

_ROW_AS_CHUNK = bytes(range(255)) + bytes((CODE["assistant/chunk"],))  # members are chunks


# The message pass (`LogEvents.message_texts`): a line's type and its message content only,
# the blocks typed (`messages.Block`).


B = TypeVar("B")
T = TypeVar("T")


def decode_line(decoder: msgspec.json.Decoder[T], view: memoryview | None) -> T | None:
    """A stored line decoded by a reader's own types (`LogEvents.line_view`), or None
    where there is no line (a packed row's member) or the types do not take it: the
    caller then reads the event whole."""
    if view is None:
        return None
    try:
        return decoder.decode(view)
    except msgspec.DecodeError:
        return None


class LineMessage(msgspec.Struct, Generic[B], gc=False):
    """A message of a stored line, its content as a list of blocks of type `B`."""

    content: list[B] | None = None
    source: Any = None


class LineData(msgspec.Struct, Generic[B], gc=False):
    """A stored line's data, of what the walks over messages read."""

    turn: Any = None
    message: LineMessage[B] | None = None  # assistant messages and tool results
    content: list[B] | None = None  # user and context messages
    source: Any = None
    error: Any = None  # a tool result's: the call failed


class MessageLine(msgspec.Struct, Generic[B], gc=False):
    """A stored line decoded of its type, turn and message alone (`message_texts` and
    the evidence walk: `MessageLine[Block]`)."""

    type: str
    data: LineData[B] | None = None


_TEXT_DECODER = msgspec.json.Decoder(MessageLine[Block])
_NESTED_MESSAGE = frozenset({"assistant/message", "tool/result"})  # `data.message`
_NO_TOOLS: frozenset[str] = frozenset()


class LogEvents(ReadOnlySequence[Event]):
    """The logical events of a log read by the fast reader: a read-only sequence whose
    events are parsed from the file's bytes when asked for (a packed row is expanded
    whole and the last few kept). `type_codes` (into `TYPE_NAMES`), `types`, `lines`
    and `first_seqs` need no parsing; `columns()` reads times, turns, steps and data
    sizes in one pass over the lines."""

    _what = "event"

    def __init__(self, data: bytes, path: str, records: Records) -> None:
        self._data = data
        self._path = path
        self._records = records
        self._row_cache: dict[int, list[Event]] = {}
        self._type_codes: bytes | None = None
        self._line_arrays: tuple[Any, Any, Any] | None = None
        self._first_seq_array: Any = None

    def __len__(self) -> int:
        return self._records.first_seq[-1]

    def _record(self, seq: int) -> int:
        return bisect_right(self._records.first_seq, seq) - 1

    def parse_record(self, record: int) -> Any:
        """Line `record` parsed as the full pipeline parses it (msgspec, like the
        standard library, keeps integers of any size exactly, so no line needs the
        pipeline's second parse for long digit runs)."""
        starts = self._records.starts
        line = memoryview(self._data)[starts[record] : starts[record + 1] - 1]
        try:
            return msgspec.json.decode(line)
        except msgspec.DecodeError:  # only a number too large for a double gets here
            pass
        try:
            return parse_line(bytes(line))
        except BadLine as bad:
            raise CorruptLogError(f"line {record + 2}: {bad.message}", code=bad.code,
                                  path=self._path, line=record + 2,
                                  seq=self._records.first_seq[record]) from None

    def _item(self, seq: int) -> Event:
        record = self._record(seq)
        if self._records.codes[record] != ROW:
            return freeze_event(self.parse_record(record))
        members = self._row_cache.get(record)
        if members is None:
            members = list(expand_row(self.parse_record(record)))
            if len(self._row_cache) >= 8:
                self._row_cache.pop(next(iter(self._row_cache)))
            self._row_cache[record] = members
        return members[seq - self._records.first_seq[record]]

    def __repr__(self) -> str:
        return f"LogEvents({len(self)} events of {self._path})"

    @property
    def type_codes(self) -> bytes:
        """Each event's type as an index into `TYPE_NAMES`."""
        if self._type_codes is None:
            import numpy as np

            r = self._records
            per_line = np.frombuffer(r.codes.translate(_ROW_AS_CHUNK), dtype=np.uint8)
            self._type_codes = np.repeat(per_line, np.diff(self._first_seqs())).tobytes()
        return self._type_codes

    def _first_seqs(self) -> Any:
        """`first_seqs` as an int64 array, converted once (the type codes and the line
        spans both need it)."""
        import numpy as np

        first_seq = self._records.first_seq
        known = self._first_seq_array
        if known is None or len(known) != len(first_seq):  # (still reading)
            known = self._first_seq_array = np.fromiter(first_seq, dtype=np.int64,
                                                         count=len(first_seq))
        return known

    @property
    def types(self) -> list[str]:
        return [TYPE_NAMES[c] for c in self.type_codes]

    def columns(self, on_surface: Callable[[Event], Any] | None = None,
                lines: tuple[int, int] | None = None) -> EventColumns:
        """The envelope columns of every event, from one pass over the lines; with
        `on_surface`, also its answer for each surface event (given its type, seq, data,
        surfaceOp and sourceEventSeqs), by seq, in `.surface`. With `lines` (first line
        after the header, line after the last, counted from 0), those lines' events only."""
        if lines is None:
            return event_columns(self._data, self._records, len(self), on_surface)
        first_seq = self._records.first_seq
        return event_columns(self._data, self._records,
                             first_seq[lines[1]] - first_seq[lines[0]], on_surface, lines)

    @property
    def times(self) -> list[int]:
        return cast(list[int], self.columns().time.tolist())

    @property
    def turns(self) -> list[int | None]:
        """`data.turn` of each event as an integer, None when absent or not one."""
        c = self.columns()
        return [None if m else v for v, m in zip(c.turn.tolist(), c.turn_missing.tolist(),
                                                 strict=True)]

    @property
    def steps(self) -> list[int | None]:
        c = self.columns()
        return [None if m else v for v, m in zip(c.step.tolist(), c.step_missing.tolist(),
                                                 strict=True)]

    @property
    def lines(self) -> LineNumbers:
        return LineNumbers(self._records.first_seq)

    @property
    def first_seqs(self) -> list[int]:
        """The first seq of each line after the header, then the event count."""
        return self._records.first_seq

    def raw(self, seq: int) -> Mapping[str, Any]:
        """Event `seq` as parsed, not frozen: cheaper when only some fields are read.
        (An integral float `surfaceOp` endpoint stays a float here.)"""
        record = self._record(seq)
        return self._item(seq) if self._records.codes[record] == ROW else self.parse_record(record)

    def message_texts(self, seqs: Iterable[int]) -> list[tuple[str, Any]]:
        """`message_text` of each of these events and its message's `source`, decoding
        of each line only its message content and source (not its sources, ids or other
        fields): what an audit reads of the entries a replace hid, at a fraction of
        `raw`'s cost."""
        return [(text, source) for text, source, _ in self.message_parts(seqs)]

    def message_parts(self, seqs: Iterable[int], *,
                      keep: dict[int, MessageLine[Block]] | None = None,
                      failed: dict[int, bool] | None = None
                      ) -> list[tuple[str, Any, frozenset[str]]]:
        """`message_texts`, with the names of the tools each message calls. With `keep`,
        each assistant message's line decoded typed is put there too, by seq (for a
        reader of its calls: `evidence.read_entries`); with `failed`, whether each tool
        result says its call failed (its data's `error` or a block's `isError`), by seq
        (for the facts ledger). A line the types do not take is in neither."""
        starts, codes = self._records.starts, self._records.codes
        view = memoryview(self._data)
        out: list[tuple[str, Any, frozenset[str]]] = []
        for seq in seqs:
            record = self._record(seq)
            if codes[record] == ROW:  # a chunk: no message
                out.append((message_text(self._item(seq)), None, _NO_TOOLS))
                continue
            try:
                line = _TEXT_DECODER.decode(view[starts[record] : starts[record + 1] - 1])
            except msgspec.DecodeError:  # blocks the types do not take: the full parse
                event = self.raw(seq)
                source = message_of(event)
                out.append((message_text(event), source.get("source")
                            if isinstance(source, Mapping) else None, frozenset(
                                called_tools(source.get("content")))
                            if isinstance(source, Mapping) and event.get("type")
                            == "assistant/message" else _NO_TOOLS))
                continue
            data = line.data
            if failed is not None and line.type == "tool/result":
                failed[seq] = data is not None and (bool(data.error) or (
                    data.message is not None
                    and any(b.isError for b in data.message.content or ())))
            message = data.message if line.type in _NESTED_MESSAGE and data else data
            if message is None:
                out.append(("", None, _NO_TOOLS))
                continue
            if line.type == "assistant/message":
                if keep is not None:
                    keep[seq] = line
                out.append((blocks_text(message.content), message.source,
                            frozenset(blocks_called_tools(message.content))))
            else:
                out.append((blocks_text(message.content), message.source, _NO_TOOLS))
        return out

    def line_view(self, seq: int) -> memoryview | None:
        """The bytes of event `seq`'s line, for a reader that decodes only what it
        needs; None for a packed row's member."""
        records = self._records
        record = bisect_right(records.first_seq, seq) - 1  # `_record`, called per chunk
        if records.codes[record] == ROW:
            return None
        return memoryview(self._data)[records.starts[record] : records.starts[record + 1] - 1]

    def line_views(self, seqs: Sequence[int]) -> list[memoryview | None]:
        """`line_view` of each of these seqs, their lines found in one vectorised pass
        (for a reader that takes many)."""
        _, begins, ends = self.line_spans(seqs)
        view = memoryview(self._data)
        return [None if begin < 0 else view[begin:end]
                for begin, end in zip(begins, ends, strict=True)]

    def line_spans(self, seqs: Sequence[int]) -> tuple[bytes, list[int], list[int]]:
        """The file's bytes and where each of these seqs' lines begins and ends in them
        (begin -1: a packed row's member), found in one vectorised pass: for a reader
        that searches many lines before it decodes a few."""
        import numpy as np

        if not len(seqs):
            return self._data, [], []
        records = self._records
        arrays = self._line_arrays
        if arrays is None or len(arrays[0]) != len(records.first_seq):  # (still reading)
            arrays = self._line_arrays = (
                self._first_seqs(),
                np.fromiter(records.starts, dtype=np.int64, count=len(records.starts)),
                np.frombuffer(bytes(records.codes), dtype=np.uint8))
        first_seq, starts, codes = arrays
        found = np.searchsorted(first_seq, np.asarray(seqs, dtype=np.int64), side="right") - 1
        begins = np.where(codes[found] == ROW, -1, starts[found])
        return self._data, begins.tolist(), (starts[found + 1] - 1).tolist()

    def lookup(self, seq: int) -> Mapping[str, Any] | None:
        """`raw(seq)`, or None outside the log: the planner's lookup, which reads data."""
        return self.raw(seq) if 0 <= seq < len(self) else None


class LineNumbers(ReadOnlySequence[int]):
    """The physical line (header = 1) of each event."""

    _what = "event"

    def __init__(self, first_seq: list[int]) -> None:
        self._first_seq = first_seq

    def __len__(self) -> int:
        return self._first_seq[-1]

    def _item(self, seq: int) -> int:
        return bisect_right(self._first_seq, seq) + 1
