"""Base64 blobs of ``resources/read`` results, and their splice into the stdio line that carries them.

A 1 MiB window is a 1.4 MB base64 string. Every result holds it as a plain ``str`` (so the SDK's models, its
result validation and every other transport see an ordinary result), but when :func:`base64_text` runs inside
:func:`splicing` (``blobstore mcp`` on stdio), the string is also remembered by identity. The stdio writer
then serializes the response with a short placeholder in its place and writes the string's bytes between the
two halves of the line (:meth:`Splices.line_parts`): the 1.4 MB string is neither scanned for JSON escapes
(base64 needs none) nor copied into one joined line. A remembered string that is never written (a cancelled
request) is forgotten after :data:`MAX_REMEMBERED` newer ones; a string that is not remembered, or a line the
placeholder cannot be found in exactly once, is serialized as usual.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Final

import pybase64
import pydantic_core
from mcp.types import JSONRPCMessage, JSONRPCResponse, RequestId

SPLICE_AT: Final = 64 * 1024
"""Base64 strings from this length on are spliced; below it, serializing them costs next to nothing."""
MAX_REMEMBERED: Final = 4
"""Strings remembered per connection while their answers are on the way (each in flight anyway)."""

_PLACEHOLDER: Final = "\x00blob\x00"
"""A blob's stand-in: base64 never contains NUL, and a NUL in any other field is escaped, never raw."""
_PLACEHOLDER_JSON: Final = pydantic_core.to_json(_PLACEHOLDER)[1:-1]


class Splices:
    """The base64 strings one stdio connection made and has not written yet, by identity."""

    def __init__(self) -> None:
        self._made: OrderedDict[int, str] = OrderedDict()

    def remember(self, text: str) -> None:
        self._made[id(text)] = text
        while len(self._made) > MAX_REMEMBERED:
            self._made.popitem(last=False)

    def _take(self, value: object) -> str | None:
        if not isinstance(value, str) or self._made.get(id(value)) is not value:
            return None
        del self._made[id(value)]
        return value

    def _stand_ins(self, contents: object) -> tuple[list[str], list[Any]]:
        """The remembered blobs of a result's ``contents`` (taken), and the contents with placeholders."""
        blobs: list[str] = []
        stand_ins: list[Any] = []
        if not self._made or not isinstance(contents, list):
            return blobs, stand_ins
        for item in contents:
            blob = self._take(item.get("blob")) if isinstance(item, dict) else None
            if blob is None:
                stand_ins.append(item)
            else:
                blobs.append(blob)
                stand_ins.append({**item, "blob": _PLACEHOLDER})
        return blobs, stand_ins

    def line_parts(self, message: JSONRPCMessage) -> list[bytes] | None:
        """The message as one line (newline included) in parts, with a remembered blob written as it is; None
        when the message carries none (serialize it as usual)."""
        if not self._made or not isinstance(message, JSONRPCResponse):
            return None
        blobs, stand_ins = self._stand_ins(message.result.get("contents"))
        if not blobs:
            return None
        stand_in = message.model_copy(update={"result": {**message.result, "contents": stand_ins}})
        return _spliced(
            stand_in.__pydantic_serializer__.to_json(stand_in, by_alias=True, exclude_unset=True), blobs
        )

    def response_parts(self, request_id: RequestId, result: dict[str, Any]) -> list[bytes]:
        """The JSON-RPC response carrying ``result`` (a wire-form dict) as one line in parts: the bytes
        :meth:`line_parts` or the plain serialization of its ``JSONRPCResponse`` gives, without the model."""
        blobs, stand_ins = self._stand_ins(result.get("contents"))
        if blobs:
            stand_in = {"jsonrpc": "2.0", "id": request_id, "result": {**result, "contents": stand_ins}}
            parts = _spliced(pydantic_core.to_json(stand_in), blobs)
            if parts is not None:
                return parts
        return [pydantic_core.to_json({"jsonrpc": "2.0", "id": request_id, "result": result}), b"\n"]


def _spliced(line: bytes, blobs: list[str]) -> list[bytes] | None:
    """``line`` with each placeholder replaced by its blob's bytes, in parts; None when the placeholders are
    not exactly one per blob."""
    pieces = line.split(_PLACEHOLDER_JSON)
    if len(pieces) != len(blobs) + 1:
        return None  # a placeholder also appeared elsewhere: the caller serializes the original
    parts = [pieces[0]]
    for blob, piece in zip(blobs, pieces[1:], strict=True):
        parts += [blob.encode("ascii"), piece]
    parts[-1] += b"\n"
    return parts


_splices: ContextVar[Splices | None] = ContextVar("mcp_resources_splices", default=None)


@contextlib.contextmanager
def splicing(splices: Splices) -> Iterator[None]:
    """Remember the base64 strings the requests served in this context make (their tasks inherit it)."""
    token = _splices.set(splices)
    try:
        yield
    finally:
        _splices.reset(token)


def base64_text(data: bytes) -> str:
    """``data`` in standard base64, remembered for the stdio writer when one is splicing."""
    text = pybase64.b64encode_as_string(data)
    splices = _splices.get()
    if splices is not None and len(text) >= SPLICE_AT:
        splices.remember(text)
    return text
