"""The text lines the model reads next to an offloaded payload, one function per content kind.

Every line names the stored artifact and ends with :func:`how_to_read`. This is the one place that words
them: a line that should point at a further tool (a view of a stored document, say) is written here.
"""

from __future__ import annotations

from dataclasses import dataclass

from blobstore.links import describe
from blobstore.models import Artifact
from blobstore.units import human_bytes
from mcp_resources.content import estimate_image_tokens
from mcp_resources.proxy.rules import HostProfile
from mcp_resources.uris import window_uri


@dataclass(frozen=True)
class ReadHint:
    """How the model is told to read an artifact: the read tool's name (None: resources/read only)."""

    read_tool: str | None
    max_window: int

    def how_to_read(self, artifact: Artifact) -> str:
        """The sentence every line next to a resource_link ends with."""
        window = self.max_window
        first = window_uri(artifact.id, 0, min(window, max(artifact.size, 1)))
        if self.read_tool:
            return (
                f"read it with the {self.read_tool} tool (uri={artifact.uri}, offset, length; at most "
                f"{window} bytes per call) or with resources/read: {first}"
            )
        return f"read it with resources/read in windows of at most {window} bytes: {first}"


def image_shown_line(artifact: Artifact, size: tuple[int, int] | None, read: str) -> str:
    shown = f"{size[0]}x{size[1]} px" if size else "downscaled"
    tokens = f", about {estimate_image_tokens(*size)} tokens" if size else ""
    return (
        f"[image shown inline at {shown}{tokens}; the full-resolution original "
        f"{describe(artifact)} is stored as {artifact.uri}; {read}]"
    )


def image_linked_line(artifact: Artifact, inline_limit: int, read: str) -> str:
    limit = human_bytes(inline_limit, byte_unit="bytes")
    return (
        f"[image {describe(artifact)} is not shown inline (over the {limit} inline limit or the "
        f"result budget); stored as {artifact.uri}; {read}]"
    )


def media_line(artifact: Artifact, *, audio: bool, source_uri: str | None, read: str) -> str:
    what = "audio" if audio else "embedded resource"
    source = f" {source_uri}" if source_uri else ""
    return f"[{what}{source}: {describe(artifact)} stored as {artifact.uri}; {read}]"


def text_cut_line(
    artifact: Artifact,
    *,
    kept: int,
    total: int,
    lines_kept: int,
    lines_total: int,
    source_uri: str | None,
    read: str,
) -> str:
    source = f" of embedded resource {source_uri}" if source_uri else ""
    return (
        f"[text{source} cut: showing the first {kept} of {total} bytes ({lines_kept} of "
        f"{lines_total} lines), {total - kept} bytes not shown; the whole text is stored as "
        f"{artifact.uri} ({artifact.mime_type}, {human_bytes(artifact.size, byte_unit='bytes')}); "
        f"{read}]"
    )


def whole_result_line(
    artifact: Artifact, *, tool: str, size: int, tokens: int, profile: HostProfile, read: str
) -> str:
    return (
        f"[the result of {tool} is too large for this host even with its payloads stored "
        f"({size} bytes, about {tokens} tokens; the {profile.name} caps are {profile.max_result_bytes} "
        f"bytes and {profile.max_result_tokens} tokens). The whole result is stored as JSON: "
        f"{describe(artifact)} at {artifact.uri}; {read}]"
    )


def dropped_payload_line(kind: str, index: int, length: int, invalid_at: int) -> str:
    return (
        f"[{kind} block {index}: its {length} characters of data are not valid base64 (from character "
        f"{invalid_at} on), so the proxy could neither store nor pass them on]"
    )
