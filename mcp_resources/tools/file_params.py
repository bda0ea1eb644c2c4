"""File parameters of tools that a server embedding the store registers (``embed_store``).

A tool declares a parameter as a file by its type, :class:`FileInput`::

    @mcp.tool()
    async def checksum_image(image: FileInput) -> str:
        return hashlib.sha256(await image.read()).hexdigest()

and receives whatever the caller passed as one value it can read whole (:meth:`FileInput.read`), as a stream
(:meth:`FileInput.stream`) or as a file (``async with image.path() as p``): an artifact URI
(``blobstore://artifacts/{id}``, or a window of it), a ``data:`` URL, inline base64, ``{"upload_id": …}`` of a
committed chunked upload, or ``{"download_url": …, "file_id": …}`` (ChatGPT's ``openai/fileParams`` objects),
fetched only from the origins ``BLOBSTORE_FILE_DOWNLOAD_ORIGINS`` lists. The parameter's schema says so:
an ``anyOf`` of the string forms (with ``x-mcp-file``, SEP-2356/SEP-2631) and the two object forms, and the
tool's ``_meta["openai/fileParams"]`` names it (:class:`FileCalls` adds that in ``tools/list``).

The embedding server's ``tools/call`` (:class:`FileCalls`) looks up artifact URIs, upload ids and downloads
before the tool runs, as the caller and after the namespace check, so a foreign, guessed or expired handle
is the ``not_found`` tool error of a missing one and the tool never sees it; what it found lives for the
call and is removed after it. The pydantic validation of the tool's arguments then turns each value into a
:class:`FileInput` (``data:`` URLs and base64 are decoded there).
"""

from __future__ import annotations

import binascii
import contextlib
import copy
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, unquote_to_bytes, urlsplit

import anyio
import pybase64
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from blobstore.errors import BlobstoreError, InvalidRequest, LimitExceeded, NotFound
from blobstore.models import Artifact, BlobInfo, Caller, UploadState
from blobstore.service import ArtifactService
from mcp_resources.tools.binary_schema import FILE_PARAM_KEY, HANDLE_HINT, BinarySite, Key, Slot, Step, slots
from mcp_resources.tools.handles import CAP_SETTING, ArgumentHandles, Located, is_handle
from mcp_resources.tools.url_fetch import FetchPolicy, UrlFetcher

OPENAI_FILE_PARAMS: Final = "openai/fileParams"
FILE_URI_PREFIX: Final = "blobstore://files/"
"""SEP-2631 file URIs of this store: ``blobstore://files/<upload id>``, what ``files/authorizeUpload`` returns
(:mod:`mcp_resources.tools.files_capability`); a file parameter takes one like ``{"upload_id": …}``."""
URL_SCHEMES: Final = ("https://", "http://")
_PIECE: Final = 256 * 1024

FILE_SCHEMA: Final[dict[str, Any]] = {
    FILE_PARAM_KEY: True,
    "anyOf": [
        {
            "type": "string",
            "description": (
                f"A data: URL, base64 bytes, an https:// URL, {HANDLE_HINT} "
                "(or a window of it, ?offset=&length=)"
            ),
            "x-mcp-file": {},
        },
        {
            "type": "object",
            "description": "A committed chunked upload (upload_begin, upload_chunk, upload_commit)",
            "properties": {"upload_id": {"type": "string"}},
            "required": ["upload_id"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "description": "A file the host holds (openai/fileParams)",
            "properties": {
                "download_url": {"type": "string", "format": "uri"},
                "file_id": {"type": "string"},
                "mime_type": {"type": "string"},
                "file_name": {"type": "string"},
            },
            "required": ["download_url", "file_id"],
        },
    ],
}


# -- what a tool receives ---------------------------------------------------------------------------------


@dataclass(eq=False, kw_only=True)
class FileInput:
    """A file a tool was given: its bytes whole, as a stream or as a file on disk, and what is known of it."""

    name: str | None
    mime_type: str | None
    size: int
    opener: Callable[[], AsyncIterator[bytes]] = field(repr=False)
    """Opens the bytes afresh, for each :meth:`stream`."""
    local_path: Path | None = field(default=None, repr=False)
    """A file already holding the bytes (a fetched download), which :meth:`path` lends instead of a copy."""
    max_read: int | None = field(default=None, repr=False)
    """The most :meth:`read` returns whole."""
    url: str | None = field(default=None, repr=False)
    """The URL it was given as, when it was given as one (it may carry a signature: never log it)."""
    artifact: Artifact | None = field(default=None, repr=False)
    """The artifact it is, when it is a whole one (not a window or a view of it)."""
    blob: BlobInfo | None = field(default=None, repr=False)

    def stream(self) -> AsyncIterator[bytes]:
        """The bytes, in pieces (each storage block checked as it is read)."""
        return self.opener()

    async def read(self) -> bytes:
        """The bytes, whole; refused when more than an argument may carry
        (``BLOBSTORE_PROXY_MAX_ARGUMENT_BYTES``): read larger files with :meth:`stream` or :meth:`path`."""
        if self.max_read is not None and self.size > self.max_read:
            raise refused(
                LimitExceeded(
                    f"{self.size} bytes are more than read() returns ({self.max_read}, {CAP_SETTING}); "
                    "use stream() or path()",
                    max_argument_bytes=self.max_read,
                )
            )
        return b"".join([piece async for piece in self.stream()])

    @contextlib.asynccontextmanager
    async def path(self) -> AsyncIterator[Path]:
        """A file (mode 0600) holding the bytes, removed when the block ends."""
        if self.local_path is not None:
            yield self.local_path
            return
        fd, name = tempfile.mkstemp(prefix="blobstore-file-")
        os.close(fd)
        target = Path(name)
        try:
            async with await anyio.open_file(target, "wb") as out:
                async for piece in self.stream():
                    await out.write(piece)
            yield target
        finally:
            await anyio.Path(target).unlink(missing_ok=True)

    # -- pydantic: the parameter's schema and validation ----------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(file_argument)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return copy.deepcopy(FILE_SCHEMA)


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _from_bytes(data: bytes, mime_type: str | None) -> FileInput:
    return FileInput(name=None, mime_type=mime_type, size=len(data), opener=lambda: _one(data))


def parse_data_url(text: str) -> tuple[bytes, str]:
    """The bytes and media type of an RFC 2397 ``data:`` URL (base64 or percent-encoded)."""
    header, comma, payload = text[len("data:") :].partition(",")
    if not comma:
        raise ValueError("a data: URL needs a ',' before its data")
    params = header.split(";")
    is_base64 = params[-1].strip().lower() == "base64"
    media = ";".join(params[:-1] if is_base64 else params).strip() or "text/plain;charset=US-ASCII"
    if not is_base64:
        return unquote_to_bytes(payload), media
    try:
        return pybase64.b64decode(unquote_to_bytes(payload), validate=True), media
    except (binascii.Error, ValueError):
        raise ValueError("the data: URL's base64 is not valid") from None


def value_key(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def file_argument(value: Any) -> FileInput:
    """A file parameter's value as the tool receives it (the validator of :class:`FileInput`).

    Artifact URIs, upload ids and downloads must have been looked up for the call (:class:`FileCalls` does
    that in the embedding server's ``tools/call``); ``data:`` URLs and base64 are decoded here.
    """
    if isinstance(value, FileInput):
        return value
    call = _CALL.get()
    if call is not None and value_key(value) in call.prepared:
        return call.prepared[value_key(value)]
    if isinstance(value, str):
        if is_handle(value) or value.startswith(FILE_URI_PREFIX):
            raise ValueError("an artifact URI is read through the embedded store's tools/call (embed_store)")
        if is_url(value):
            raise ValueError("a URL is fetched through the embedded store's tools/call (embed_store)")
        if value.startswith("data:"):
            data, media = parse_data_url(value)
            return _from_bytes(data, media)
        try:
            return _from_bytes(pybase64.b64decode(value, validate=True), None)
        except (binascii.Error, ValueError):
            raise ValueError("expected an artifact URI, a data: URL or base64") from None
    if isinstance(value, dict) and ("upload_id" in value or "download_url" in value):
        raise ValueError("upload ids and download URLs are read through the embedded store's tools/call")
    raise ValueError("expected an artifact URI, a data: URL, base64, {upload_id} or {download_url, file_id}")


# -- one call's files -------------------------------------------------------------------------------------


@dataclass
class CallFiles:
    """What one ``tools/call`` found for its file parameters, by the raw value the caller passed."""

    prepared: dict[str, FileInput] = field(default_factory=dict)
    cleanup: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    refusal: BlobstoreError | None = None
    """The first error a file's read raised in the tool, if any."""
    typed: dict[tuple[str, str], Any] = field(default_factory=dict)
    """Typed media arguments (:mod:`mcp_resources.tools.media_params`), checked for the call, by their kind
    and the raw value."""


_CALL: ContextVar[CallFiles | None] = ContextVar("blobstore_file_call", default=None)


def current_call() -> CallFiles | None:
    """The files of the ``tools/call`` being served, while its tool runs."""
    return _CALL.get()


class FileRefused(ToolError):
    """A file parameter's read that the store refused; the tool's result becomes that error
    (``structuredContent.error``), as if the call had been refused before the tool ran."""

    def __init__(self, error: BlobstoreError) -> None:
        super().__init__(f"Error ({error.code}): {error.message}")
        self.error = error


def refused(error: BlobstoreError) -> FileRefused:
    """``error`` as the tool raises it, remembered for the call's result."""
    call = _CALL.get()
    if call is not None and call.refusal is None:
        call.refusal = error
    return FileRefused(error)


class FileCalls:
    """Prepares the file parameters of the embedding server's tool calls and names them in ``tools/list``."""

    def __init__(self, service: ArtifactService, handles: ArgumentHandles) -> None:
        self.service = service
        self.handles = handles
        self.fetcher = UrlFetcher(FetchPolicy.from_settings(service.settings, handles.max_bytes, CAP_SETTING))

    @staticmethod
    def file_params(sites: list[BinarySite]) -> list[str]:
        """The top-level parameters that are file parameters (what ``openai/fileParams`` lists)."""
        return [
            site.path[0].name
            for site in sites
            if site.file_param and len(site.path) == 1 and isinstance(site.path[0], Key)
        ]

    @contextlib.asynccontextmanager
    async def call(
        self,
        caller: Caller,
        tool: str,
        arguments: dict[str, Any] | None,
        sites: list[BinarySite],
        caps: Mapping[tuple[Step, ...], int] | None = None,
    ) -> AsyncIterator[CallFiles]:
        """Look the call's file references up (raising the catalogue's errors before the tool runs) and make
        them what its validation finds, until the block ends. ``caps`` bounds what a URL at a parameter may
        bring, by the parameter's path (a typed media parameter's ``max_bytes``)."""
        files = CallFiles()
        async with files.cleanup:
            for slot in slots(arguments, [site for site in sites if site.file_param]):
                key = value_key(slot.value)
                if key not in files.prepared:
                    cap = (caps or {}).get(slot.site.path)
                    found = await self._prepare(caller, tool, slot, files, cap)
                    if found is not None:
                        files.prepared[key] = found
            token = _CALL.set(files)
            try:
                yield files
            finally:
                _CALL.reset(token)

    async def _prepare(
        self, caller: Caller, tool: str, slot: Slot, files: CallFiles, cap: int | None = None
    ) -> FileInput | None:
        value = slot.value
        if is_handle(value):
            return await self._artifact(caller, tool, await self.handles.look_up(caller, slot))
        if isinstance(value, str) and value.startswith(FILE_URI_PREFIX):
            return await self._upload(caller, tool, slot, value[len(FILE_URI_PREFIX) :])
        if isinstance(value, dict) and "upload_id" in value:
            return await self._upload(caller, tool, slot, value.get("upload_id"))
        if isinstance(value, dict) and "download_url" in value:
            return await self._download(slot, files, value.get("download_url"), cap)
        if is_url(value):
            return await self._download(slot, files, value, cap)
        return None

    async def _artifact(self, caller: Caller, tool: str, found: Located) -> FileInput:
        started = time.monotonic()
        span, artifact, blob = found.span, found.artifact, found.blob

        def opener() -> AsyncIterator[bytes]:
            if found.view is not None:
                return _one(found.view)
            return self.service.stream(blob, span.offset, span.end) if span.length else _one(b"")

        self.handles.audit_resolved(caller, tool, found, started)
        whole = found.view is None and span.offset == 0 and span.length == artifact.size
        return FileInput(
            name=artifact.name,
            mime_type=found.mime_type,
            size=span.length,
            opener=opener,
            max_read=self.handles.max_bytes,
            artifact=artifact if whole else None,
            blob=blob if whole else None,
        )

    async def _upload(self, caller: Caller, tool: str, slot: Slot, upload_id: Any) -> FileInput:
        if not isinstance(upload_id, str):
            raise InvalidRequest(f"{slot.name}: upload_id must be a string", argument=slot.name)
        try:
            session = await self.service.uploads.get(caller, upload_id)
        except NotFound:
            raise NotFound(f"{slot.name}: upload not found", argument=slot.name) from None
        if session.state is not UploadState.COMPLETED or session.artifact_id is None:
            raise InvalidRequest(
                f"{slot.name}: upload {upload_id} is {session.state.value}, not committed: call "
                "upload_commit first",
                argument=slot.name,
            )
        handle = Slot({"uri": f"blobstore://artifacts/{session.artifact_id}"}, "uri", slot.name, slot.site)
        return await self._artifact(caller, tool, await self.handles.look_up(caller, handle))

    async def _download(self, slot: Slot, files: CallFiles, url: Any, cap: int | None) -> FileInput:
        """A file the caller names by URL (a string, or a host's ``download_url``), fetched under the
        guard of :mod:`mcp_resources.tools.url_fetch`."""
        if not isinstance(url, str):
            raise InvalidRequest(f"{slot.name}: download_url must be a string", argument=slot.name)
        fetched = await self.fetcher.fetch(url, slot.name, cap)
        spool = fetched.path
        files.cleanup.callback(spool.unlink, missing_ok=True)
        value = slot.value if isinstance(slot.value, dict) else {}
        name, mime = value.get("file_name"), value.get("mime_type")
        return FileInput(
            name=name if isinstance(name, str) else _url_name(url),
            mime_type=mime if isinstance(mime, str) else None,
            size=fetched.size,
            opener=lambda: _read_file(spool),
            local_path=spool,
            max_read=self.handles.max_bytes,
            url=url if isinstance(slot.value, str) else None,
        )


def is_url(value: object) -> bool:
    """A string a file parameter fetches (``https://``, or ``http://`` where its origin is allowed)."""
    return isinstance(value, str) and value.startswith(URL_SCHEMES)


def _url_name(url: str) -> str | None:
    """The last segment of the URL's path, as a file name (None when the path names no file)."""
    last = unquote(urlsplit(url).path.rpartition("/")[2])
    return last or None


async def _read_file(path: Path) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as source:
        while piece := await source.read(_PIECE):
            yield piece


__all__ = [
    "FILE_SCHEMA",
    "OPENAI_FILE_PARAMS",
    "CallFiles",
    "FileCalls",
    "FileInput",
    "current_call",
    "file_argument",
    "is_url",
    "parse_data_url",
    "refused",
    "value_key",
]
