"""An incremental JSON reader: bytes in, in pieces of any size; the value out when the text ends.

Sans-I/O: :class:`JsonReader` never reads or writes anything itself. The caller feeds it what arrived
(:meth:`JsonReader.feed`) and ends it (:meth:`JsonReader.finish`). It accepts exactly what
:func:`json.loads` accepts from UTF-8 text (``NaN`` and ``Infinity`` too, later duplicate keys winning) and
builds the same value, with two differences that make it safe for a message of any size:

- a string value that grows past ``long_at`` characters is offered to ``long_strings`` (by its path in the
  document); a sink that takes it receives the string's text in pieces as it arrives, and what the sink's
  ``finish`` returns takes the string's place in the value. The rest of the document is built as usual;
- :meth:`JsonReader.discard` stops building from there on (the text is still checked to its end, and the
  scalar members of the top-level object are still kept, such as a JSON-RPC ``id``).

Nesting deeper than ``max_depth`` is refused (the standard parser's limit is the interpreter's recursion
limit). Invalid text raises :class:`JsonError` naming the reason and the byte offset.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from typing import Any, Final, Protocol

LONG_AT: Final = 64 * 1024
MAX_DEPTH: Final = 512

Path = tuple[str | int, ...]

_WHITESPACE: Final = re.compile(rb"[ \t\n\r]*")
_STRING_STOP: Final = re.compile(rb'["\\\x00-\x1f]')
_NUMBER: Final = re.compile(rb"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_NUMBER_TAIL: Final = re.compile(rb"[0-9.eE+-]*")
_LITERALS: Final[dict[int, tuple[bytes, Any]]] = {
    ord("t"): (b"true", True),
    ord("f"): (b"false", False),
    ord("n"): (b"null", None),
    ord("N"): (b"NaN", float("nan")),
    ord("I"): (b"Infinity", float("inf")),
}
_NEG_INFINITY: Final = b"-Infinity"
_ESCAPES: Final = {
    ord('"'): '"',
    ord("\\"): "\\",
    ord("/"): "/",
    ord("b"): "\b",
    ord("f"): "\f",
    ord("n"): "\n",
    ord("r"): "\r",
    ord("t"): "\t",
}
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")

# Reader states.
_VALUE, _FIRST_VALUE, _AFTER_VALUE, _KEY, _FIRST_KEY, _COLON, _STRING, _DONE = range(8)
DISCARDED_STRING_KEPT: Final = 1024
"""After :meth:`JsonReader.discard`, how much of a top-level member's string is still kept."""


class JsonError(ValueError):
    """Text that is not JSON: ``reason`` and the byte ``offset`` where it was found."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(f"{reason} at byte {offset}")
        self.reason = reason
        self.offset = offset


class StringSink(Protocol):
    """Where a long string's text goes instead of memory."""

    def write(self, text: str) -> None: ...

    def finish(self) -> Any:
        """The string is complete: what takes its place in the value."""

    def abort(self) -> None:
        """The document will not be complete (invalid, or discarded): drop what was written."""


LongStrings = Callable[[Path], StringSink | None]


class _Frame:
    __slots__ = ("container", "is_dict", "key")

    def __init__(self, container: dict[str, Any] | list[Any] | None, is_dict: bool) -> None:
        self.container = container
        self.is_dict = is_dict
        self.key: str | None = None


class JsonReader:
    def __init__(
        self,
        *,
        long_strings: LongStrings | None = None,
        long_at: int = LONG_AT,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self._long_strings = long_strings
        self._long_at = long_at
        self._max_depth = max_depth
        self._rest = b""
        self._base = 0  # the offset of self._rest[0] in the whole text
        self._state = _VALUE
        self._stack: list[_Frame] = []
        self._root: Any = None
        self._keep = True
        # The string being read:
        self._is_key = False
        self._parts: list[str] = []
        self._batch: list[str] = []
        self._length = 0
        self._sink: StringSink | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._string_start = 0

    # -- the caller's side ------------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """How many bytes were fed."""
        return self._base + len(self._rest)

    @property
    def root(self) -> Any:
        """The value built so far (the top-level container while it is still open)."""
        return self._root

    def feed(self, data: bytes) -> None:
        if not data:
            return
        buf = self._rest + data if self._rest else data
        try:
            self._run(buf, final=False)
        except JsonError:
            self.abort()
            raise

    def finish(self) -> Any:
        """The value, once the whole text was fed; :class:`JsonError` when it is not complete JSON."""
        try:
            self._run(self._rest, final=True)
            if self._state != _DONE:
                what = "unterminated string" if self._state == _STRING else "unexpected end of the text"
                offset = self._string_start if self._state == _STRING else self.offset
                raise JsonError(what, offset)
        except JsonError:
            self.abort()
            raise
        return self._root

    def discard(self) -> None:
        """Build nothing more, and drop what was built below the top level (its scalar members stay)."""
        self._keep = False
        self._abort_sink()
        self._parts = []
        self._batch = []
        if isinstance(self._root, dict):
            for key in [k for k, v in self._root.items() if isinstance(v, dict | list)]:
                del self._root[key]
        elif isinstance(self._root, list):
            self._root.clear()
        for frame in self._stack[1:]:
            frame.container = None

    def abort(self) -> None:
        """The text will not be complete: let the open sink drop what it holds."""
        self._abort_sink()

    def _abort_sink(self) -> None:
        sink, self._sink = self._sink, None
        if sink is not None:
            sink.abort()

    # -- building ---------------------------------------------------------------------------------------

    def _place(self, value: Any) -> None:
        stack = self._stack
        if not stack:
            self._root = value
            self._state = _DONE
            return
        frame = stack[-1]
        self._state = _AFTER_VALUE
        container = frame.container
        if container is None:
            return
        if not self._keep and (len(stack) > 1 or isinstance(value, dict | list)):
            return
        if isinstance(container, dict):
            assert frame.key is not None
            container[frame.key] = value
        else:
            container.append(value)

    def _open(self, is_dict: bool, offset: int) -> None:
        if len(self._stack) >= self._max_depth:
            raise JsonError(f"nesting deeper than {self._max_depth}", offset)
        building = self._keep and (not self._stack or self._stack[-1].container is not None)
        container: dict[str, Any] | list[Any] | None = ({} if is_dict else []) if building else None
        if building:
            self._place(container)
        self._stack.append(_Frame(container, is_dict))
        self._state = _FIRST_KEY if is_dict else _FIRST_VALUE

    def _close(self, is_dict: bool, offset: int) -> None:
        frame = self._stack.pop()
        if frame.is_dict != is_dict:
            raise JsonError("mismatched bracket", offset)
        self._state = _AFTER_VALUE if self._stack else _DONE

    def _path(self) -> Path:
        path: list[str | int] = []
        for depth, frame in enumerate(self._stack):
            if frame.is_dict:
                path.append(frame.key or "")
            else:
                size = len(frame.container or [])
                path.append(size if depth == len(self._stack) - 1 else size - 1)
        return tuple(path)

    # -- strings ----------------------------------------------------------------------------------------

    def _start_string(self, is_key: bool, offset: int) -> None:
        self._state = _STRING
        self._is_key = is_key
        self._parts = []
        self._length = 0
        self._sink = None
        self._decoder.reset()
        self._string_start = offset

    def _text(self, text: str) -> None:
        # Pieces are gathered and handed on once per fed piece (or at the string's end): a text with an
        # escape every line would otherwise cost a call per line.
        self._batch.append(text)

    def _flush_text(self) -> None:
        if not self._batch:
            return
        text = "".join(self._batch)
        self._batch = []
        if not text:
            return
        if self._sink is not None:
            self._sink.write(text)
            return
        if not self._keep and (len(self._stack) > 1 or self._length > DISCARDED_STRING_KEPT):
            return
        self._parts.append(text)
        self._length += len(text)
        if (
            self._length > self._long_at
            and self._keep
            and not self._is_key
            and self._long_strings is not None
        ):
            sink = self._long_strings(self._path())
            if sink is not None:
                self._sink = sink
                sink.write("".join(self._parts))
                self._parts = []

    def _bytes(self, piece: bytes, offset: int) -> None:
        try:
            self._text(self._decoder.decode(piece))
        except UnicodeDecodeError as exc:
            raise JsonError("invalid UTF-8 in a string", offset + exc.start) from None

    def _flush_decoder(self, offset: int) -> None:
        if self._decoder.getstate()[0]:
            # A multi-byte character cut by an escape or the closing quote.
            raise JsonError("invalid UTF-8 in a string", offset)

    def _end_string(self) -> None:
        self._flush_text()
        if self._is_key:
            self._stack[-1].key = "".join(self._parts)
            self._parts = []
            self._state = _COLON
            return
        sink, self._sink = self._sink, None
        value = sink.finish() if sink is not None else "".join(self._parts)
        self._parts = []
        self._place(value)

    def _escape(self, buf: bytes, pos: int, final: bool) -> int:
        """Read the escape at ``buf[pos]`` (a backslash); the position after it, or -1 to wait for more."""
        end = len(buf)
        if pos + 1 >= end:
            return self._wait(final)
        kind = buf[pos + 1]
        simple = _ESCAPES.get(kind)
        if simple is not None:
            self._text(simple)
            return pos + 2
        if kind != ord("u"):
            raise JsonError("invalid escape", self._base + pos)
        code = self._hex4(buf, pos, final)
        if code < 0:
            return -1
        if 0xD800 <= code <= 0xDBFF:
            # A high surrogate joins a low one that follows at once, as json.loads joins them.
            if end < pos + 12 and not final:
                return -1
            if buf[pos + 6 : pos + 8] == b"\\u" and all(d in _HEX for d in buf[pos + 8 : pos + 12]):
                low = int(buf[pos + 8 : pos + 12], 16)
                if 0xDC00 <= low <= 0xDFFF:
                    self._text(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
                    return pos + 12
        self._text(chr(code))
        return pos + 6

    def _hex4(self, buf: bytes, pos: int, final: bool) -> int:
        digits = buf[pos + 2 : pos + 6]
        if not all(d in _HEX for d in digits):
            raise JsonError("invalid \\u escape", self._base + pos)
        if len(digits) < 4:
            return self._wait(final)
        return int(digits, 16)

    def _wait(self, final: bool) -> int:
        if final:
            raise JsonError("unterminated string", self._string_start)
        return -1

    # -- the state machine ------------------------------------------------------------------------------

    def _run(self, buf: bytes, *, final: bool) -> None:
        pos = 0
        end = len(buf)
        base = self._base
        while pos < end:
            state = self._state
            if state == _STRING:
                match = _STRING_STOP.search(buf, pos)
                stop = match.start() if match is not None else end
                if stop > pos:
                    self._bytes(buf[pos:stop], base + pos)
                    pos = stop
                if match is None:
                    break
                byte = buf[stop]
                if byte == ord('"'):
                    self._flush_decoder(base + stop)
                    self._end_string()
                    pos = stop + 1
                elif byte == ord("\\"):
                    self._flush_decoder(base + stop)
                    after = self._escape(buf, stop, final)
                    if after < 0:
                        break
                    pos = after
                else:
                    raise JsonError("control character in a string", base + stop)
                continue
            pos = _WHITESPACE.match(buf, pos).end()  # type: ignore[union-attr]
            if pos >= end:
                break
            byte = buf[pos]
            if state == _FIRST_VALUE and byte == ord("]"):
                self._close(False, base + pos)
                pos += 1
            elif state in (_VALUE, _FIRST_VALUE):
                after = self._value(buf, pos, final)
                if after < 0:
                    break
                pos = after
            elif state == _AFTER_VALUE:
                frame = self._stack[-1]
                if byte == ord(","):
                    self._state = _KEY if frame.is_dict else _VALUE
                elif byte == ord("}") or byte == ord("]"):
                    self._close(byte == ord("}"), base + pos)
                else:
                    expected = "',' or '}'" if frame.is_dict else "',' or ']'"
                    raise JsonError(f"expected {expected}", base + pos)
                pos += 1
            elif state in (_KEY, _FIRST_KEY):
                if byte == ord('"'):
                    self._start_string(True, base + pos)
                elif byte == ord("}") and state == _FIRST_KEY:
                    self._close(True, base + pos)
                else:
                    raise JsonError("expected a property name in double quotes", base + pos)
                pos += 1
            elif state == _COLON:
                if byte != ord(":"):
                    raise JsonError("expected ':'", base + pos)
                self._state = _VALUE
                pos += 1
            else:  # _DONE
                raise JsonError("extra data after the value", base + pos)
        if self._state == _STRING:
            self._flush_text()
        self._rest = buf[pos:] if pos < end else b""
        self._base = base + pos

    def _value(self, buf: bytes, pos: int, final: bool) -> int:
        """Start or read the value at ``buf[pos]``; the position after what was consumed, -1 to wait."""
        base = self._base
        byte = buf[pos]
        if byte == ord('"'):
            self._start_string(False, base + pos)
            return pos + 1
        if byte == ord("{") or byte == ord("["):
            self._open(byte == ord("{"), base + pos)
            return pos + 1
        literal = _LITERALS.get(byte)
        if literal is None and buf.startswith(b"-I", pos):
            literal = (_NEG_INFINITY, float("-inf"))
        if literal is None and buf[pos : pos + 1] == b"-" and pos + 1 == len(buf) and not final:
            return -1
        if literal is not None:
            text, value = literal
            if buf.startswith(text, pos):
                self._place(value)
                return pos + len(text)
            if text.startswith(buf[pos:]) and not final:
                return -1
            raise JsonError("expected a value", base + pos)
        match = _NUMBER.match(buf, pos)
        if match is None:
            raise JsonError("expected a value", base + pos)
        if not final and _NUMBER_TAIL.fullmatch(buf, match.end()):
            return -1  # what follows, up to the end of what arrived, may still be part of the number
        text = match.group()
        try:
            number: int | float = float(text) if match.group(1) or match.group(2) else int(text)
        except ValueError as exc:
            raise JsonError(f"number out of range ({exc})", base + pos) from None
        self._place(number)
        return match.end()
