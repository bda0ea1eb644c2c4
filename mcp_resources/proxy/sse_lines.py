"""Streamable-HTTP answers turned into the lines the upstream's message reader takes, without holding them.

An answer arrives as one JSON body or as a stream of server-sent events, and one message in it may be
hundreds of megabytes. :class:`SseLines` and :class:`JsonLines` pass the bytes through as they come, turning
each message into one ``\\n``-ended line, so :class:`~mcp_resources.proxy.message_reader.MessageReader` reads
them exactly as it reads a stdio upstream (large strings streamed into the store, the rest capped).

Inside a message the line ends it had become ``\\r``: JSON whitespace as ``\\n`` is, and just as invalid
inside a string, so what was valid JSON stays valid and what was not stays not.
"""

from __future__ import annotations

import re
from typing import Final, Literal

_FIELD_END: Final = re.compile(rb"[:\r\n]")
_LINE_END: Final = re.compile(rb"[\r\n]")
_BOM: Final = b"\xef\xbb\xbf"
_FIELD_NAME_MAX: Final = 16
"""Longer than any field the stream defines: a longer name is an unknown field, skipped unread."""
_VALUE_MAX: Final = 1024
"""Of an ``event``, ``id`` or ``retry`` value, what is kept; a longer event type is no ``message``, a longer
id is ignored."""
_MESSAGE_TYPES: Final = frozenset({b"", b"message"})

_State = Literal["field", "space", "value"]


class JsonLines:
    """A JSON body as one line: its own line ends become ``\\r``, and one ``\\n`` ends it."""

    def feed(self, chunk: bytes) -> bytes:
        return chunk.replace(b"\n", b"\r")

    def end(self) -> bytes:
        return b"\n"


class SseLines:
    """An event stream's ``message`` events as lines, following the WHATWG HTML "event stream
    interpretation" (section 9.2.6), fed chunk by chunk however the chunks split it.

    What is kept of a line is its field name and an ``event``, ``id`` or ``retry`` value (each bounded); a
    ``data`` value goes straight out. An event whose data started before an ``event:`` field named another
    type is still passed on: streaming servers (the MCP SDKs among them) name the type first.
    :attr:`last_event_id` and :attr:`retry_ms` are what a reconnection with ``Last-Event-ID`` needs.
    """

    def __init__(self) -> None:
        self._start = True
        """Before the first byte: "One leading U+FEFF BYTE ORDER MARK character must be ignored if any
        are present."""
        self._head = b""
        self._after_cr = False
        """The last chunk ended in CR: "a U+000D CARRIAGE RETURN U+000A LINE FEED (CRLF) character pair"
        is one line end, so an LF opening this one is skipped."""
        self._state: _State = "field"
        self._field = bytearray()
        self._skip = False
        """The rest of this line is ignored (a comment, an unknown or unused field)."""
        self._value = bytearray()
        """The value of the ``event``, ``id`` or ``retry`` line being read."""
        self._event_type = b""
        self._id_buffer: str | None = None
        self.last_event_id: str | None = None
        """The id of the last event dispatched (WHATWG: the event source's "last event ID string")."""
        self.retry_ms: int | None = None
        """The reconnection time the stream asked for, in milliseconds."""
        self._data_lines = 0
        """``data`` lines of the event being read; nonzero means it is dispatched at the blank line."""
        self._foreign = False
        """The event is of another type than ``message``: its data is dropped."""

    def feed(self, chunk: bytes) -> bytes:
        if self._start:
            chunk = self._head + chunk
            if len(chunk) < len(_BOM) and _BOM.startswith(chunk):
                self._head = chunk
                return b""
            self._start = False
            self._head = b""
            chunk = chunk.removeprefix(_BOM)
        if not chunk:
            return b""
        out: list[bytes] = []
        at = 0
        size = len(chunk)
        if self._after_cr and chunk[:1] == b"\n":
            at = 1
        self._after_cr = False
        while at < size:
            if self._state == "field":
                at = self._read_field(chunk, at, out)
            elif self._state == "space":
                # "If value starts with a U+0020 SPACE character, remove it from value."
                if chunk[at : at + 1] == b" ":
                    at += 1
                self._state = "value"
            else:
                at = self._read_value(chunk, at, out)
        return b"".join(out)

    def end(self) -> bytes:
        """Nothing: "Once the end of the file is reached, any pending data must be discarded." What was
        passed on of an undispatched event has no line end, and the reader reports it cut off."""
        return b""

    def _read_field(self, chunk: bytes, at: int, out: list[bytes]) -> int:
        found = _FIELD_END.search(chunk, at)
        stop = len(chunk) if found is None else found.start()
        if not self._skip:
            self._field += chunk[at:stop]
            if len(self._field) > _FIELD_NAME_MAX:
                self._skip = True
        if found is None:
            return stop
        if chunk[stop] == ord(":"):
            # "If the line starts with a U+003A COLON character (:) — Ignore the line."
            if not self._field:
                self._skip = True
            if self._skip:
                self._state = "value"
            else:
                self._begin_value(out)
                self._state = "space"
            return stop + 1
        # "Otherwise, the string is not empty but does not contain a U+003A COLON character (:) — Process
        # the field using the whole line as the field name, and the empty string as the field value."
        if not self._skip:
            if not self._field:
                self._dispatch(out)
            else:
                self._begin_value(out)
        return self._end_line(chunk, stop)

    def _begin_value(self, out: list[bytes]) -> None:
        field = bytes(self._field)
        if field == b"data":
            if self._event_type not in _MESSAGE_TYPES and not self._data_lines:
                self._foreign = True
            if not self._foreign and self._data_lines:
                # "append the field value to the data buffer, then append a single U+000A LINE FEED"
                out.append(b"\r")
            self._data_lines += 1
        elif field in (b"event", b"id", b"retry"):
            self._value.clear()
        else:
            # "Otherwise — The field is ignored."
            self._skip = True

    def _read_value(self, chunk: bytes, at: int, out: list[bytes]) -> int:
        found = _LINE_END.search(chunk, at)
        stop = len(chunk) if found is None else found.start()
        if not self._skip:
            if self._field == b"data":
                if not self._foreign:
                    out.append(chunk[at:stop])
            elif len(self._value) <= _VALUE_MAX:
                self._value += chunk[at : min(stop, at + _VALUE_MAX + 1)]
        if found is None:
            return stop
        return self._end_line(chunk, stop)

    def _end_line(self, chunk: bytes, stop: int) -> int:
        if not self._skip:
            self._apply(bytes(self._field), bytes(self._value))
        self._value.clear()
        self._state = "field"
        self._field.clear()
        self._skip = False
        if chunk[stop] == ord("\r"):
            if stop + 1 == len(chunk):
                self._after_cr = True
                return stop + 1
            if chunk[stop + 1] == ord("\n"):
                return stop + 2
        return stop + 1

    def _apply(self, field: bytes, value: bytes) -> None:
        if field == b"event":
            self._event_type = value
        elif field == b"id":
            # "If the field value does not contain U+0000 NULL, then set the last event ID buffer to the field
            # value. Otherwise, ignore the field."
            if b"\0" not in value and len(value) <= _VALUE_MAX:
                self._id_buffer = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit() and len(value) <= _VALUE_MAX:
            # "If the field value consists of only ASCII digits, then interpret the field value as an integer
            # in base ten, and set the event stream's reconnection time to that integer."
            self.retry_ms = int(value)

    @property
    def at_boundary(self) -> bool:
        """Between events: nothing of a line or of an event's data has been read past the last dispatch."""
        return self._state == "field" and not self._field and not self._data_lines

    def _dispatch(self, out: list[bytes]) -> None:
        """A blank line: "Set the last event ID string of the event source to the value of the last event ID
        buffer"; then "If the data buffer is an empty string, set the data buffer and the event type buffer
        to the empty string and return"; otherwise the event (here: its line) is complete."""
        self.last_event_id = self._id_buffer
        if self._data_lines and not self._foreign:
            out.append(b"\n")
        self._data_lines = 0
        self._foreign = False
        self._event_type = b""
