"""A streaming ``multipart/form-data`` reader for single-request uploads.

Starlette's ``request.form()`` spools every file part to a temporary file before the endpoint runs; this
reader instead feeds python-multipart's push parser from ``request.stream()`` and hands the ``file`` part on
as an async iterator, so the bytes go to storage as they arrive. Small text fields (``name``, ``mime_type``,
``ttl_seconds``) must come before the file part, as browsers and ``curl -F`` send them in the order given;
after it they are refused (they would come too late to apply). Other fields are refused, as unknown members
of a JSON body are.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from blobstore.errors import InvalidRequest

FILE_FIELD: Final = "file"
TEXT_FIELDS: Final = frozenset({"name", "mime_type", "ttl_seconds"})
MAX_FIELD_BYTES: Final = 64 * 1024
MAX_FIELDS: Final = 32
MAX_HEADER_BYTES: Final = 16 * 1024


@dataclass(frozen=True, slots=True)
class FilePart:
    filename: str | None
    content_type: str | None


def boundary_of(content_type: str) -> bytes:
    kind, params = parse_options_header(content_type)
    if kind != b"multipart/form-data":
        raise InvalidRequest("expected multipart/form-data")
    boundary = params.get(b"boundary")
    if not boundary or len(boundary) > 200:
        raise InvalidRequest("multipart/form-data needs a boundary parameter")
    return boundary


class StreamingForm:
    """Push-parses a form from a byte stream: :meth:`until_file`, then iterate :meth:`file_data` once."""

    def __init__(self, stream: AsyncIterator[bytes], boundary: bytes) -> None:
        self._stream = stream
        self._parser = MultipartParser(
            boundary,
            callbacks={
                "on_part_begin": self._on_part_begin,
                "on_header_field": self._on_header_field,
                "on_header_value": self._on_header_value,
                "on_header_end": self._on_header_end,
                "on_headers_finished": self._on_headers_finished,
                "on_part_data": self._on_part_data,
                "on_part_end": self._on_part_end,
                "on_end": self._on_end,
            },
        )
        self.fields: dict[str, str] = {}
        self._headers: dict[str, str] = {}
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._header_bytes = 0
        self._kind: str | None = None
        self._field_name = ""
        self._field_value = bytearray()
        self._file: FilePart | None = None
        self._file_chunks: deque[bytes] = deque()
        self._file_done = False
        self._ended = False

    # -- parser callbacks (synchronous, called from inside ``write``) ----------------------------------------

    def _on_part_begin(self) -> None:
        self._headers = {}
        self._header_bytes = 0

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self._header_field += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._count_header(end - start)
        self._header_value += data[start:end]

    def _count_header(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > MAX_HEADER_BYTES:
            raise InvalidRequest("multipart part headers are too large")

    def _on_header_end(self) -> None:
        name = self._header_field.decode("latin-1").strip().lower()
        self._headers[name] = self._header_value.decode("utf-8", errors="replace").strip()
        self._header_field.clear()
        self._header_value.clear()

    def _on_headers_finished(self) -> None:
        # As bytes: the parser re-encodes text as latin-1, which fails on the UTF-8 names browsers send.
        disposition, params = parse_options_header(self._headers.get("content-disposition", "").encode())
        if disposition != b"form-data" or b"name" not in params:
            raise InvalidRequest("every multipart part needs Content-Disposition: form-data; name=...")
        name = params[b"name"].decode("utf-8", errors="replace")
        if name != FILE_FIELD and name not in TEXT_FIELDS:
            raise InvalidRequest("unknown form field; the fields are: " + ", ".join(sorted(TEXT_FIELDS)))
        if self._file is not None and name in TEXT_FIELDS:
            raise InvalidRequest(f"form fields must come before the '{FILE_FIELD}' part")
        if name == FILE_FIELD:
            if self._file is not None:
                raise InvalidRequest(f"only one '{FILE_FIELD}' part is allowed")
            filename = params.get(b"filename")
            self._file = FilePart(
                filename=filename.decode("utf-8", errors="replace") if filename else None,
                content_type=self._headers.get("content-type"),
            )
            self._kind = "file"
            return
        if len(self.fields) >= MAX_FIELDS:
            raise InvalidRequest("too many form fields")
        self._kind = "field"
        self._field_name = name
        self._field_value.clear()

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._kind == "file":
            self._file_chunks.append(bytes(data[start:end]))
            return
        self._field_value += data[start:end]
        if len(self._field_value) > MAX_FIELD_BYTES:
            raise InvalidRequest(f"form field '{self._field_name}' exceeds {MAX_FIELD_BYTES} bytes")

    def _on_part_end(self) -> None:
        if self._kind == "file":
            self._file_done = True
        elif self._kind == "field":
            try:
                self.fields[self._field_name] = self._field_value.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidRequest(f"form field '{self._field_name}' is not UTF-8") from None
        self._kind = None

    def _on_end(self) -> None:
        self._ended = True

    # -- pumping -------------------------------------------------------------------------------------------

    async def _pump(self) -> bool:
        """Feed the next piece of the body to the parser; False at the end of the body."""
        try:
            piece = await anext(self._stream)
        except StopAsyncIteration:
            if not self._ended:
                raise InvalidRequest("multipart body ended before its closing boundary") from None
            return False
        try:
            self._parser.write(piece)
        except MultipartParseError:
            raise InvalidRequest("malformed multipart body") from None
        return True

    async def until_file(self) -> FilePart:
        """Read fields until the file part's headers; the fields seen so far are in :attr:`fields`."""
        while self._file is None:
            if not await self._pump():
                raise InvalidRequest(f"the form has no '{FILE_FIELD}' part")
        return self._file

    async def file_data(self) -> AsyncIterator[bytes]:
        """The file part's bytes as they arrive; then the rest of the body is checked to be well formed."""
        while True:
            while self._file_chunks:
                yield self._file_chunks.popleft()
            if self._file_done:
                break
            if not await self._pump():
                raise InvalidRequest("multipart body ended inside the file part")
        while await self._pump():
            pass
