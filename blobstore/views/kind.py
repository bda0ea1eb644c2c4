"""What a view kind declares, and what it is given to compute with.

A view kind is one module of :mod:`blobstore.views.kinds` holding one :class:`ViewKind`, registered once in
:data:`blobstore.views.kinds.KINDS`. It declares:

- its name and the source kinds it applies to (``pdf``, ``audio``, ``video``, ``image``: :func:`kind_of`);
- its parameters, as each protocol spells and bounds them (:class:`Argument`: the ``read_artifact``
  arguments, the HTTP path and query parameters), parsed once by the kind itself;
- its outputs: HTTP routes (:class:`Route`, answering a :class:`Payload` or a JSON listing), view resources
  (:class:`Resource`, read as :class:`Contents`) and its ``read_artifact`` answer (:class:`Answer`: its
  first line, text, binary parts with their MIME types or links to them, its last line and its facts), and
  the same in text alone for a call that asks for no media (``include_media=false``);
- how it computes them: jobs that a decoder worker runs (functions over a file path answering
  :class:`Decoded`), whose products the engine (:class:`Engine`) caches as renditions (:class:`View`) under
  the parameters the kind names.

The edges are generic over the registry: the HTTP edge mounts every route, the MCP edge builds
``read_artifact``'s arguments and the resource templates from the declarations and turns an answer's items
into content blocks. Nothing here speaks HTTP or MCP. The worker imports this module and every kind's, so
it stays light: the declarations are named tuples, and the store's models and settings are named for the type
checker only.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol

from blobstore.errors import InvalidRequest
from blobstore.views.params import MAX_EDGE, MIN_EDGE

if TYPE_CHECKING:
    from blobstore.config import Settings
    from blobstore.models import Artifact, BlobInfo, Caller

# -- sources ----------------------------------------------------------------------------------------------

PDF_TYPES: Final = frozenset({"application/pdf"})
_NOT_IMAGES: Final = frozenset({"image/svg+xml"})


def kind_of(mime_type: str) -> str | None:
    """``pdf``, ``audio``, ``video`` or ``image``: which family of views a type has, if any."""
    if mime_type in PDF_TYPES:
        return "pdf"
    if mime_type.startswith("audio/"):
        return "audio"
    if mime_type.startswith("video/"):
        return "video"
    if mime_type.startswith("image/") and mime_type not in _NOT_IMAGES:
        return "image"
    return None


class Source(NamedTuple):
    """An artifact the caller may read, with the blob its views decode."""

    artifact: Artifact
    blob: BlobInfo

    @property
    def kind(self) -> str | None:
        return kind_of(self.artifact.mime_type)


# -- what the worker makes, and what the cache keeps ------------------------------------------------------


class Decoded:
    """What a decoder job made: facts for the answer's text and zero or more binary parts (a page, a
    segment). A plain class: the worker defines it on every start, and a dataclass would bring
    ``dataclasses`` and ``inspect`` into every worker."""

    __slots__ = ("meta", "parts")

    def __init__(
        self, meta: dict[str, Any] | None = None, parts: list[tuple[dict[str, Any], bytes]] | None = None
    ) -> None:
        self.meta: dict[str, Any] = meta if meta is not None else {}
        self.parts: list[tuple[dict[str, Any], bytes]] = parts if parts is not None else []


Job = Callable[..., Decoded]
"""A job a decoder worker runs by its name (the function's ``__name__``): blocking, over a file path."""


class View(NamedTuple):
    """One cached product: its bytes, their type and the facts the answer states (page, times, size)."""

    data: bytes
    mime_type: str
    meta: dict[str, Any]


class Engine(Protocol):
    """What a kind computes with (:class:`~blobstore.views.engine.MediaViews`): the caller's sources, their
    facts, jobs run in a worker on a source's bytes, and the cache of their products."""

    settings: Settings
    """The store's settings: a kind's own limits are read here."""
    max_pages: int
    max_audio_seconds: float
    default_edge: int
    ocr: bool
    ocr_languages: tuple[str, ...]
    """The Tesseract language packs OCR reads with (``BLOBSTORE_OCR_LANGUAGES``)."""
    ocr_min_confidence: float
    """Words OCR read with a lower confidence are marked ``[?word]`` (``BLOBSTORE_OCR_MIN_CONFIDENCE``)."""

    async def open(self, caller: Caller, artifact_id: str, *, kinds: tuple[str, ...] = ()) -> Source: ...

    async def facts(self, source: Source) -> dict[str, Any]: ...

    async def speech(self, source: Source) -> list[tuple[float, float]]:
        """Where speech is in an audio or video source: spans in seconds from its start."""
        ...

    async def decode(self, source: Source, op: str, **args: Any) -> Decoded:
        """Run job ``op`` in a worker over the source's bytes."""
        ...

    async def one(
        self, source: Source, params: Mapping[str, Any], compute: Callable[[], Awaitable[View]]
    ) -> View:
        """The view cached under ``params`` of the source's content, made by ``compute`` on a miss."""
        ...

    async def many(
        self,
        source: Source,
        params: list[dict[str, Any]],
        compute: Callable[[list[int]], Awaitable[list[View]]],
    ) -> list[View]:
        """Views for each of ``params``: those in the cache from it, the rest (by their indexes) made by
        ``compute``."""
        ...


# -- parameters -------------------------------------------------------------------------------------------

REQUIRED: Final[Any] = ...
"""The default of a parameter a request must give (an HTTP path parameter)."""

Words = str | Callable[["Settings"], str]
"""A description, or one that states this server's limits (read from its settings)."""


def words(text: Words, settings: Settings) -> str:
    return text if isinstance(text, str) else text(settings)


class Argument(NamedTuple):
    """One parameter as a protocol receives it: its name there, its Python type, its default, what it means
    and its bounds (``ge``, ``gt``, ``le``, ``lt``, ``max_length``), checked by the edge before the kind
    sees the value."""

    name: str
    annotation: Any
    default: Any = None
    description: Words = ""
    bounds: Mapping[str, Any] = {}
    where: Literal["query", "path"] = "query"
    """For HTTP: a query parameter, or a part of the route's path."""


MAX_EDGE_ARGUMENT: Final = Argument(
    "max_edge",
    int | None,
    description="Image, page image or frame: the longest side in pixels (default: the long-edge budget).",
    bounds={"ge": MIN_EDGE, "le": MAX_EDGE},
)
"""``read_artifact``'s ``max_edge``, shared by the kinds that make pictures."""
MAX_EDGE_QUERY: Final = Argument(
    "max_edge", int | None, description="Longest side in pixels", bounds={"ge": MIN_EDGE, "le": MAX_EDGE}
)
"""The same over HTTP (``?max_edge=``)."""
REGION_ARGUMENT: Final = Argument(
    "region",
    str | None,
    description='Image: the crop "x,y,w,h" in the original\'s pixels.',
    bounds={"max_length": 60},
)
"""``read_artifact``'s ``region``, shared by the kinds that read a part of an image (its pixels, its text)."""


def _duration_words(settings: Settings) -> str:
    return (
        f"Audio or video: segment length in seconds (default and most {settings.view_max_audio_seconds:g}; "
        f"a transcript's: {settings.view_max_transcript_seconds:g})."
    )


START_ARGUMENT: Final = Argument(
    "start_seconds",
    float | None,
    description="Audio or video: where the segment (or transcript) starts, in seconds.",
    bounds={"ge": 0},
)
DURATION_ARGUMENT: Final = Argument(
    "duration_seconds", float | None, description=_duration_words, bounds={"gt": 0}
)
"""``read_artifact``'s window of a recording: a segment's own, which a transcript shares."""

# -- outputs ----------------------------------------------------------------------------------------------


class Payload(NamedTuple):
    """What an HTTP route answers: the bytes, their type, and headers beside the usual ones."""

    data: bytes
    media_type: str
    headers: Mapping[str, str] = {}


Listing = dict[str, Any]
"""What an HTTP route answers as JSON."""
Values = Mapping[str, Any]
"""A request's parameters by name, as the edge received and bounded them."""


class Route(NamedTuple):
    """An HTTP route of a kind, ``GET`` and ``HEAD`` under ``/v1/artifacts/{artifact_id}``.

    The edge opens the source for the caller (of the kind's source kinds), runs ``check`` (what makes the
    request name no view, such as a page past the last: before any ``304``), answers ``304`` when the
    client's ``If-None-Match`` holds the ``ETag`` of ``etag(values)`` (and of ``varies``), and otherwise
    sends ``answer``'s payload or listing, immutable."""

    path: str
    """Under the artifact, e.g. ``/pages/{page}.txt``."""
    name: str
    """The operation's id in the API document (``HEAD``'s is ``head_`` and this)."""
    summary: str
    parameters: tuple[Argument, ...]
    etag: Callable[[Values], dict[str, Any]]
    answer: Callable[[Engine, Source, Values], Awaitable[Payload | Listing]]
    media_type: str | None = None
    """The type of its ``200`` answer in the API document; None for JSON."""
    check: Callable[[Engine, Source, Values], Awaitable[None]] | None = None
    base_url: bool = False
    """Whether its answer names URLs: the request's public base URL is then among its values (``base``)."""
    sources: tuple[str, ...] | None = None
    """The source kinds this route reads, when not all of its kind's (a PDF's pages of a kind that also
    reads images)."""
    varies: Callable[[Engine], Mapping[str, Any]] | None = None
    """What its answer depends on besides the request and the source: this server's settings that change
    its bytes (OCR's language packs and confidence threshold), part of its ``ETag``."""


class Contents(NamedTuple):
    """What a view resource reads as: text or bytes, their type, and the facts for ``_meta``."""

    mime_type: str
    text: str | None
    data: bytes | None
    meta: dict[str, Any]
    source: Source


class Resource(NamedTuple):
    """A view as a resource: ``blobstore://artifacts/{artifact_id}/<path>``, its template, and its reading.

    ``path`` matches what follows the artifact id (without the query); ``values`` takes the match's groups
    and the query (``InvalidRequest`` for one the resource does not take); ``read`` reads it for a caller."""

    name: str
    title: str
    template: str
    mime_type: str
    description: Words
    ref: str
    """What a parsed URI of it is called (``page_text``, ``audio``)."""
    path: re.Pattern[str]
    values: Callable[[Mapping[str, str], str], dict[str, Any]]
    read: Callable[[Engine, Caller, str, Values], Awaitable[Contents]]


class Text(NamedTuple):
    """A text block of an answer."""

    text: str


class Inline(NamedTuple):
    """A binary part of an answer, carried inline: an image (``image/*``) or a sound (``audio/*``)."""

    data: bytes
    mime_type: str


class Link(NamedTuple):
    """A part of an answer left out of it, named by the resource that reads it."""

    uri: str
    name: str
    mime_type: str
    size: int
    description: str | None = None


Item = Text | Inline | Link


class Answer(NamedTuple):
    """A view as a ``read_artifact`` answer: its first line (what it is), its items, its last line (how to
    read the next piece) and its facts as JSON."""

    head: str
    items: list[Item]
    tail: str
    facts: dict[str, Any]


class Budget:
    """The bytes of an answer's parts that may still be carried inline (past it, a part is linked)."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    def take(self, data: bytes) -> bool:
        if len(data) > self.left:
            return False
        self.left -= len(data)
        return True


OVER_BUDGET: Final = "over this answer's inline budget: read it with resources/read"


def inline_or_link(view: View, budget: Budget, link_uri: str | None, name: str) -> Inline | Link | None:
    """A view inline while it fits the budget, else a link to ``link_uri`` (None without one)."""
    if budget.take(view.data):
        return Inline(view.data, view.mime_type)
    if link_uri is None:
        return None
    return Link(link_uri, name, view.mime_type, len(view.data), OVER_BUDGET)


# -- the kind ---------------------------------------------------------------------------------------------


class ViewKind(NamedTuple):
    """One kind of view: what it applies to, takes, offers, runs and says."""

    name: str
    sources: tuple[str, ...]
    """The source kinds it reads (:func:`kind_of`); another is ``unsupported_media``."""
    arguments: tuple[Argument, ...]
    """Its own ``read_artifact`` arguments."""
    selectors: tuple[str, ...]
    """Those of them whose presence asks for this kind (``pages``; ``start_seconds`` or
    ``duration_seconds``)."""
    noun: str
    """How an answer refusing two kinds at once names it (``ask for one view per call, not pages and
    segment``)."""
    example: str
    """Its first selector as a call gives it (``pages="1"``), for an argument of it given without one."""
    phrase: str
    """What ``read_artifact``'s description says of it (``a PDF's pages (pages, page_format)``)."""
    answer: Callable[[Engine, Caller, str, Values, Budget], Awaitable[Answer]]
    """Its ``read_artifact`` answer: the caller, the artifact id, every view argument's value, the budget."""
    text: Callable[[Engine, Caller, str, Values, Budget], Awaitable[Answer]] | None = None
    """Its answer in text alone, for a call with ``include_media=false``: no image or audio block, only text
    and links (a PDF's pages as their text, a video's scene list, a region's OCR text). None: the source's
    text view stands for it (:mod:`blobstore.views.text_views`, a recording's transcript)."""
    shared: tuple[Argument, ...] = ()
    """Arguments it takes that another kind declares too (``max_edge``; a transcript's ``start_seconds``,
    which are a segment's own): one declaration each, the same object. Those no kind has as its own follow
    every kind's own."""
    implied: bool = False
    """Read when a call's view arguments are only shared ones (``max_edge`` alone reads an image)."""
    jobs: tuple[Job, ...] = ()
    routes: tuple[Route, ...] = ()
    resources: tuple[Resource, ...] = ()


def arguments_of(kinds: Sequence[ViewKind]) -> list[Argument]:
    """The view arguments of ``read_artifact``: every kind's own, in the kinds' order, then the shared ones
    no kind has as its own."""
    own = {argument.name: argument for kind in kinds for argument in kind.arguments}
    shared = {
        argument.name: argument for kind in kinds for argument in kind.shared if argument.name not in own
    }
    return [*own.values(), *shared.values()]


def choose(kinds: Sequence[ViewKind], values: Values) -> ViewKind:
    """The one kind a call's view arguments (every one of :func:`arguments_of`, given or at its default) ask
    for: the kind whose selectors are given, else the implied kind. A kind asked for only through arguments
    that another asked kind takes too yields to it (``start_seconds`` beside ``transcript=true`` is the
    transcript's window, not a segment). Two kinds at once, or an argument of a kind not asked for, is
    ``invalid_request``."""
    defaults = {argument.name: argument.default for argument in arguments_of(kinds)}
    given = {name for name, value in values.items() if name in defaults and value != defaults[name]}

    def takes(kind: ViewKind) -> set[str]:
        return {argument.name for argument in (*kind.arguments, *kind.shared)}

    asked = [kind for kind in kinds if given & set(kind.selectors)]
    chosen = [
        kind
        for kind in asked
        if not any(other is not kind and given & set(kind.selectors) <= takes(other) for other in asked)
    ]
    if len(chosen) > 1:
        raise InvalidRequest(f"ask for one view per call, not {' and '.join(kind.noun for kind in chosen)}")
    for kind in kinds:
        for argument in kind.arguments:
            if kind not in chosen and argument.name in given and argument.name not in kind.selectors:
                first = kind.selectors[0]
                raise InvalidRequest(
                    f'{argument.name}="{values[argument.name]}" applies to {first}: add {first}, '
                    f"e.g. {kind.example}"
                )
    (kind,) = chosen or [kind for kind in kinds if kind.implied]
    return kind
