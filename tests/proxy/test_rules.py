"""Offload rules: host profiles, defaults from the settings, and the per-tool TOML file."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from blobstore.cli.proxy import proxy_command
from blobstore.config import Settings
from mcp_resources.proxy.rules import (
    BYTES_PER_TOKEN,
    CLAUDE_CODE_TEXT_CHARS,
    CLAUDE_IMAGE_BYTES,
    DEFAULT_TEXT_PREVIEW,
    DEFAULT_TEXT_THRESHOLD,
    HOST_PROFILES,
    MANY_IMAGES,
    WINDOW_ANSWER_OVERHEAD,
    OffloadConfigError,
    load_rules,
)
from mcp_resources.tools.binary_schema import Form


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "offload.toml"
    path.write_text(text)
    return path


def test_profiles_carry_the_known_host_caps() -> None:
    assert set(HOST_PROFILES) == {
        "claude-desktop",
        "claude-code",
        "vscode-copilot",
        "cursor",
        "gemini-cli",
        "generic",
    }
    assert HOST_PROFILES["claude-desktop"].max_result_bytes == 1_048_576
    assert HOST_PROFILES["claude-code"].max_result_tokens == 25_000
    generic = HOST_PROFILES["generic"]
    assert generic.max_result_bytes == 1_048_576
    assert generic.max_result_tokens == 25_000
    for profile in HOST_PROFILES.values():
        assert profile.image_edge_limit(1) == 8000
        assert profile.image_edge_limit(MANY_IMAGES) == 8000
        assert profile.image_edge_limit(MANY_IMAGES + 1) == 2000


def test_every_profile_can_be_chosen_on_the_command_line() -> None:
    option = next(p for p in proxy_command.params if p.name == "host_profile")
    assert isinstance(option.type, click.Choice)
    assert set(option.type.choices) == set(HOST_PROFILES)


def test_no_inline_payload_is_left_over_claudes_image_cap_however_high_the_setting() -> None:
    settings = Settings(inline_limit=16 * 1024 * 1024)
    for name in HOST_PROFILES:
        rules = load_rules(settings, profile=name, config_path=None, read_tool_hint=True)
        # The cap counts base64: the decoded bytes of a 5 MiB base64 image.
        assert rules.inline_limit == CLAUDE_IMAGE_BYTES * 3 // 4
    low = Settings(inline_limit=1000)
    assert load_rules(low, profile="claude-code", config_path=None, read_tool_hint=True).inline_limit == 1000


def test_texts_claude_code_would_write_to_a_file_are_offloaded_first() -> None:
    code = load_rules(Settings(), profile="claude-code", config_path=None, read_tool_hint=True)
    assert code.text_threshold == CLAUDE_CODE_TEXT_CHARS < DEFAULT_TEXT_THRESHOLD
    desktop = load_rules(Settings(), profile="claude-desktop", config_path=None, read_tool_hint=True)
    assert desktop.text_threshold == DEFAULT_TEXT_THRESHOLD


def test_defaults_come_from_the_settings() -> None:
    settings = Settings(inline_limit=1000, image_long_edge=640)
    rules = load_rules(settings, profile="claude-desktop", config_path=None, read_tool_hint=True)
    assert rules.profile is HOST_PROFILES["claude-desktop"]
    assert (rules.inline_limit, rules.image_long_edge) == (1000, 640)
    assert (rules.text_threshold, rules.text_preview) == (DEFAULT_TEXT_THRESHOLD, DEFAULT_TEXT_PREVIEW)
    assert rules.read_tool_hint is True
    tool = rules.for_tool("anything")
    assert (tool.inline_limit, tool.image_long_edge, tool.mode) == (1000, 640, "auto")


def test_unknown_profile_is_a_one_line_error() -> None:
    with pytest.raises(OffloadConfigError, match="unknown profile 'chatgpt'") as caught:
        load_rules(Settings(), profile="chatgpt", config_path=None, read_tool_hint=False)
    assert "\n" not in str(caught.value)


def test_config_file_sets_defaults_lists_and_per_tool_tables(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
text_threshold = 10000
text_preview = 500
never_offload = ["list_directory"]
always_offload = ["take_screenshot"]

[tools.read_media_file]
inline_limit = 200000
image_long_edge = 768

[tools.search]
offload = "always"
text_preview = 100
""",
    )
    rules = load_rules(Settings(), profile="generic", config_path=path, read_tool_hint=False)
    assert (rules.text_threshold, rules.text_preview) == (10000, 500)
    assert rules.for_tool("list_directory").mode == "never"
    assert rules.for_tool("take_screenshot").mode == "always"
    media = rules.for_tool("read_media_file")
    assert (media.inline_limit, media.image_long_edge, media.text_threshold, media.mode) == (
        200000,
        768,
        10000,
        "auto",
    )
    search = rules.for_tool("search")
    assert (search.mode, search.text_preview, search.text_threshold) == ("always", 100, 10000)
    other = rules.for_tool("other")
    assert (other.text_threshold, other.inline_limit, other.mode) == (10000, Settings().inline_limit, "auto")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("inline_limt = 5\n", "inline_limt: unknown key"),
        ("inline_limit = -1\n", "inline_limit: must be a positive integer"),
        ("inline_limit = 0\n", "inline_limit: must be a positive integer"),
        ('text_threshold = "big"\n', "text_threshold: must be a positive integer"),
        ("text_threshold = true\n", "text_threshold: must be a positive integer"),
        ("text_threshold = 100\ntext_preview = 100\n", "text_preview: must be smaller than text_threshold"),
        ('never_offload = "x"\n', "never_offload: must be a list of tool names"),
        ("never_offload = [1]\n", "never_offload: must be a list of tool names"),
        ('never_offload = ["a"]\nalways_offload = ["a"]\n', "always_offload: tool 'a' is in both"),
        ("tools = 3\n", "tools: must be a table"),
        ("[tools.a]\ncolour = 1\n", "tools.a.colour: unknown key"),
        ("[tools.a]\noffload = 'sometimes'\n", "tools.a.offload: must be auto, never or always"),
        ("[tools.a]\nimage_long_edge = 1.5\n", "tools.a.image_long_edge: must be a positive integer"),
        ('never_offload = ["a"]\n[tools.a]\noffload = "always"\n', "tools.a.offload: contradicts"),
        ("[tools.a]\ntext_preview = 999999\n", "tools.a.text_preview: must be smaller than text_threshold"),
        ("inline_limit = = 3\n", "not valid TOML"),
        ("arguments = 1\n", "arguments: must be a table"),
        ("[arguments]\nfolder = '/tmp'\n", "arguments.folder: unknown key"),
        ("[arguments]\ndirectory = 'relative/dir'\n", "arguments.directory: must be an absolute path"),
        ("[arguments]\ndirectory = 3\n", "arguments.directory: must be a directory path"),
        ("[tools.a]\narguments = 'path'\n", "tools.a.arguments: must be a table"),
        ("[tools.a.arguments]\nimage = 'file'\n", "tools.a.arguments.image: must be path or url, not 'file'"),
        ("[tools.a.arguments]\nimage = 'path'\n", 'tools.a.arguments.image: a "path" argument needs'),
        ("[tools.a.arguments]\nsource = 'url'\n", 'tools.a.arguments.source: a "url" argument needs'),
    ],
)
def test_bad_config_is_one_line_naming_file_and_key(tmp_path: Path, text: str, named: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(OffloadConfigError) as caught:
        load_rules(Settings(), profile="generic", config_path=path, read_tool_hint=True)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert named in message
    assert "\n" not in message


def test_missing_config_file_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(OffloadConfigError, match="cannot read") as caught:
        load_rules(Settings(), profile="generic", config_path=path, read_tool_hint=True)
    assert str(caught.value).startswith(str(path))
    assert "\n" not in str(caught.value)


def test_path_and_url_arguments_are_named_per_tool_with_one_directory(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[arguments]
directory = "~/incoming"

[tools.analyze.arguments]
image = "path"
source = "url"

[tools.analyze]
image_long_edge = 512
""",
    )
    settings = Settings(public_url="https://store.example")
    rules = load_rules(settings, profile="generic", config_path=path, read_tool_hint=False)
    assert rules.arguments.directory == Path.home() / "incoming"
    assert rules.arguments.for_tool("analyze") == {"image": Form.PATH, "source": Form.URL}
    assert rules.arguments.for_tool("other") == {}
    assert rules.for_tool("analyze").image_long_edge == 512


def test_url_arguments_need_a_public_url_or_presigned_s3_downloads(tmp_path: Path) -> None:
    path = write(tmp_path, '[tools.a.arguments]\nsource = "url"\n')
    with pytest.raises(OffloadConfigError, match="BLOBSTORE_PUBLIC_URL"):
        load_rules(Settings(), profile="generic", config_path=path, read_tool_hint=False)
    with pytest.raises(OffloadConfigError, match="BLOBSTORE_PUBLIC_URL"):
        # Presigning is for S3 storage only: on local disk it makes no URL.
        load_rules(
            Settings(s3_presign_downloads=True), profile="generic", config_path=path, read_tool_hint=False
        )
    presigned = Settings(storage_url="s3://bucket/prefix", s3_presign_downloads=True)
    rules = load_rules(presigned, profile="generic", config_path=path, read_tool_hint=False)
    assert rules.arguments.for_tool("a") == {"source": Form.URL}


def test_the_stores_windows_under_a_profile_fit_its_result_caps() -> None:
    # base64 of the window plus the answer around it within the strictest caps (25,000 tokens at 4 bytes,
    # and at most the 500,000 characters the read tool declares), or within Claude Desktop's 1 MiB.
    strictest = HOST_PROFILES["generic"].window_max()
    assert strictest == 64 * 1024
    assert strictest * 4 // 3 + WINDOW_ANSWER_OVERHEAD <= 25_000 * BYTES_PER_TOKEN
    desktop = HOST_PROFILES["claude-desktop"].window_max()
    assert desktop * 4 // 3 + WINDOW_ANSWER_OVERHEAD <= 1024 * 1024
    assert desktop % 4096 == 0
    assert (desktop + 4096) * 4 // 3 + WINDOW_ANSWER_OVERHEAD > 1024 * 1024  # the largest that fits
