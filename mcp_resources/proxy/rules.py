"""Offload rules: host profiles, per-result budgets and per-tool overrides from a TOML file.

A result's budget is counted in bytes (its compact JSON, UTF-8) and in estimated tokens: every inline image
costs :func:`~mcp_resources.results.content.estimate_image_tokens` of its pixel size, everything else one
token per :data:`BYTES_PER_TOKEN` bytes of its JSON. The host profile gives the caps; the per-tool file
(``--offload-config``) changes thresholds and marks tools never or always offloaded.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

from blobstore.config import Settings
from mcp_resources.proxy.argument_config import ArgumentModes, checked, directory_of, tool_modes
from mcp_resources.tools.binary_schema import Form

MiB: Final = 1024 * 1024
BYTES_PER_TOKEN: Final = 4
"""Text (and any base64 that is not an inline image) is estimated at one token per four bytes."""
DEFAULT_TEXT_THRESHOLD: Final = 64 * 1024
DEFAULT_TEXT_PREVIEW: Final = 4 * 1024
MIN_STREAMED: Final = MiB
"""Strings shorter than this are held in memory like the rest of a message."""
MANY_IMAGES: Final = 20
"""Above this many images in one result, the profile's smaller edge limit applies."""

OffloadMode = Literal["auto", "never", "always"]
Takes = Literal["yes", "no", "not known"]
"""Whether a host's model takes a modality: as its documentation or its maintainers say, or not known."""
MODALITIES: Final = ("image", "audio")
"""The modalities of MCP content blocks besides text."""


class OffloadConfigError(Exception):
    """A bad ``--offload-config`` file; ``str(exc)`` is one line naming the file, key and problem."""


@dataclass(frozen=True)
class HostProfile:
    """The caps of a known host (their sources are in docs/proxy.md, "Host profiles")."""

    name: str
    max_result_bytes: int
    """Compact JSON bytes of the whole result object."""
    max_result_tokens: int
    max_image_edge: int
    max_image_edge_many: int = 2000
    """Edge limit when a result carries more than :data:`MANY_IMAGES` images."""
    max_image_bytes: int | None = None
    """Base64 bytes of one image the host's model takes; no inline payload is left larger."""
    max_text_chars: int | None = None
    """A text result longer than this the host writes to a file and shows a preview of; texts past it are
    offloaded by the proxy instead."""
    image: Takes = "not known"
    """Whether the host's model takes ``image`` blocks (sources in docs/proxy.md, "Host profiles")."""
    audio: Takes = "not known"
    """Whether the host's model takes ``audio`` blocks."""

    def takes(self, modality: str) -> bool:
        """Whether a block of ``modality`` is worth sending: yes, and also where it is not known (MCP lets a
        host take it, and the proxy changes nothing it cannot tell is lost)."""
        return getattr(self, modality, "not known") != "no" if modality in MODALITIES else True

    def modalities_line(self) -> str:
        """``images: yes, audio: no``."""
        return f"images: {self.image}, audio: {self.audio}"

    def image_edge_limit(self, images: int) -> int:
        return self.max_image_edge_many if images > MANY_IMAGES else self.max_image_edge

    def inline_limit(self, configured: int) -> int:
        """The inline limit under this host: the configured one, or less where the host's image cap is."""
        if self.max_image_bytes is None:
            return configured
        return min(configured, self.max_image_bytes * 3 // 4)

    def text_threshold(self, configured: int) -> int:
        return configured if self.max_text_chars is None else min(configured, self.max_text_chars)

    def window_max(self) -> int:
        """The largest window whose read answer stays within this host's caps: its base64 (4/3 of the
        bytes) and the answer around it within the result bytes and tokens and, where the host writes long
        results to a file, within what the read tool declares under :data:`MAX_RESULT_SIZE_CHARS_KEY`. A
        multiple of 4 KiB, so windows fall on the store's block edges."""
        chars = min(self.max_result_bytes, self.max_result_tokens * BYTES_PER_TOKEN)
        if self.max_text_chars is not None:
            chars = min(chars, READ_TOOL_RESULT_CHARS)
        fits = (chars - WINDOW_ANSWER_OVERHEAD) * 3 // 4
        return max(WINDOW_STEP, fits // WINDOW_STEP * WINDOW_STEP)


CLAUDE_IMAGE_BYTES: Final = 5 * MiB
"""Claude refuses an image whose base64 is over 5 MB, and one over 8,000 px (2,000 px past 20 images)."""
CLAUDE_CODE_TEXT_CHARS: Final = 50_000
"""Claude Code writes a tool result over 50,000 characters to a file unless the tool raises the threshold."""
MAX_RESULT_SIZE_CHARS_KEY: Final = "anthropic/maxResultSizeChars"
READ_TOOL_RESULT_CHARS: Final = 500_000
"""What the read tool declares under :data:`MAX_RESULT_SIZE_CHARS_KEY`: the most Claude Code honours."""
WINDOW_ANSWER_OVERHEAD: Final = 8 * 1024
"""What a window's answer holds beside its base64: the block's fields, the text line, the next URI."""
WINDOW_STEP: Final = 4 * 1024


def _strictest(name: str, *, image: Takes = "not known", audio: Takes = "not known") -> HostProfile:
    """The strictest caps known (Claude Code's), for it and for hosts that document no caps of their own."""
    return HostProfile(
        name,
        MiB,
        25_000,
        8000,
        max_image_bytes=CLAUDE_IMAGE_BYTES,
        max_text_chars=CLAUDE_CODE_TEXT_CHARS,
        image=image,
        audio=audio,
    )


HOST_PROFILES: Final[Mapping[str, HostProfile]] = {
    # "result exceeds maximum length of 1048576"; no token cap of its own, so the byte cap sets the tokens.
    # Claude takes images, and no audio: its API has no audio input.
    "claude-desktop": HostProfile(
        "claude-desktop",
        MiB,
        MiB // BYTES_PER_TOKEN,
        8000,
        max_image_bytes=CLAUDE_IMAGE_BYTES,
        image="yes",
        audio="no",
    ),
    # Warns above 10,000 tokens, refuses over MAX_MCP_OUTPUT_TOKENS (25,000 by default).
    "claude-code": _strictest("claude-code", image="yes", audio="no"),
    "vscode-copilot": _strictest("vscode-copilot", image="yes"),
    "cursor": _strictest("cursor", image="yes"),
    "gemini-cli": _strictest("gemini-cli", image="yes", audio="yes"),
    # Unknown host: the strictest known caps, and every modality passed as it comes.
    "generic": _strictest("generic"),
}
DEFAULT_PROFILE: Final = "generic"

CLIENT_NAMES: Final[Mapping[str, str]] = {
    # clientInfo.name at initialize -> profile (sources in docs/proxy.md, "Which host is it").
    "claude-code": "claude-code",
    "claude-ai": "claude-desktop",
    "Visual Studio Code": "vscode-copilot",
    "Visual Studio Code - Insiders": "vscode-copilot",
    "Visual-Studio-Code": "vscode-copilot",
    "cursor-vscode": "cursor",
    "gemini-cli-mcp-client": "gemini-cli",
}


def profile_for_client(client_info: Any) -> tuple[str, str]:
    """The profile for the client that named itself ``client_info`` (``initialize``'s ``clientInfo``), and
    why: ``("claude-code", "the client's clientInfo.name is 'claude-code'")``; ``generic`` for a client
    that names no known host."""
    name = client_info.get("name") if isinstance(client_info, dict) else None
    if not isinstance(name, str) or not name:
        return DEFAULT_PROFILE, "the client sent no clientInfo.name"
    shown = name[:80]
    found = CLIENT_NAMES.get(name)
    if found is None:
        return DEFAULT_PROFILE, f"the client's clientInfo.name {shown!r} is no host this proxy knows"
    return found, f"the client's clientInfo.name is {shown!r}"


_THRESHOLD_KEYS: Final = ("inline_limit", "image_long_edge", "text_threshold", "text_preview")


@dataclass(frozen=True)
class ToolRules:
    """The thresholds for one tool, and whether it is never, always or by size (``auto``) offloaded.

    ``always`` stores every image, audio and embedded blob whatever its size (images still get their
    downscaled copy inline when it fits) and every text longer than its preview.
    """

    inline_limit: int
    image_long_edge: int
    text_threshold: int
    text_preview: int
    mode: OffloadMode = "auto"


@dataclass(frozen=True)
class OffloadRules:
    profile: HostProfile
    inline_limit: int
    image_long_edge: int
    text_threshold: int
    text_preview: int
    read_tool_hint: bool
    tools: Mapping[str, ToolRules] = field(default_factory=dict)
    arguments: ArgumentModes = field(default_factory=ArgumentModes)
    """The arguments that take a file path or a URL in place of an artifact URI."""

    def streaming_threshold(self) -> int:
        """Characters from which a payload string is streamed into the store as it arrives: past what any
        tool's rules keep inline (base64 of the inline limit, the text threshold), and never below
        :data:`MIN_STREAMED`, so that only payloads the rules store are streamed."""
        every = [self.for_tool(""), *self.tools.values()]
        base64_chars = max(4 * (rules.inline_limit // 3 + 1) for rules in every)
        return max(MIN_STREAMED, base64_chars, max(rules.text_threshold for rules in every))

    def for_tool(self, tool: str) -> ToolRules:
        found = self.tools.get(tool)
        if found is not None:
            return found
        return ToolRules(
            inline_limit=self.inline_limit,
            image_long_edge=self.image_long_edge,
            text_threshold=self.text_threshold,
            text_preview=self.text_preview,
        )


def _fail(path: Path, key: str, problem: str) -> OffloadConfigError:
    return OffloadConfigError(f"{path}: {key}: {problem}")


def _positive(path: Path, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _fail(path, key, f"must be a positive integer, not {value!r}")
    return value


def _names(path: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise _fail(path, key, "must be a list of tool names")
    return list(value)


def _thresholds(path: Path, prefix: str, table: Mapping[str, Any], base: ToolRules) -> ToolRules:
    values = {key: _positive(path, prefix + key, table[key]) for key in _THRESHOLD_KEYS if key in table}
    return ToolRules(
        inline_limit=values.get("inline_limit", base.inline_limit),
        image_long_edge=values.get("image_long_edge", base.image_long_edge),
        text_threshold=values.get("text_threshold", base.text_threshold),
        text_preview=values.get("text_preview", base.text_preview),
        mode=base.mode,
    )


def _check(path: Path, prefix: str, values: ToolRules) -> None:
    if values.text_preview >= values.text_threshold:
        raise _fail(path, prefix + "text_preview", "must be smaller than text_threshold")


def load_rules(
    settings: Settings, *, profile: str, config_path: Path | None, read_tool_hint: bool
) -> OffloadRules:
    """Build the rules from the settings, a host profile name and an optional TOML file.

    File keys (all optional): ``inline_limit``, ``image_long_edge``, ``text_threshold``, ``text_preview``
    (defaults for every tool), ``never_offload`` and ``always_offload`` (lists of tool names),
    ``[tools.<name>]`` tables with the four thresholds and ``offload = "auto" | "never" | "always"``, their
    ``[tools.<name>.arguments]`` (argument = ``"path"`` | ``"url"``) and ``[arguments] directory``
    (:mod:`~mcp_resources.proxy.argument_config`).
    """
    host = HOST_PROFILES.get(profile)
    if host is None:
        raise OffloadConfigError(
            f"--host-profile: unknown profile {profile!r}; choose one of {', '.join(HOST_PROFILES)}"
        )
    base = ToolRules(
        inline_limit=host.inline_limit(settings.inline_limit),
        image_long_edge=settings.image_long_edge,
        text_threshold=host.text_threshold(DEFAULT_TEXT_THRESHOLD),
        text_preview=DEFAULT_TEXT_PREVIEW,
    )
    tools: dict[str, ToolRules] = {}
    arguments = ArgumentModes()
    if config_path is not None:
        base, tools, arguments = _load_file(config_path, base)
        arguments = checked(arguments, settings, lambda key, problem: _fail(config_path, key, problem))
    return OffloadRules(
        profile=host,
        inline_limit=base.inline_limit,
        image_long_edge=base.image_long_edge,
        text_threshold=base.text_threshold,
        text_preview=base.text_preview,
        read_tool_hint=read_tool_hint,
        tools=tools,
        arguments=arguments,
    )


def _load_file(path: Path, base: ToolRules) -> tuple[ToolRules, dict[str, ToolRules], ArgumentModes]:
    try:
        with path.open("rb") as handle:
            doc = tomllib.load(handle)
    except OSError as exc:
        raise OffloadConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise OffloadConfigError(f"{path}: not valid TOML: {exc}") from None
    known = {*_THRESHOLD_KEYS, "never_offload", "always_offload", "tools", "arguments"}
    for key in doc:
        if key not in known:
            raise _fail(path, key, "unknown key")
    base = _thresholds(path, "", doc, base)
    _check(path, "", base)
    modes: dict[str, OffloadMode] = {}
    for key, mode in (("never_offload", "never"), ("always_offload", "always")):
        for name in _names(path, key, doc.get(key, [])):
            if name in modes and modes[name] != mode:
                raise _fail(path, key, f"tool {name!r} is in both never_offload and always_offload")
            modes[name] = mode  # type: ignore[assignment]
    tables = doc.get("tools", {})
    if not isinstance(tables, dict):
        raise _fail(path, "tools", "must be a table of [tools.<name>] tables")

    def fail(key: str, problem: str) -> OffloadConfigError:
        return _fail(path, key, problem)

    directory = directory_of(doc.get("arguments", {}), fail)
    tools: dict[str, ToolRules] = {}
    forms: dict[str, dict[str, Form]] = {}
    for name, table in tables.items():
        prefix = f"tools.{name}."
        if not isinstance(table, dict):
            raise _fail(path, f"tools.{name}", "must be a table")
        for key in table:
            if key not in {*_THRESHOLD_KEYS, "offload", "arguments"}:
                raise _fail(path, prefix + key, "unknown key")
        if "arguments" in table:
            forms[name] = tool_modes(name, table["arguments"], fail)
        rules = _thresholds(path, prefix, table, base)
        if "offload" in table:
            mode = table["offload"]
            if mode not in ("auto", "never", "always"):
                raise _fail(path, prefix + "offload", f"must be auto, never or always, not {mode!r}")
            if name in modes and modes[name] != mode:
                raise _fail(path, prefix + "offload", f"contradicts the {modes[name]}_offload list")
            rules = replace(rules, mode=mode)
        elif name in modes:
            rules = replace(rules, mode=modes[name])
        _check(path, prefix, rules)
        tools[name] = rules
    for name, mode in modes.items():
        tools.setdefault(name, replace(base, mode=mode))
    return base, tools, ArgumentModes(directory=directory, tools=forms)
