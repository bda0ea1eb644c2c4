"""String values too long to hold in memory, as the incremental reader hands them over.

A long string of an upstream message takes one of two places instead of memory:

- :class:`StagedPayload`, for a payload the offload rules will store (base64 ``data`` and ``blob``, long
  ``text`` of a result's content blocks and of ``resources/read`` contents): its bytes stream straight into
  the store's staging as they arrive (base64 decoded in pieces, hashed by the store as it writes), to be
  published as an artifact, or read back should the rules keep the value after all;
- :class:`SpilledString`, for any other long string: a temporary file, written back when the message is.

Both compare equal when their text is the same (by length and SHA-256), so a ``structuredContent`` string
that duplicates an offloaded payload is still recognised. :class:`MessageSinks` chooses per string and owns
what one message spilled or staged: :meth:`MessageSinks.release` drops whatever no artifact took.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import contextlib
import hashlib
import json
import re
import secrets
import tempfile
from collections.abc import AsyncIterator
from typing import IO, Any, Final, Literal

from blobstore.media import PROBE_BYTES
from blobstore.models import BlobInfo, Caller
from blobstore.service import ArtifactService
from mcp_resources.proxy.json_stream import Path, StringSink

READ_PIECE: Final = 1024 * 1024
TEXT_HEAD_CHARS: Final = 256 * 1024
"""How much of a staged text stays in memory, for its preview."""
QUEUE_DEPTH: Final = 4

Encoding = Literal["base64", "text"]

_PAYLOAD_PATHS: Final[dict[tuple[str | int, ...], Encoding]] = {
    ("result", "content", "*", "data"): "base64",
    ("result", "content", "*", "text"): "text",
    ("result", "content", "*", "resource", "blob"): "base64",
    ("result", "content", "*", "resource", "text"): "text",
    ("result", "contents", "*", "blob"): "base64",
    ("result", "contents", "*", "text"): "text",
}


def payload_encoding(path: Path) -> Encoding | None:
    """Whether a string at ``path`` of a message is a payload the offload rules store, and its encoding."""
    shape = tuple("*" if isinstance(part, int) else part for part in path)
    return _PAYLOAD_PATHS.get(shape)


def json_text(text: str) -> bytes:
    """``text`` as the inside of a JSON string literal (UTF-8; a lone surrogate escaped)."""
    try:
        return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)[1:-1].encode("ascii")


class LongString:
    """A string value held elsewhere: its length, its JSON size, and a digest that stands for its text."""

    def __init__(self) -> None:
        self.length = 0
        """In characters."""
        self.json_size = 2
        """Bytes of its JSON literal as the proxy writes it, quotes included."""
        self._digest = hashlib.sha256()
        self.sha256 = ""

    def _take(self, text: str) -> bytes:
        """Count a piece of the text; its JSON-escaped bytes."""
        escaped = json_text(text)
        self.length += len(text)
        self.json_size += len(escaped)
        self._digest.update(text.encode("utf-8", "surrogatepass"))
        return escaped

    def _sealed(self) -> None:
        self.sha256 = self._digest.hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LongString) and (other.length, other.sha256) == (self.length, self.sha256)

    def __hash__(self) -> int:
        return hash((self.length, self.sha256))

    def __len__(self) -> int:
        return self.length

    def __deepcopy__(self, memo: dict[int, Any]) -> LongString:
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.length} characters>"

    async def json_pieces(self) -> AsyncIterator[bytes]:
        """The JSON literal, quotes included, in pieces."""
        raise NotImplementedError
        yield b""  # pragma: no cover

    async def release(self) -> None:
        """Drop what holds the text."""


class SpilledString(LongString):
    """A long string kept in a temporary file as its JSON-escaped text."""

    def __init__(self) -> None:
        super().__init__()
        # Closed by release() (or abort()) when its message is done, not by a with block.
        self._file: IO[bytes] | None = tempfile.TemporaryFile()  # noqa: SIM115

    def write(self, text: str) -> None:
        assert self._file is not None
        self._file.write(self._take(text))

    def finish(self) -> LongString:
        self._sealed()
        return self

    def abort(self) -> None:
        self._close()

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    async def json_pieces(self) -> AsyncIterator[bytes]:
        file = self._file
        assert file is not None, "released"
        yield b'"'
        await asyncio.to_thread(file.seek, 0)
        while piece := await asyncio.to_thread(file.read, READ_PIECE):
            yield piece
        yield b'"'

    async def release(self) -> None:
        self._close()

    def __del__(self) -> None:
        # A message relayed without a release (the host's) frees its file when it is dropped.
        self._close()


class NotBase64(ValueError):
    pass


class Withdrawn(Exception):
    """Ends a staging write whose value will not be stored (its message was refused)."""


class StagedPayload(LongString):
    """A payload on its way into the store's staging as it arrives.

    ``write`` (called by the reader, possibly in a worker thread) decodes and queues bytes; :meth:`drain`
    (on the event loop, after each piece the reader took) hands them to the staging write. The bytes that
    matter before the artifact exists are kept: the first ``PROBE_BYTES`` (MIME sniffing, image size) and
    for a text its head (the preview) and its line count.
    """

    def __init__(self, service: ArtifactService, caller: Caller, encoding: Encoding) -> None:
        super().__init__()
        self.service = service
        self.caller = caller
        self.encoding = encoding
        self.size = 0
        """Decoded bytes."""
        self.head = bytearray()
        self.text_head: list[str] = []
        self._text_head_chars = 0
        self.newlines = 0
        self.invalid_at: int | None = None
        """The character where the base64 broke, for a value that turned out not to be base64."""
        self._carry = ""
        self._padded = False
        self._ready: list[bytes] = []
        self._queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(QUEUE_DEPTH)
        self._staging: asyncio.Task[BlobInfo] | None = None
        self._finished = False
        self._aborted = False
        self.blob: BlobInfo | None = None
        self.published = False

    # -- the reader's side ----------------------------------------------------------------------------------

    def write(self, text: str) -> None:
        start = self.length
        self._take(text)
        if self.invalid_at is not None or self._aborted:
            return
        if self.encoding == "text":
            self.newlines += text.count("\n")
            if self._text_head_chars < TEXT_HEAD_CHARS:
                self.text_head.append(text[: TEXT_HEAD_CHARS - self._text_head_chars])
                self._text_head_chars += len(self.text_head[-1])
            self._queue_bytes(text.encode("utf-8", "replace"))
            return
        try:
            self._decode(text)
        except NotBase64 as exc:
            self.invalid_at = start + int(str(exc) or 0)
            self._ready.clear()

    def _decode(self, text: str) -> None:
        data = self._carry + text
        whole = len(data) - len(data) % 4
        self._carry = data[whole:]
        if not whole:
            return
        if self._padded:
            raise NotBase64("0")
        try:
            decoded = base64.b64decode(data[:whole], validate=True)
        except (binascii.Error, ValueError):
            raise NotBase64(str(_first_bad(data[:whole]))) from None
        if "=" in data[whole - 4 : whole]:
            self._padded = True
        self._queue_bytes(decoded)

    def _queue_bytes(self, data: bytes) -> None:
        if len(self.head) < PROBE_BYTES:
            self.head += data[: PROBE_BYTES - len(self.head)]
        self.size += len(data)
        self._ready.append(data)

    def finish(self) -> LongString:
        if self.encoding == "base64" and self._carry and self.invalid_at is None:
            self.invalid_at = self.length - len(self._carry)
        self._finished = True
        self._sealed()
        return self

    def abort(self) -> None:
        self._aborted = True
        self._ready.clear()

    @property
    def valid(self) -> bool:
        """Not known to be lost: base64 so far, not aborted, its staging write not failed (a full disk, the
        size limit). What is no longer valid counts as held against the message cap, so it stays bounded."""
        staging = self._staging
        failed = staging is not None and staging.done() and not staging.cancelled() and staging.exception()
        return self.invalid_at is None and not self._aborted and not failed

    @property
    def text_preview_source(self) -> str:
        return "".join(self.text_head)

    # -- the event loop's side ------------------------------------------------------------------------------

    async def drain(self) -> None:
        """Hand what was decoded to the staging write (which starts with the first bytes)."""
        if self._staging is None and not self._aborted and self.invalid_at is None:
            self._staging = asyncio.create_task(self.service.stage(self.caller, self._chunks()))
        ready, self._ready = self._ready, []
        if self._staging is None:
            return
        if self._aborted or self.invalid_at is not None:
            await self._stop(NotBase64("the value is not base64") if self.invalid_at is not None else None)
            return
        for piece in ready:
            await self._put(piece)
        if self._finished:
            await self._put(None)

    async def _put(self, item: bytes | BaseException | None) -> None:
        staging = self._staging
        assert staging is not None
        putting = asyncio.ensure_future(self._queue.put(item))
        # A staging write that failed (a full disk, over the size limit) takes no more: do not wait on it.
        await asyncio.wait({putting, staging}, return_when=asyncio.FIRST_COMPLETED)
        if not putting.done():
            putting.cancel()

    async def _stop(self, reason: BaseException | None) -> None:
        await self._put(reason or Withdrawn())

    async def _chunks(self) -> AsyncIterator[bytes]:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def staged(self) -> BlobInfo:
        """The staged blob, once the value is complete; what the staging write raised otherwise."""
        if self.blob is None:
            if self._staging is None:
                # An empty value: nothing was ever decoded, so the staging write starts now.
                self._staging = asyncio.create_task(self.service.stage(self.caller, self._chunks()))
                await self._put(None)
            self.blob = await self._staging
        return self.blob

    async def json_pieces(self) -> AsyncIterator[bytes]:
        """The value as it came (base64 again, or the text), read back from the staged blob."""
        blob = await self.staged()
        yield b'"'
        if self.encoding == "base64":
            carry = b""
            async for piece in self.service.stream(blob):
                data = carry + piece
                whole = len(data) - len(data) % 3
                carry = data[whole:]
                yield base64.b64encode(data[:whole])
            yield base64.b64encode(carry)
        else:
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            async for piece in self.service.stream(blob):
                yield json_text(decoder.decode(piece))
            yield json_text(decoder.decode(b"", final=True))
        yield b'"'

    async def release(self) -> None:
        if self.published:
            return
        staging = self._staging
        if staging is None:
            return
        if not staging.done():
            with contextlib.suppress(Exception):
                await self._stop(None)
        with contextlib.suppress(BaseException):
            blob = await staging
            await self.service.discard_staged(blob)


def _first_bad(data: str) -> int:
    """Where in a run of base64 characters the first one that does not belong is."""
    for index, char in enumerate(data):
        if not (char.isascii() and (char.isalnum() or char in "+/=")):
            return index
    return max(0, data.find("=") + 1)


class MessageSinks:
    """The sinks of one message's long strings: staged payloads and spilled strings (only spilled ones
    without a service: the host's messages carry no payloads for the store)."""

    def __init__(self, service: ArtifactService | None = None, caller: Caller | None = None) -> None:
        self.service = service
        self.caller = caller
        self.values: list[SpilledString | StagedPayload] = []

    def __call__(self, path: Path) -> StringSink:
        encoding = payload_encoding(path)
        sink: SpilledString | StagedPayload
        if encoding is None or self.service is None or self.caller is None:
            sink = SpilledString()
        else:
            sink = StagedPayload(self.service, self.caller, encoding)
        self.values.append(sink)
        return sink

    def staged_bytes(self) -> int:
        """How much of the message went into the store's staging (its JSON size), not into memory."""
        return sum(
            value.json_size for value in self.values if isinstance(value, StagedPayload) and value.valid
        )

    async def drain(self) -> None:
        for value in self.values:
            if isinstance(value, StagedPayload):
                await value.drain()

    def abort(self) -> None:
        for value in self.values:
            value.abort()

    async def release(self) -> None:
        for value in self.values:
            with contextlib.suppress(Exception):
                await value.release()


_PLACEHOLDER: Final = re.compile(rb'"\\u0000long-([0-9a-f]{16}):([0-9]+)\\u0000"')


def json_parts(value: Any) -> list[bytes | LongString]:
    """The compact JSON of ``value`` as bytes between the long strings in it (written from where they are).

    Each long string is first written as a placeholder with a nonce of this call, so no text in the value
    can pass for one."""
    longs: list[LongString] = []
    nonce = secrets.token_hex(8)

    def mark(obj: Any) -> str:
        if isinstance(obj, LongString):
            longs.append(obj)
            return f"\x00long-{nonce}:{len(longs) - 1}\x00"
        raise TypeError(f"{type(obj).__name__} is not JSON serializable")

    try:
        data = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=mark).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, as JSON allows
        longs.clear()
        data = json.dumps(value, separators=(",", ":"), default=mark).encode("ascii")
    if not longs:
        return [data]
    parts: list[bytes | LongString] = []
    start = 0
    for match in _PLACEHOLDER.finditer(data):
        if match.group(1).decode() != nonce:
            continue
        parts.append(data[start : match.start()])
        parts.append(longs[int(match.group(2))])
        start = match.end()
    parts.append(data[start:])
    return parts


async def json_stream(parts: list[bytes | LongString]) -> AsyncIterator[bytes]:
    for part in parts:
        if isinstance(part, LongString):
            async for piece in part.json_pieces():
                yield piece
        elif part:
            yield part


def has_long(value: Any) -> bool:
    """Whether a value holds a long string anywhere."""
    if isinstance(value, LongString):
        return True
    if isinstance(value, dict):
        return any(has_long(item) for item in value.values())
    if isinstance(value, list):
        return any(has_long(item) for item in value)
    return False
