"""What an offloaded payload is called: the upstream's file name where the result or the call gives one.

- A block that names itself, an embedded resource, takes the last segment of its URI.
- Else the file the call names: the last segment of the path or URL at a top-level argument named for a file
  (``path``, ``file``, ``filename``, ``file_path``, ``uri``, ``url``; case, ``_`` and ``-`` aside) when it
  has an extension. The payload takes that name as it is when its type agrees with the extension
  (``chart.png`` for the ``image/png`` of ``read_media_file(path="/charts/chart.png")``), else the name's
  stem, the block's index and the type's extension (``report-2.png`` for a page image of ``report.pdf``).
- Else the tool's name, the first eight hex digits of the SHA-256 of the call's canonical arguments and the
  block's index (``take_screenshot-44136fa3-0.png`` for a call without arguments): calls with other
  arguments get other names.

A name depends only on the call and the block's place in the result, never on the payload's bytes, so the same
call again names its payload the same way, and the proxy reuses the artifact it stored the first time.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from blobstore.media import file_extension
from mcp_resources.reading.resources import is_textual

FILE_ARGUMENTS: Final = frozenset({"path", "file", "filename", "filepath", "uri", "url"})
"""Top-level arguments (lower case, without ``_`` and ``-``) whose value names the file a tool reads."""
SHORT_ID_DIGITS: Final = 8
_SUFFIX: Final = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def usable_name(name: str) -> bool:
    return 0 < len(name) <= 200 and all(0x20 <= ord(ch) != 0x7F for ch in name)


def uri_leaf(uri: str) -> str:
    """The last segment of a URI, the name an artifact stored from it takes when usable."""
    return uri.rstrip("/").rsplit("/", 1)[-1] if uri else ""


def _leaf(value: str) -> str:
    """The last segment of a path (POSIX or Windows) or of a URL's path, percent-decoded."""
    if "://" in value:
        value = unquote(urlsplit(value).path)
    return value.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


def file_name_of(arguments: Mapping[str, Any] | None) -> str | None:
    """The name of the file a call's arguments name, or None (see the module doc)."""
    for key, value in (arguments or {}).items():
        if not isinstance(value, str) or key.lower().replace("_", "").replace("-", "") not in FILE_ARGUMENTS:
            continue
        leaf = _leaf(value.strip())
        if usable_name(leaf) and _SUFFIX.search(leaf) and not leaf.startswith("."):
            return leaf
    return None


def _agrees(file_name: str, mime: str, *, text: bool) -> bool:
    """Whether a payload of type ``mime`` can carry ``file_name`` as it is."""
    guessed = mimetypes.guess_type(file_name)[0]
    if text:
        return guessed is None or is_textual(guessed)
    suffix = PurePosixPath(file_name).suffix.lower()
    return guessed == mime or suffix in {*mimetypes.guess_all_extensions(mime), file_extension(mime)}


def payload_name(
    *, tool: str, arguments_sha256: str, file_name: str | None, index: int, mime: str, text: bool = False
) -> str:
    """The name of the payload of block ``index`` of a result, typed ``mime`` (``text``: a text block's)."""
    ext = ".txt" if text else file_extension(mime)
    if file_name is not None:
        if _agrees(file_name, mime, text=text):
            return file_name
        return f"{PurePosixPath(file_name).stem}-{index}{ext}"
    return f"{tool}-{arguments_sha256[:SHORT_ID_DIGITS]}-{index}{ext}"


def whole_result_name(*, tool: str, arguments_sha256: str) -> str:
    """The name of a whole result stored as JSON."""
    return f"{tool}-{arguments_sha256[:SHORT_ID_DIGITS]}.json"
