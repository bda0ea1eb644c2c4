"""Typed media for tool authors: ``Image``, ``Audio``, ``Video`` and ``Document`` parameters (and results).

A tool of a server that embeds the store (``embed_store``) declares what kind of file it takes by its type::

    @mcp.tool()
    async def analyze_image(image: Annotated[Image, MediaLimits(max_bytes="10MB", formats=("png", "jpeg"))],
                            question: str) -> str:
        facts = await image.facts()          # probed in a decoder worker, only now
        return f"{image.format} {image.width}x{image.height}: ..."

and the caller passes the file in any form a :class:`~mcp_resources.tools.file_params.FileInput` takes (an
artifact URI, a ``data:`` URL, base64, ``{"upload_id": …}``, an ``https://`` URL, a host's
``{"download_url": …}``). Before the tool runs, each typed argument is checked (:class:`MediaCalls`): its size
against ``max_bytes``, its format, sniffed from its first bytes (never from a name or a claimed type),
against the formats accepted, and, when the annotation (or the settings' defaults) bounds pixels, seconds or
pages, its facts, probed in a decoder worker (:meth:`blobstore.views.engine.MediaViews.probe`, with the
workers' time and memory limits), which also refuses media that does not decode. Any refusal is the call's
tool error and the tool is not called. Facts no limit needs are probed only when the tool asks for them.

The parameter's schema (:func:`input_schema`) is the file parameter's ``anyOf`` of forms with
``contentMediaType`` and one extension object, ``x-blobstore-media`` (``type``, ``formats``, ``mimeTypes``,
``maxSize`` in bytes and ``maxSizeText``, and the other limits set); ``tools/list`` fills in the defaults
from settings (:func:`advertised`).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

import anyio
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from blobstore.config import Settings
from blobstore.errors import BlobstoreError, InvalidRequest, LimitExceeded, UnsupportedMedia
from blobstore.media_formats import FORMATS, MediaKind, canonical_format, formats_of, sniff_format
from blobstore.models import Artifact
from blobstore.service import ArtifactService
from blobstore.units import human_bytes, parse_bytes
from blobstore.views.engine import views_for
from blobstore.views.kind import Source
from mcp_resources.tools.binary_schema import BinarySite, Form, Step, file_param_nodes, slots
from mcp_resources.tools.file_params import (
    FILE_SCHEMA,
    CallFiles,
    FileInput,
    current_call,
    file_argument,
    refused,
    value_key,
)

MEDIA_KEY: Final = "x-blobstore-media"
"""The extension object of a typed media parameter's schema (and of a typed result's)."""
SNIFF_BYTES: Final = 4096
"""What is read of a file to tell its format (every signature sniffed sits in the first 64 bytes)."""
KIND_WORDS: Final[dict[str, str]] = {
    "image": "an image",
    "audio": "audio",
    "video": "a video",
    "document": "a PDF",
}


class FactsNotRead(RuntimeError):
    """A fact was read before :meth:`Media.facts` was awaited."""


# -- limits ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MediaLimits:
    """What one typed parameter accepts, in its annotation: ``Annotated[Image, MediaLimits(...)]``.

    ``max_bytes`` is a count or a size as text (``"10MB"`` is 10,000,000 bytes, ``"10 MiB"`` 10,485,760);
    ``formats`` are names (``png``, ``jpeg`` or ``jpg``, ``gif``, ``webp``; ``mp3``, ``wav``, ``ogg``,
    ``flac``; ``mp4``, ``webm``, ``mov``; ``pdf``). A limit left out is the setting's default
    (``BLOBSTORE_MEDIA_MAX_BYTES``, ``BLOBSTORE_MEDIA_MAX_PIXELS``, ``BLOBSTORE_MEDIA_MAX_SECONDS``).
    """

    max_bytes: int | str | None = None
    formats: tuple[str, ...] | None = None
    max_pixels: int | None = None
    max_seconds: float | None = None
    max_pages: int | None = None

    def extension(self) -> dict[str, Any]:
        """These limits as the keys of :data:`MEDIA_KEY` (only those set)."""
        out: dict[str, Any] = {}
        if self.max_bytes is not None:
            out["maxSize"] = parse_bytes(self.max_bytes)
            out["maxSizeText"] = (
                _size_text(self.max_bytes) if isinstance(self.max_bytes, str) else human_bytes(out["maxSize"])
            )
        if self.formats is not None:
            out["formats"] = list(dict.fromkeys(canonical_format(name) for name in self.formats))
        for key, value in (
            ("maxPixels", self.max_pixels),
            ("maxSeconds", self.max_seconds),
            ("maxPages", self.max_pages),
        ):
            if value is not None:
                out[key] = value
        return out

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        self.extension()  # a bad size or format name fails where the tool is declared, not at its first call
        return handler(source)

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json = handler(schema)
        if handler.mode != "validation" or MEDIA_KEY not in json:
            return json
        kind = json[MEDIA_KEY]["type"]
        return input_schema(kind, {**json[MEDIA_KEY], **self.extension()})


def _size_text(text: str) -> str:
    """A size as its author wrote it, spaced and cased one way: ``"10mb"`` is ``"10 MB"``."""
    number = text.strip().rstrip("bBkKmMgGtTiI ")
    unit = text.strip()[len(number) :].strip().upper().replace("IB", "iB")
    return f"{number} {unit}" if unit else f"{number} bytes"


@dataclass(frozen=True, slots=True)
class MediaSpec:
    """The limits one typed parameter is checked against: its annotation's, else the settings' defaults."""

    kind: MediaKind
    formats: tuple[str, ...]
    max_bytes: int
    max_bytes_text: str
    max_pixels: int | None = None
    max_seconds: float | None = None
    max_pages: int | None = None

    @classmethod
    def of(cls, extension: Mapping[str, Any], settings: Settings) -> MediaSpec:
        kind: MediaKind = extension["type"]
        formats = tuple(extension.get("formats") or formats_of(kind))
        given = extension.get("maxSize")
        max_bytes = int(given) if given is not None else settings.media_max_bytes
        text = extension.get("maxSizeText") if given is not None else None
        visual = kind in ("image", "video")
        timed = kind in ("audio", "video")
        return cls(
            kind=kind,
            formats=formats,
            max_bytes=max_bytes,
            max_bytes_text=str(text) if text else human_bytes(max_bytes),
            max_pixels=extension.get("maxPixels", settings.media_max_pixels if visual else None),
            max_seconds=extension.get("maxSeconds", settings.media_max_seconds if timed else None),
            max_pages=extension.get("maxPages"),
        )

    @property
    def probes_first(self) -> bool:
        """Whether the facts are needed before the call (a limit on them is set)."""
        return any(limit is not None for limit in (self.max_pixels, self.max_seconds, self.max_pages))

    def extension(self) -> dict[str, Any]:
        """The extension object as ``tools/list`` shows it: every limit in force."""
        out: dict[str, Any] = {
            "type": self.kind,
            "formats": list(self.formats),
            "mimeTypes": [FORMATS[name].mime_type for name in self.formats],
            "maxSize": self.max_bytes,
            "maxSizeText": self.max_bytes_text,
        }
        for key, value in (
            ("maxPixels", self.max_pixels),
            ("maxSeconds", self.max_seconds),
            ("maxPages", self.max_pages),
        ):
            if value is not None:
                out[key] = value
        return out

    def words(self) -> str:
        """What the parameter takes, for the tool's description: ``an image (png or jpeg, at most 10 MB)``."""
        names = list(self.formats)
        listed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
        limits = [listed, f"at most {self.max_bytes_text}"]
        if self.max_pixels is not None:
            limits.append(f"{self.max_pixels:,} pixels")
        if self.max_seconds is not None:
            limits.append(f"{self.max_seconds:g} s")
        if self.max_pages is not None:
            limits.append(f"{self.max_pages} pages")
        return f"{KIND_WORDS[self.kind]} ({', '.join(limits)})"


# -- schemas -----------------------------------------------------------------------------------------------


def content_media_type(kind: MediaKind, formats: list[str] | tuple[str, ...]) -> str:
    """``image/png`` for one format, else the kind's range (``image/*``; a PDF is ``application/pdf``)."""
    types = list(dict.fromkeys(FORMATS[name].mime_type for name in formats))
    if len(types) == 1:
        return types[0]
    return {"image": "image/*", "audio": "audio/*", "video": "video/*", "document": "application/pdf"}[kind]


def input_schema(kind: MediaKind, extension: Mapping[str, Any]) -> dict[str, Any]:
    """A typed parameter's schema: the file parameter's forms, ``contentMediaType`` and the extension."""
    formats = list(extension.get("formats") or formats_of(kind))
    schema = copy.deepcopy(FILE_SCHEMA)
    schema[MEDIA_KEY] = {"type": kind, **dict(extension), "formats": formats}
    schema["contentMediaType"] = content_media_type(kind, formats)
    schema["description"] = f"{KIND_WORDS[kind][0].upper()}{KIND_WORDS[kind][1:]} ({', '.join(formats)})"
    return schema


RESULT_FACTS: Final[dict[str, dict[str, Any]]] = {
    "image": {"width": {"type": "integer"}, "height": {"type": "integer"}},
    "audio": {"durationSeconds": {"type": "number"}, "sampleRate": {"type": "integer"}},
    "video": {
        "durationSeconds": {"type": "number"},
        "width": {"type": "integer"},
        "height": {"type": "integer"},
    },
    "document": {"pages": {"type": "integer"}},
}


def result_schema(kind: MediaKind) -> dict[str, Any]:
    """What ``structuredContent`` holds for a typed result: the stored artifact, never its bytes."""
    return {
        "type": "object",
        "description": (
            f"{KIND_WORDS[kind][0].upper()}{KIND_WORDS[kind][1:]} the tool made, stored as an artifact; the "
            "content carries it inline (images downscaled) under the inline limit, else a resource_link"
        ),
        MEDIA_KEY: {"type": kind, "result": True},
        "properties": {
            "type": {"const": kind},
            "uri": {"type": "string", "format": "uri"},
            "name": {"type": "string"},
            "mimeType": {"type": "string"},
            "size": {"type": "integer"},
            "sha256": {"type": "string"},
            "format": {"type": "string"},
            **RESULT_FACTS[kind],
        },
        "required": ["type", "uri", "mimeType", "size", "sha256"],
    }


def advertised(schema: Mapping[str, Any], settings: Settings) -> dict[str, Any] | None:
    """``schema`` (a tool's ``inputSchema``) with each typed parameter's extension showing the limits in
    force (defaults from settings filled in), or None when it has no typed parameter."""
    found = file_param_nodes(schema)
    if not any(MEDIA_KEY in node for node in found.values()):
        return None
    rewritten = copy.deepcopy(dict(schema))
    for node in file_param_nodes(rewritten).values():
        extension = node.get(MEDIA_KEY)
        if isinstance(extension, dict):
            spec = MediaSpec.of(extension, settings)
            node[MEDIA_KEY] = spec.extension()
            node["contentMediaType"] = content_media_type(spec.kind, spec.formats)
    return rewritten


def media_specs(schema: Mapping[str, Any] | None, settings: Settings) -> dict[tuple[Step, ...], MediaSpec]:
    """Each typed parameter of ``schema`` by its path, with the limits it is checked against."""
    if not isinstance(schema, dict):
        return {}
    return {
        path: MediaSpec.of(node[MEDIA_KEY], settings)
        for path, node in file_param_nodes(schema).items()
        if isinstance(node.get(MEDIA_KEY), dict)
    }


def description_line(schema: Mapping[str, Any] | None, settings: Settings) -> str | None:
    """The line a tool's description gains: what each typed parameter takes, in which forms."""
    specs = media_specs(schema, settings)
    if not specs:
        return None
    named = [
        f"{'.'.join(str(getattr(step, 'name', '*')) for step in path)}: {spec.words()}"
        for path, spec in specs.items()
    ]
    return (
        "Files: "
        + "; ".join(named)
        + ". Each as an artifact URI blobstore://artifacts/{id}, a data: URL, base64, "
        "an https:// URL, {upload_id} of a committed upload or {download_url, file_id}."
    )


# -- what a tool receives (and returns) --------------------------------------------------------------------


Prober = Callable[[], Awaitable[dict[str, Any]]]


class Media:
    """A file of one kind of media: what a tool receives for a typed parameter, or returns.

    A tool returns one made from bytes or a file: ``Image(data=png, format="png")``, ``Audio(path=...)``.
    The format is what the bytes prove when they prove one (``format`` names it otherwise).
    """

    kind: ClassVar[MediaKind]

    def __init__(
        self,
        data: bytes | None = None,
        *,
        format: str | None = None,
        path: str | os.PathLike[str] | None = None,
        name: str | None = None,
    ) -> None:
        if (data is None) == (path is None):
            raise ValueError(f"{type(self).__name__} needs data= or path=, one of them")
        self._data = data
        self._path = Path(path) if path is not None else None
        head = data[:SNIFF_BYTES] if data is not None else _head_of(self._path)
        sniffed = sniff_format(head)
        self.format: str | None = sniffed or (canonical_format(format) if format else None)
        if self.format is None or FORMATS[self.format].kind != self.kind:
            raise ValueError(f"these bytes are not {KIND_WORDS[self.kind]} of a known format")
        self.name: str | None = name or (self._path.name if self._path is not None else None)
        self.size: int = len(data) if data is not None else _size_of(self._path)
        self.url: str | None = None
        """The URL the caller gave it as (it may carry a signature: never log it)."""
        self.uri: str | None = None
        """The artifact URI it was given as, when it is a whole artifact."""
        self._file: FileInput | None = None
        self._facts: dict[str, Any] | None = None
        self._prober: Prober | None = None

    @classmethod
    def _argument(cls, file: FileInput, format_name: str, prober: Prober) -> Media:
        media = cls.__new__(cls)
        media._data = None
        media._path = None
        media.format = format_name
        media.name = file.name
        media.size = file.size
        media.url = file.url
        media.uri = file.artifact.uri if file.artifact is not None else None
        media._file = file
        media._facts = None
        media._prober = prober
        return media

    @property
    def artifact(self) -> Artifact | None:
        """The artifact it was given as, when it is a whole one."""
        return self._file.artifact if self._file is not None else None

    @property
    def mime_type(self) -> str:
        """The type of the bytes (sniffed; never what a caller claimed)."""
        assert self.format is not None
        return FORMATS[self.format].mime_type

    @property
    def data(self) -> bytes | None:
        """The bytes, when it was made from bytes (an argument's are read with :meth:`read`)."""
        return self._data

    def stream(self) -> AsyncIterator[bytes]:
        """The bytes in pieces (an artifact's storage blocks checked as they are read)."""
        if self._file is not None:
            return self._file.stream()
        return _pieces(self._data, self._path)

    async def read(self) -> bytes:
        """The bytes, whole (an argument's refused over ``BLOBSTORE_PROXY_MAX_ARGUMENT_BYTES``)."""
        if self._file is not None:
            return await self._file.read()
        return b"".join([piece async for piece in self.stream()])

    async def base64(self) -> str:
        return base64.b64encode(await self.read()).decode("ascii")

    @contextlib.asynccontextmanager
    async def path(self) -> AsyncIterator[Path]:
        """A file holding the bytes (mode 0600 when one is made for it, removed when the block ends)."""
        if self._file is not None:
            async with self._file.path() as found:
                yield found
            return
        if self._path is not None:
            yield self._path
            return
        async with FileInput(
            name=self.name, mime_type=self.mime_type, size=self.size, opener=lambda: _pieces(self._data, None)
        ).path() as made:
            yield made

    async def facts(self) -> dict[str, Any]:
        """What a decoder worker finds (pixel size; duration and rate; pages), probed once, on first use.
        A refusal (``media_invalid``, ``view_timeout``) becomes the call's tool error."""
        if self._facts is None:
            if self._prober is None:
                raise FactsNotRead(f"a {type(self).__name__} a tool made has no probed facts")
            try:
                self._facts = await self._prober()
            except BlobstoreError as exc:
                raise refused(exc) from None
        return dict(self._facts)

    def _fact(self, name: str) -> Any:
        if self._facts is None:
            raise FactsNotRead(f"await {type(self).__name__.lower()}.facts() before reading .{name}")
        return self._facts.get(name)

    # -- pydantic: validation from the call's checked arguments, the schema, results -------------------------

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def validate(value: Any) -> Media:
            if isinstance(value, cls):
                return value
            call = current_call()
            found = call.typed.get((cls.kind, value_key(value))) if call is not None else None
            if isinstance(found, cls):
                return found
            raise ValueError(
                f"{KIND_WORDS[cls.kind]} argument is checked and read through the embedded store's "
                "tools/call (embed_store)"
            )

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.plain_serializer_function_ser_schema(_serialized)
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        if handler.mode == "serialization":
            return result_schema(cls.kind)
        return input_schema(cls.kind, {})


class Image(Media):
    """An image: png, jpeg, gif or webp. ``width`` and ``height`` after ``await image.facts()``."""

    kind = "image"

    @property
    def width(self) -> int:
        return int(self._fact("width"))

    @property
    def height(self) -> int:
        return int(self._fact("height"))


class Audio(Media):
    """A recording: mp3, wav, ogg or flac. ``duration``, ``sample_rate``, ``channels`` after facts()."""

    kind = "audio"

    @property
    def duration(self) -> float:
        return float(self._fact("duration_seconds"))

    @property
    def sample_rate(self) -> int:
        return int(self._fact("sample_rate"))

    @property
    def channels(self) -> int:
        return int(self._fact("channels"))


class Video(Media):
    """A video: mp4, webm or mov. ``duration``, ``width``, ``height``, ``fps`` after facts()."""

    kind = "video"

    @property
    def duration(self) -> float:
        return float(self._fact("duration_seconds"))

    @property
    def width(self) -> int:
        return int(self._fact("width"))

    @property
    def height(self) -> int:
        return int(self._fact("height"))

    @property
    def fps(self) -> float | None:
        rate = self._fact("frame_rate")
        return float(rate) if rate is not None else None


class Document(Media):
    """A PDF. ``pages`` and ``text_layer`` after facts()."""

    kind = "document"

    @property
    def pages(self) -> int:
        return int(self._fact("pages"))

    @property
    def text_layer(self) -> bool:
        return bool(self._fact("text_layer"))


MEDIA_TYPES: Final[dict[str, type[Media]]] = {cls.kind: cls for cls in (Image, Audio, Video, Document)}


def _serialized(value: Any) -> Any:
    """A typed value as JSON: a result as the artifact it was stored as (:mod:`media_results` stores it first
    and remembers it here); anything else (an argument a framework logs) as what is known of it, never its
    bytes."""
    stored = _STORED.get(id(value))
    if stored is not None:
        return stored
    if not isinstance(value, Media):
        return value
    return {
        "type": value.kind,
        "format": value.format,
        "size": value.size,
        "name": value.name,
        "uri": value.uri,
    }


_STORED: dict[int, dict[str, Any]] = {}
"""While a typed result is being answered: each media value's stored form, by identity."""


@contextlib.contextmanager
def stored_forms(forms: Mapping[int, dict[str, Any]]) -> Iterator[None]:
    """While the block runs, each media value of ``forms`` (by identity) serializes as its stored form."""
    _STORED.update(forms)
    try:
        yield
    finally:
        for key in forms:
            _STORED.pop(key, None)


def _size_of(path: Path | None) -> int:
    assert path is not None
    return path.stat().st_size


def _head_of(path: Path | None) -> bytes:
    assert path is not None
    with path.open("rb") as source:
        return source.read(SNIFF_BYTES)


async def _pieces(data: bytes | None, path: Path | None) -> AsyncIterator[bytes]:
    if data is not None:
        yield data
        return
    assert path is not None
    async with await anyio.open_file(path, "rb") as source:
        while piece := await source.read(256 * 1024):
            yield piece


# -- checking a call's typed arguments ---------------------------------------------------------------------


async def _head(file: FileInput) -> bytes:
    head = bytearray()
    stream = file.stream()
    try:
        async for piece in stream:
            head += piece
            if len(head) >= SNIFF_BYTES:
                break
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()
    return bytes(head[:SNIFF_BYTES])


@dataclass
class MediaCalls:
    """Checks the typed media arguments of the embedding server's tool calls before the tool runs."""

    service: ArtifactService

    def specs(self, schema: Mapping[str, Any] | None) -> dict[tuple[Step, ...], MediaSpec]:
        return media_specs(schema, self.service.settings)

    async def check(
        self,
        files: CallFiles,
        arguments: Mapping[str, Any] | None,
        specs: Mapping[tuple[Step, ...], MediaSpec],
    ) -> None:
        """Make each typed argument the tool receives, refusing (the catalogue's errors) what its limits do
        not admit; the files were looked up by :class:`~mcp_resources.tools.file_params.FileCalls`."""
        for path, spec in specs.items():
            site = BinarySite(path, Form.DATA_URL, file_param=True)
            for slot in slots(arguments, [site]):
                if slot.value is None:
                    continue  # an optional parameter given as null: pydantic decides whether null is allowed
                # The same value at two parameters is checked against each one's limits.
                key = value_key(slot.value)
                file = files.prepared.get(key)
                if file is None:
                    try:
                        file = file_argument(slot.value)
                    except ValueError as exc:
                        raise InvalidRequest(f"{slot.name}: {exc}", argument=slot.name) from None
                files.typed[(spec.kind, key)] = await self._checked(file, spec, slot.name)

    async def _checked(self, file: FileInput, spec: MediaSpec, argument: str) -> Media:
        if file.size > spec.max_bytes:
            raise LimitExceeded(
                f"{argument}: {file.size} bytes are more than the {spec.max_bytes_text} ({spec.max_bytes} "
                "bytes) this parameter takes",
                argument=argument,
                size=file.size,
                max_bytes=spec.max_bytes,
            )
        found = sniff_format(await _head(file))
        if found not in spec.formats:
            what = f"{found} ({KIND_WORDS[FORMATS[found].kind]})" if found is not None else "no format known"
            raise UnsupportedMedia(
                f"{argument}: the bytes are {what}; this parameter takes {KIND_WORDS[spec.kind]} as "
                f"{', '.join(spec.formats)}",
                argument=argument,
                format=found,
                formats=list(spec.formats),
            )
        prober = self._prober(file, spec.kind)
        media = MEDIA_TYPES[spec.kind]._argument(file, found, prober)
        if spec.probes_first:
            media._facts = await prober()
            _check_facts(spec, media._facts, argument)
        return media

    def _prober(self, file: FileInput, kind: MediaKind) -> Prober:
        views = views_for(self.service)

        async def probe() -> dict[str, Any]:
            if file.artifact is not None and file.blob is not None:
                return await views.probe(kind, source=Source(file.artifact, file.blob))
            async with file.path() as path:
                return await views.probe(kind, path=str(path))

        return probe


def _check_facts(spec: MediaSpec, facts: Mapping[str, Any], argument: str) -> None:
    if spec.max_pixels is not None and "width" in facts and "height" in facts:
        pixels = int(facts["width"]) * int(facts["height"])
        if pixels > spec.max_pixels:
            raise LimitExceeded(
                f"{argument}: {facts['width']}x{facts['height']} is {pixels:,} pixels, more than the "
                f"{spec.max_pixels:,} this parameter takes",
                argument=argument,
                max_pixels=spec.max_pixels,
            )
    seconds = facts.get("duration_seconds")
    if spec.max_seconds is not None and isinstance(seconds, int | float) and seconds > spec.max_seconds:
        raise LimitExceeded(
            f"{argument}: {seconds:g} s is longer than the {spec.max_seconds:g} s this parameter takes",
            argument=argument,
            max_seconds=spec.max_seconds,
        )
    pages = facts.get("pages")
    if spec.max_pages is not None and isinstance(pages, int) and pages > spec.max_pages:
        raise LimitExceeded(
            f"{argument}: {pages} pages are more than the {spec.max_pages} this parameter takes",
            argument=argument,
            max_pages=spec.max_pages,
        )


__all__ = [
    "MEDIA_KEY",
    "Audio",
    "Document",
    "FactsNotRead",
    "Image",
    "Media",
    "MediaCalls",
    "MediaLimits",
    "MediaSpec",
    "Video",
    "advertised",
    "description_line",
    "input_schema",
    "media_specs",
    "result_schema",
]
