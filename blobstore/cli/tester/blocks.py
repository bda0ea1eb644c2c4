"""What one content block of a result holds, in one line a person reads, as JSON, and as a saved file.

``Content 0 (Text): 214 chars``; ``Content 1 (Image): image/png, 12,345 bytes, 800`` :data:`TIMES` ``600 px,
~638 tokens`` (the store's estimate, :func:`blobstore.tokens.estimate_image_tokens`); ``Content 2
(Audio): audio/wav, 3.2 s, 16 kHz mono``; ``Content 3 (ResourceLink): blobstore://artifacts/a_… chart.png,
image/png, 20.0 MiB``; ``Content 4 (Resource): …``. Binary payloads are decoded strictly: a block whose base64
is not valid says so and is not saved. Files are named ``STEM_INDEX.ext`` and never replace an existing file
unless asked to.
"""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import pybase64

from blobstore.links import ARTIFACT_META_KEY
from blobstore.media import PROBE_BYTES, file_extension, probe
from blobstore.tokens import estimate_image_tokens
from blobstore.units import human_bytes

TIMES: Final = "\u00d7"
"""The sign between an image's width and height (U+00D7 MULTIPLICATION SIGN)."""
KIND_NAMES: Final = {
    "text": "Text",
    "image": "Image",
    "audio": "Audio",
    "resource_link": "ResourceLink",
    "resource": "Resource",
    "blob": "Blob",
}


def kind_name(kind: str) -> str:
    return KIND_NAMES.get(kind, kind or "?")


def count(n: int, unit: str) -> str:
    return f"{n:,} {unit}"


_BASE64_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def decode_base64(data: str) -> tuple[bytes | None, int]:
    """The bytes of strict base64 (standard alphabet, padded), or None and the first character that is not
    base64 (the length when every character is, but the padding or length is wrong)."""
    try:
        return pybase64.b64decode(data, validate=True), -1
    except (binascii.Error, ValueError):
        return None, next((i for i, char in enumerate(data) if char not in _BASE64_CHARS), len(data))


ELIDE_CHARS: Final = 256


def elided(value: Any) -> Any:
    """``value`` with every base64 string of :data:`ELIDE_CHARS` characters or more replaced by a short note
    of its size: how ``structuredContent`` is printed, so that a payload there is no wall of base64."""
    if isinstance(value, str) and len(value) >= ELIDE_CHARS:
        raw, _ = decode_base64(value)
        return value if raw is None else f"<base64: {count(len(value), 'chars')}, {count(len(raw), 'bytes')}>"
    if isinstance(value, dict):
        return {key: elided(item) for key, item in value.items()}
    if isinstance(value, list):
        return [elided(item) for item in value]
    return value


def structured_lines(value: Any) -> list[str]:
    return ["structuredContent:", json.dumps(elided(value), indent=2, ensure_ascii=False)]


def audio_facts_words(facts: Mapping[str, Any]) -> list[str]:
    """``3.2 s``, ``16 kHz``, ``mono``: an audio payload's facts as the issue's line shows them."""
    words: list[str] = []
    duration = facts.get("duration_seconds")
    if isinstance(duration, int | float):
        words.append(f"{duration:.1f} s")
    rate, channels = facts.get("sample_rate"), facts.get("channels")
    sound = []
    if isinstance(rate, int) and rate > 0:
        sound.append(f"{rate / 1000:g} kHz")
    if isinstance(channels, int) and channels > 0:
        sound.append({1: "mono", 2: "stereo"}.get(channels, f"{channels} channels"))
    if sound:
        words.append(" ".join(sound))
    return words


def media_facts(mime_type: str, data: bytes) -> tuple[list[str], dict[str, Any]]:
    """The words and JSON facts of a binary payload: pixel size and tokens of an image, the duration, rate and
    channels of WAV audio (what :func:`blobstore.media.probe` finds in its head)."""
    facts = probe(mime_type, data[:PROBE_BYTES])
    width, height = facts.get("width"), facts.get("height")
    if isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0:
        tokens = estimate_image_tokens(width, height)
        return [f"{width}{TIMES}{height} px", f"~{tokens:,} token{'' if tokens == 1 else 's'}"], {
            "width": width,
            "height": height,
            "tokens": tokens,
        }
    words = audio_facts_words(facts)
    found = {
        key: facts[key]
        for key in ("duration_seconds", "sample_rate", "channels")
        if facts.get(key) is not None
    }
    return words, found


@dataclass
class Block:
    """One content block (or resource contents item) described."""

    index: int
    kind: str
    summary: str
    facts: dict[str, Any]
    text: str | None = None
    payload: bytes | None = None
    mime_type: str | None = None
    problem: str | None = None
    notes: list[str] = field(default_factory=list)
    """Lines said under the block line (where it was saved, how a link was followed)."""
    label: str = "Content"

    @property
    def name(self) -> str:
        return f"{self.label} {self.index} ({kind_name(self.kind)})"

    def line(self) -> str:
        return f"{self.name}: {self.summary}"

    def lines(self) -> list[str]:
        shown = [self.line(), *(f"  {note}" for note in self.notes)]
        if self.text is not None:
            shown.append(self.text)
        return shown

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "type": self.kind, **self.facts}


def _binary(index: int, kind: str, data: str, mime_type: str, lead: list[str]) -> Block:
    raw, invalid_at = decode_base64(data)
    facts: dict[str, Any] = {"mimeType": mime_type}
    if raw is None:
        problem = (
            f"its {count(len(data), 'characters')} of data are not valid base64 "
            f"(from character {invalid_at} on)"
        )
        facts["problem"] = problem
        return Block(
            index, kind, ", ".join([*lead, mime_type, problem]), facts, mime_type=mime_type, problem=problem
        )
    words, found = media_facts(mime_type, raw)
    if kind == "image" and not found:
        words = ["does not decode as an image"]
    facts.update(bytes=len(raw), sha256=hashlib.sha256(raw).hexdigest(), **found)
    shown = [*lead, mime_type]
    if kind != "audio" or not words:
        shown.append(count(len(raw), "bytes"))
    return Block(index, kind, ", ".join([*shown, *words]), facts, payload=raw, mime_type=mime_type)


def describe_block(index: int, block: Mapping[str, Any], label: str = "Content") -> Block:
    """A content block as it came on the wire (camelCase keys)."""
    kind = str(block.get("type") or "")
    described: Block
    if kind == "text":
        text = str(block.get("text") or "")
        described = Block(
            index, kind, count(len(text), "chars"), {"chars": len(text), "text": text}, text=text
        )
    elif kind in ("image", "audio"):
        mime = str(block.get("mimeType") or "application/octet-stream")
        described = _binary(index, kind, str(block.get("data") or ""), mime, [])
    elif kind == "resource_link":
        described = describe_link(index, block)
    elif kind == "resource":
        resource = block.get("resource")
        described = describe_contents(index, resource if isinstance(resource, dict) else {}, kind="resource")
    else:
        described = Block(index, kind, "a block of a type this tester does not know", {"block": dict(block)})
    described.label = label
    return described


def describe_link(index: int, block: Mapping[str, Any]) -> Block:
    uri, name = str(block.get("uri") or ""), block.get("name")
    head = f"{uri} {name}" if isinstance(name, str) and name else uri
    words = [head]
    facts: dict[str, Any] = {"uri": uri, "name": name}
    mime, size = block.get("mimeType"), block.get("size")
    if isinstance(mime, str) and mime:
        words.append(mime)
        facts["mimeType"] = mime
    if isinstance(size, int):
        words.append(human_bytes(size))
        facts["size"] = size
    meta = ((block.get("_meta") or {}).get(ARTIFACT_META_KEY)) or {}
    if isinstance(meta.get("sha256"), str):
        facts["sha256"] = meta["sha256"]
    return Block(
        index, "resource_link", ", ".join(words), facts, mime_type=mime if isinstance(mime, str) else None
    )


def describe_contents(
    index: int, item: Mapping[str, Any], *, kind: str | None = "resource", label: str = "Content"
) -> Block:
    """An embedded resource's contents (``kind`` ``resource``), or one item of a ``resources/read`` answer
    (``kind`` None: ``text`` or ``blob`` as it holds)."""
    uri = str(item.get("uri") or "")
    mime = str(item.get("mimeType") or "")
    lead = [uri] if uri else []
    if isinstance(item.get("text"), str):
        text = item["text"]
        words = [*lead, *([mime] if mime else []), count(len(text), "chars")]
        facts = {"uri": uri, "mimeType": mime or None, "chars": len(text), "text": text}
        block = Block(index, kind or "text", ", ".join(words), facts, text=text, mime_type=mime or None)
    else:
        blob = str(item.get("blob") or "")
        block = _binary(index, kind or "blob", blob, mime or "application/octet-stream", lead)
        block.facts["uri"] = uri
    block.label = label
    return block


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text).strip("._")


def stem_of(uri: str) -> str:
    """A file name stem from a URI's last path segment and its query: ``a_Xb3…`` for an artifact URI,
    ``a_Xb3…_offset_0_length_65536`` for a window of it."""
    path, _, query = uri.partition("?")
    leaf = _safe(path.rstrip("/").rsplit("/", 1)[-1])[:80] or "resource"
    return f"{leaf}_{_safe(query)[:60]}" if _safe(query) else leaf


def file_name(stem: str, index: int, mime_type: str | None) -> str:
    return f"{stem}_{index}{file_extension(mime_type or 'application/octet-stream')}"


class FileExists(Exception):
    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} exists (--force replaces it)")
        self.path = path


@contextlib.contextmanager
def new_file(path: Path, *, force: bool) -> Iterator[IO[bytes]]:
    """A file written beside ``path`` and put there when the block ends without an error: a new name is
    linked (never replacing a file that appeared meanwhile), an existing one replaced only with ``force``.
    It gets the permissions the umask gives a new file, as a file a shell command writes does."""
    if path.exists() and not force:
        raise FileExists(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{secrets.token_hex(6)}.part")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
        if force:
            os.replace(partial, path)
        else:
            try:
                os.link(partial, path)
            except FileExistsError:
                raise FileExists(path) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)


def save(block: Block, directory: Path, stem: str, *, force: bool) -> Path | None:
    """Write a block's payload to ``directory/STEM_INDEX.ext``; the path, or None when it has no payload. An
    existing file stays unless ``force``: the block then says why it was not saved."""
    if block.payload is None:
        return None
    path = directory / file_name(stem, block.index, block.mime_type)
    try:
        with new_file(path, force=force) as out:
            out.write(block.payload)
    except FileExists as exc:
        block.problem = f"not saved: {exc}"
        block.notes.append(block.problem)
        block.facts["problem"] = block.problem
        return None
    block.notes.append(f"saved {shown_path(path)}")
    block.facts["saved"] = str(path)
    return path


def shown_path(path: Path) -> str:
    """A path as a person typed it: relative to the working directory when it is inside it."""
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    return str(path)
