"""The examples of ``docs/proxy.md``, run as written.

Shell examples run under bash with ``HOME`` set to a temporary directory (so ``~/Pictures`` and
``~/.local/share/mcp-blobstore`` land there), ``blobstore`` on the PATH from this virtualenv, and the working
directory ``tests/proxy/js``, where ``npx`` finds the pinned npm servers without downloading anything. Host
snippets (Claude Desktop JSON, ``claude mcp add``, the Inspector) are run from the proxy command they contain.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import ImageContent, ResourceLink, TextContent

from blobstore.config import Settings
from mcp_resources.proxy.rules import OffloadConfigError, load_rules
from mcp_resources.tools.binary_schema import Form
from tests.fixtures.ports import free_port
from tests.proxy.conftest import EVERYTHING_SERVER, JS, TIMEOUT
from tests.proxy.upstream_server import photo_png

DOC = Path(__file__).resolve().parents[2] / "docs" / "proxy.md"
pytestmark = pytest.mark.usefixtures("npm_servers")


@cache
def blocks(kind: str) -> tuple[str, ...]:
    return tuple(re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL))


def example(kind: str, containing: str) -> str:
    found = [b for b in blocks(kind) if containing in b]
    assert len(found) == 1, f"{len(found)} {kind} blocks in {DOC.name} contain {containing!r}"
    return found[0].strip()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    pictures = tmp_path / "Pictures"
    pictures.mkdir()
    (pictures / "photo.png").write_bytes(photo_png(1600, 1200))
    (pictures / "notes.txt").write_text("notes\n")
    return tmp_path


def shell(command: str, home: Path) -> StdioServerParameters:
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
        "npm_config_cache": str(home / ".npm"),
        "npm_config_offline": "true",
    }
    return StdioServerParameters(command="bash", args=["-c", f"exec {command}"], env=env, cwd=JS)


async def read_pictures(params: StdioServerParameters, home: Path) -> None:
    """The proxied filesystem server lists ~/Pictures and returns its photo downscaled, with a link."""
    async with Client(params, mode="legacy") as client:
        listing = await client.call_tool("list_directory", {"path": str(home / "Pictures")})
        assert "photo.png" in json.dumps(listing.model_dump(mode="json"))
        photo = await client.call_tool("read_media_file", {"path": str(home / "Pictures" / "photo.png")})
        assert any(isinstance(b, ImageContent) for b in photo.content)
        assert any(isinstance(b, ResourceLink) for b in photo.content)


def without_prefix(prefix: str, command: str) -> str:
    """The proxy command an example wraps in another program's command line, which starts with ``prefix``."""
    assert command.startswith(prefix), command
    return command[len(prefix) :]


async def test_the_first_example_runs_the_filesystem_server_behind_the_proxy(home: Path) -> None:
    command = example("sh", "--data-dir ~/.local/share/mcp-blobstore")
    await read_pictures(shell(command, home), home)
    assert (home / ".local" / "share" / "mcp-blobstore" / "metadata.sqlite3").exists()


async def test_the_claude_code_example_runs_its_proxy_command(home: Path) -> None:
    command = without_prefix("claude mcp add pictures -- ", example("sh", "claude mcp add"))
    await read_pictures(shell(command, home), home)


async def test_the_claude_desktop_config_runs_its_proxy_command(home: Path) -> None:
    config = json.loads(example("json", "mcpServers"))
    server = config["mcpServers"]["pictures"]
    args = [a.replace("/home/me", str(home)) for a in server["args"]]
    command = " ".join(shlex.quote(a) for a in [server["command"], *args])
    await read_pictures(shell(command, home), home)
    assert (home / ".local" / "share" / "mcp-blobstore" / "metadata.sqlite3").exists()


async def test_the_inspector_example_runs_its_proxy_command(home: Path) -> None:
    command = without_prefix(
        "npx @modelcontextprotocol/inspector ", example("sh", "@modelcontextprotocol/inspector")
    )
    async with Client(shell(command, home), mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
    assert "echo" in names
    assert names[-1] == "read_artifact"


async def test_the_offload_config_example_is_valid_and_runs(home: Path) -> None:
    config = home / ".config" / "blobstore" / "offload.toml"
    config.parent.mkdir(parents=True)
    config.write_text(example("toml", "never_offload"))
    rules = load_rules(
        Settings(data_dir=home / "d"), profile="generic", config_path=config, read_tool_hint=True
    )
    assert rules.text_threshold == tomllib.loads(config.read_text())["text_threshold"]
    assert rules.for_tool("list_directory").mode == "never"
    assert rules.for_tool("read_media_file").image_long_edge == 768
    await read_pictures(shell(example("sh", "--offload-config"), home), home)


def flowing() -> str:
    """The document with its lines joined, for sentences and code spans that wrap."""
    return " ".join(DOC.read_text(encoding="utf-8").split())


async def test_the_path_argument_example_passes_a_stored_photo_to_get_file_info(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = home / ".config" / "blobstore" / "arguments.toml"
    config.parent.mkdir(parents=True)
    config.write_text(example("toml", "[arguments]"))
    monkeypatch.setenv("HOME", str(home))  # the example's ~, as the proxy started below sees it
    rules = load_rules(
        Settings(data_dir=home / "d"), profile="generic", config_path=config, read_tool_hint=True
    )
    incoming = home / "Pictures" / "from-the-store"
    assert rules.arguments.directory == incoming
    assert rules.arguments.for_tool("get_file_info") == {"path": Form.PATH}
    found = re.search(
        r"`(blobstore proxy --offload-config ~/\.config/blobstore/arguments\.toml [^`]*)`", flowing()
    )
    assert found is not None
    async with Client(shell(found.group(1), home), mode="legacy") as client:
        photo = await client.call_tool("read_media_file", {"path": str(home / "Pictures" / "photo.png")})
        (link,) = [block for block in photo.content if isinstance(block, ResourceLink)]
        info = await client.call_tool("get_file_info", {"path": str(link.uri)})
    text = " ".join(block.text for block in info.content if isinstance(block, TextContent))
    facts = dict(line.split(": ", 1) for line in text.splitlines())
    assert (facts["size"], facts["permissions"]) == (str(link.size), "600")
    assert list(incoming.iterdir()) == []


def test_the_url_argument_example_needs_a_public_url_with_the_documented_error(tmp_path: Path) -> None:
    config = tmp_path / "offload.toml"
    config.write_text(example("toml", "fetch_image"))
    rules = load_rules(
        Settings(public_url="https://store.example"),
        profile="generic",
        config_path=config,
        read_tool_hint=True,
    )
    assert rules.arguments.for_tool("fetch_image") == {"url": Form.URL}
    with pytest.raises(OffloadConfigError) as caught:
        load_rules(Settings(), profile="generic", config_path=config, read_tool_hint=True)
    message = str(caught.value).replace(str(config), "offload.toml")
    assert f"`blobstore: {message}`" in flowing()


@pytest.fixture
def everything_on_3001_like() -> Iterator[int]:
    port = free_port()
    process = subprocess.Popen(
        ["node", str(EVERYTHING_SERVER), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "listening" in line:
                break
        yield port
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT)
        if process.stderr is not None:
            process.stderr.close()


async def test_the_http_upstream_example_runs(home: Path, everything_on_3001_like: int) -> None:
    command = example("sh", "--upstream-url").replace(
        "127.0.0.1:3001", f"127.0.0.1:{everything_on_3001_like}"
    )
    async with Client(shell(command, home), mode="legacy") as client:
        echo = await client.call_tool("echo", {"message": "through the doc"})
    assert "through the doc" in json.dumps(echo.model_dump(mode="json"))


async def test_the_readme_line_runs(home: Path) -> None:
    readme = DOC.parents[1] / "README.md"
    lines = [ln for ln in readme.read_text(encoding="utf-8").splitlines() if ln.startswith("blobstore proxy")]
    assert len(lines) == 1
    await read_pictures(shell(lines[0].split("  #")[0].strip(), home), home)
    assert (home / ".local" / "share" / "mcp-blobstore" / "metadata.sqlite3").exists()
