"""The ``blobstore://`` URI scheme: artifact URIs, the window template, parsing and canonical window URIs.

``blobstore://artifacts/{artifact_id}`` names a whole artifact; ``?offset=<o>&length=<n>`` (RFC 6570
form-style query, template ``blobstore://artifacts/{artifact_id}{?offset,length}``) names one byte window of
it. Window URIs this module emits are canonical (both parameters, always in that order) so each window has
exactly one cache key; the parser accepts either order and either parameter alone. The URIs carry no secret
and no content hash, since they travel in ``Mcp-Name`` headers and logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from blobstore.errors import InvalidRange, InvalidRequest
from blobstore.links import ARTIFACT_META_KEY, ARTIFACT_URI_TEMPLATE, META_PREFIX, WINDOW_URI_TEMPLATE
from blobstore.models import ARTIFACT_URI_PREFIX, artifact_uri
from blobstore.ranges import parse_window_params

SCHEME: Final = "blobstore"
MAX_URI_LENGTH: Final = 2048
_WINDOW_PARAMS: Final = ("offset", "length")


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    """A parsed store URI: the artifact id and the raw window parameters (None when absent)."""

    artifact_id: str
    offset: int | None = None
    length: int | None = None
    has_window: bool = False


def is_store_uri(uri: str) -> bool:
    """True for URIs in this store's scheme (others belong to whatever server embeds the store)."""
    return uri.startswith(f"{SCHEME}:")


def window_uri(artifact_id: str, offset: int, length: int) -> str:
    """The canonical URI of one window: both parameters, offset first."""
    return f"{artifact_uri(artifact_id)}?offset={offset}&length={length}"


def parse_store_uri(uri: str) -> ArtifactRef | None:
    """Parse a store URI; None when it does not name an artifact (the caller answers "Resource not found").

    Window parameters that are present but malformed raise :class:`InvalidRange`; a parameter other than
    ``offset``/``length`` or a repeated one is :class:`InvalidRequest`, so two spellings never name one
    window.
    """
    if len(uri) > MAX_URI_LENGTH or not uri.startswith(ARTIFACT_URI_PREFIX) or "#" in uri:
        return None
    rest = uri[len(ARTIFACT_URI_PREFIX) :]
    path, has_query, query = rest.partition("?")
    # Ids are URL-safe base64 with a prefix, so anything needing percent-decoding or a slash is not an id.
    if not path or "/" in path or "%" in path:
        return None
    values: dict[str, str] = {}
    if query:
        for item in query.split("&"):
            key, has_value, value = item.partition("=")
            key = unquote(key)
            if key not in _WINDOW_PARAMS:
                raise InvalidRequest("only the offset and length query parameters are accepted")
            if key in values:
                raise InvalidRequest(f"{key} is given more than once")
            if not has_value:
                raise InvalidRange(f"{key} needs a value")
            values[key] = unquote(value)
    offset, length = parse_window_params(values.get("offset"), values.get("length"))
    return ArtifactRef(path, offset, length, has_window=bool(has_query and values))


WINDOW_META_KEY: Final = f"{META_PREFIX}/window"

__all__ = [
    "ARTIFACT_META_KEY",
    "ARTIFACT_URI_TEMPLATE",
    "MAX_URI_LENGTH",
    "META_PREFIX",
    "SCHEME",
    "WINDOW_META_KEY",
    "WINDOW_URI_TEMPLATE",
    "ArtifactRef",
    "artifact_uri",
    "is_store_uri",
    "parse_store_uri",
    "window_uri",
]
