"""The text lines the model reads next to an offloaded payload, one function per content kind.

Every line names the stored artifact and ends with :func:`how_to_read`. This is the one place that words
them: a line that should point at a further tool (a view of a stored document, say) is written here.
"""

from __future__ import annotations

from dataclasses import dataclass

from blobstore.links import describe, view_hint
from blobstore.models import Artifact
from blobstore.tokens import estimate_image_tokens
from blobstore.units import human_bytes
from mcp_resources.proxy.rules import HostProfile
from mcp_resources.reading.views import first_view_uri
from mcp_resources.results.content import NotShown, read_in_windows, read_with_tool


@dataclass(frozen=True)
class ReadHint:
    """How the model is told to read an artifact: the read tool's name (None: resources/read only), the
    window maximum, and the longest audio segment a view returns."""

    read_tool: str | None
    max_window: int
    max_audio_seconds: float = 30.0

    def how_to_read(self, artifact: Artifact) -> str:
        """The sentence every line next to a resource_link ends with: the media view to read first (a PDF's
        page, an audio segment), then the byte windows."""
        window = self.max_window
        if self.read_tool:
            return read_with_tool(
                artifact, tool=self.read_tool, max_window=window, max_audio_seconds=self.max_audio_seconds
            )
        view = self.first_view(artifact)
        windows = read_in_windows(artifact, window)
        return f"{view}, or {windows}" if view else windows

    def first_view(self, artifact: Artifact) -> str | None:
        """The media view to read first, named by the tool the host is offered or, without one, as the view
        resource; None for an artifact without views."""
        if self.read_tool:
            return view_hint(artifact, tool=self.read_tool, max_audio_seconds=self.max_audio_seconds)
        uri = first_view_uri(artifact, self.max_audio_seconds)
        if uri is None:
            return None
        if (artifact.media or {}).get("pages"):
            return f"read page 1 with resources/read: {uri}"
        duration = float(artifact.media["duration_seconds"])
        return f"hear the first {min(self.max_audio_seconds, duration):g} s with resources/read: {uri}"

    def link_description(self, artifact: Artifact) -> str:
        """A ``resource_link``'s description: the facts, then the first view as this host reads it."""
        view = self.first_view(artifact)
        return f"{describe(artifact)}; {view}" if view else describe(artifact)


def image_shown_line(artifact: Artifact, size: tuple[int, int] | None, read: str) -> str:
    shown = f"{size[0]}x{size[1]} px" if size else "downscaled"
    tokens = f", about {estimate_image_tokens(*size)} tokens" if size else ""
    return (
        f"[image shown inline at {shown}{tokens}; the full-resolution original "
        f"{describe(artifact)} is stored as {artifact.uri}; {read}]"
    )


def image_linked_line(artifact: Artifact, why: NotShown, profile: HostProfile, read: str) -> str:
    return (
        f"[image {describe(artifact)} is not shown inline ({not_shown_reason(artifact, why, profile)}); "
        f"stored as {artifact.uri}; {read}]"
    )


def not_shown_reason(artifact: Artifact, why: NotShown, profile: HostProfile) -> str:
    """Why an image is only linked, as it happened."""
    limit = human_bytes(why.limit, byte_unit="bytes")
    if why.cause == "type":
        return f"{artifact.mime_type} is not an image type hosts show inline"
    if why.cause == "source_size":
        return f"it is over the {limit} the proxy decodes to downscale"
    if why.cause == "inline_limit":
        return f"it is over the {limit} inline limit"
    if why.cause == "downscaled":
        return f"even downscaled to {why.edge} px it is over the {limit} inline limit"
    if why.cause == "pixels":
        count = f"{why.pixels} pixels" if why.pixels else "more pixels than that"
        return f"it is not decoded: it has {count}, over the {why.limit} the proxy decodes"
    if why.cause == "undecodable":
        return f"it could not be decoded: {why.reason}"
    return (
        f"the result is over the {profile.name} host's caps of {profile.max_result_bytes} bytes and "
        f"{profile.max_result_tokens} tokens even with the image at its smallest"
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
        f"{lines_total} lines), {total - kept} bytes not shown; the whole text, {describe(artifact)}, is "
        f"stored as {artifact.uri}; {read}]"
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


def profile_line(profile: HostProfile, reason: str) -> str:
    """Which host profile the proxy applies and why, with what it means for the results."""
    lost = [name for name in ("image", "audio") if not profile.takes(name)]
    instead = (
        f"; {' and '.join(lost)} blocks come as their text view (OCR text, transcript) with a link to the "
        "original, since this host's model does not take them"
        if lost
        else ""
    )
    return (
        f"[blobstore proxy: host profile {profile.name}, because {reason}. Results fit "
        f"{profile.max_result_bytes} bytes and {profile.max_result_tokens} tokens; "
        f"{profile.modalities_line()}{instead}.]"
    )


def text_view_line(
    artifact: Artifact,
    *,
    modality: str,
    what: str,
    head: str,
    cut: int | None,
    profile: HostProfile,
    read: str,
) -> str:
    """The line before the text that stands for an image or a recording the host's model cannot take."""
    shown = f"; the first {cut} characters follow" if cut is not None else ""
    return (
        f"[{modality} {describe(artifact)}, stored as {artifact.uri}: the {profile.name} host's model takes "
        f"no {modality}, so its {what} follows instead ({head}{shown}); {read}]"
    )


def no_text_view_line(artifact: Artifact, *, modality: str, why: str, profile: HostProfile, read: str) -> str:
    return (
        f"[{modality} {describe(artifact)}, stored as {artifact.uri}: the {profile.name} host's model takes "
        f"no {modality}, and no text view of it could be made ({why}); {read}]"
    )
