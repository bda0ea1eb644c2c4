"""Artifact URIs at path arguments (``[tools.X.arguments] path = "path"``): real processes, the official
Python client.

In front of ``@modelcontextprotocol/server-filesystem``, whose tools read only paths inside its allowed
directories, the proxy writes the artifact to a file in the configured directory (one of them), passes its
path, and removes it once the call is answered. A small Python upstream (``file_args_upstream.py``) stats
what it is given, so the tests see the file while it exists, and fails, dies or hangs on request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, ImageContent, TextContent

from blobstore.config import Settings
from blobstore.models import Artifact, Caller
from blobstore.runtime import open_service
from mcp_resources.tools.binary_schema import HANDLE_HINT
from mcp_resources.tools.handles import AUDIT_ACTION, CAP_SETTING
from tests.fixtures.server import isolated_env
from tests.fixtures.waiting import wait_until
from tests.handles.conftest import put
from tests.proxy.conftest import (
    HERE,
    NAMESPACE,
    TIMEOUT,
    blobstore_command,
    filesystem_upstream,
    proxy_args,
    proxy_command,
    raw_peer,
    vm_hwm,
)
from tests.proxy.upstream_server import photo_png

pytestmark = pytest.mark.usefixtures("npm_servers")

UPSTREAM = HERE / "file_args_upstream.py"
NOTES = b"# Notes\n\nThe first line of the store's notes.\nThe last line.\n"
PHOTO = photo_png(64, 48)
OURS = Caller(namespace=NAMESPACE)
MiB = 1024 * 1024


async def stored(data_dir: Path, data: bytes, name: str, mime_type: str, caller: Caller = OURS) -> Artifact:
    async with open_service(Settings(data_dir=data_dir), migrate=True) as service:
        return await put(service, data, name, mime_type, caller=caller)


def offload_config(path: Path, directory: Path, tools: dict[str, str]) -> Path:
    """A config naming the ``path`` argument of each tool in ``tools`` as a path argument."""
    lines = ["[arguments]", f"directory = {json.dumps(str(directory))}", ""]
    for tool, argument in tools.items():
        lines += [f"[tools.{tool}.arguments]", f'{argument} = "path"', ""]
    path.write_text("\n".join(lines))
    return path


def text(result: CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


def audit_lines(data_dir: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (data_dir / "audit.jsonl").read_text().splitlines()]
    return [line for line in lines if line.get("action") == AUDIT_ACTION]


class Rig:
    """A proxy over the stat upstream, its path arguments written into ``incoming``."""

    def __init__(self, tmp_path: Path) -> None:
        self.data_dir = tmp_path / "data"
        self.incoming = tmp_path / "shared" / "incoming"
        self.record = tmp_path / "record.jsonl"
        tools = {name: "path" for name in ("stat_file", "stat_then_fail", "stat_then_die", "stat_then_wait")}
        self.config = offload_config(tmp_path / "offload.toml", self.incoming, tools)
        self.upstream = [sys.executable, str(UPSTREAM), str(self.record)]

    def params(self) -> StdioServerParameters:
        args = proxy_args(self.data_dir, self.upstream, "--offload-config", str(self.config))
        return StdioServerParameters(command=blobstore_command(), args=args, env=isolated_env())

    def command(self) -> list[str]:
        return proxy_command(self.data_dir, self.upstream, "--offload-config", str(self.config))

    def seen(self) -> list[dict[str, Any]]:
        """What the upstream found at the paths it was given."""
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def left(self) -> list[str]:
        return sorted(p.name for p in self.incoming.iterdir()) if self.incoming.exists() else []


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path)


async def test_server_filesystem_reads_an_artifact_passed_as_a_path_and_the_file_is_gone_afterwards(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "plain.txt").write_text("a file of the filesystem itself\n")
    incoming = shared / "incoming"  # missing: the proxy makes it, 0700
    notes = await stored(data_dir, NOTES, "notes.md", "text/markdown")
    photo = await stored(data_dir, PHOTO, "capture", "image/png")  # no extension of its own
    config = offload_config(
        tmp_path / "offload.toml",
        incoming,
        {"read_text_file": "path", "get_file_info": "path", "read_media_file": "path"},
    )
    with config.open("a") as out:
        out.write('[tools.read_multiple_files.arguments]\npaths = "path"\n')
    args = proxy_args(data_dir, filesystem_upstream(shared), "--offload-config", str(config))
    params = StdioServerParameters(command=blobstore_command(), args=args, env=isolated_env())
    async with Client(params, mode="legacy") as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        described = tools["read_text_file"].input_schema["properties"]["path"]
        assert described["description"] == f"A file path; {HANDLE_HINT}"
        read = await client.call_tool("read_text_file", {"path": notes.uri})
        assert not read.is_error, text(read)
        assert text(read) == NOTES.decode()
        assert sorted(p.name for p in incoming.iterdir()) == []
        info = await client.call_tool("get_file_info", {"path": notes.uri})
        assert not info.is_error, text(info)
        facts = dict(line.split(": ", 1) for line in text(info).splitlines())
        assert (facts["size"], facts["isFile"], facts["permissions"]) == (str(len(NOTES)), "true", "600")
        media = await client.call_tool("read_media_file", {"path": photo.uri})
        images = [block for block in media.content if isinstance(block, ImageContent)]
        assert [(image.mime_type, base64.b64decode(image.data)) for image in images] == [("image/png", PHOTO)]
        plain = await client.call_tool("read_text_file", {"path": str(shared / "plain.txt")})
        assert text(plain) == "a file of the filesystem itself\n"
        items = tools["read_multiple_files"].input_schema["properties"]["paths"]["items"]
        assert items["description"] == f"A file path; {HANDLE_HINT}"
        both = await client.call_tool(
            "read_multiple_files", {"paths": [notes.uri, str(shared / "plain.txt")]}
        )
        first, second = text(both).split("\n---\n")
        assert first.startswith(str(incoming))
        assert first.endswith(f":\n{NOTES.decode()}\n")
        assert second == f"{shared / 'plain.txt'}:\na file of the filesystem itself\n\n"
    assert list(incoming.iterdir()) == []
    assert incoming.stat().st_mode & 0o777 == 0o700
    lines = audit_lines(data_dir)
    assert [(line["tool"], line["argument"], line["form"], line["sha256"]) for line in lines] == [
        ("read_text_file", "path", "path", notes.sha256),
        ("get_file_info", "path", "path", notes.sha256),
        ("read_media_file", "path", "path", photo.sha256),
        ("read_multiple_files", "paths[0]", "path", notes.sha256),
    ]
    assert b"first line" not in (data_dir / "audit.jsonl").read_bytes()


async def test_the_file_is_0600_absolute_named_after_the_artifact_and_removed_after_the_answer(
    rig: Rig,
) -> None:
    pdf = await stored(rig.data_dir, b"%PDF-1.4 not much of a document", "Q3 report.pdf", "application/pdf")
    window = f"{pdf.uri}?offset=5&length=3"
    async with Client(rig.params(), mode="legacy") as client:
        whole = json.loads(text(await client.call_tool("stat_file", {"path": pdf.uri})))
        part = json.loads(text(await client.call_tool("stat_file", {"path": window})))
        assert rig.left() == []
    assert (whole["mode"], whole["absolute"], whole["size"]) == ("0o600", True, pdf.size)
    assert whole["sha256"] == pdf.sha256
    assert Path(whole["path"]).parent == rig.incoming
    assert whole["name"].endswith("-Q3_report.pdf")
    assert (part["size"], part["sha256"]) == (3, hashlib.sha256(b"1.4").hexdigest())
    assert part["path"] != whole["path"]


async def test_a_path_that_is_not_an_artifact_uri_reaches_the_tool_unchanged(
    rig: Rig, tmp_path: Path
) -> None:
    own = tmp_path / "own.txt"
    own.write_bytes(b"mine")
    async with Client(rig.params(), mode="legacy") as client:
        seen = json.loads(text(await client.call_tool("stat_file", {"path": str(own)})))
    assert (seen["path"], seen["sha256"]) == (str(own), hashlib.sha256(b"mine").hexdigest())
    assert not rig.incoming.exists()


async def test_foreign_and_guessed_handles_at_a_path_are_not_found_and_nothing_is_written(rig: Rig) -> None:
    theirs = await stored(rig.data_dir, NOTES, "theirs.md", "text/markdown", caller=Caller(namespace="other"))
    guessed = "blobstore://artifacts/a_" + "x" * 24
    errors = []
    async with Client(rig.params(), mode="legacy") as client:
        for uri in (theirs.uri, guessed):
            result = await client.call_tool("stat_file", {"path": uri})
            assert result.is_error
            assert result.structured_content is not None
            errors.append((result.structured_content["error"]["code"], text(result)))
    assert errors == [("not_found", "Error (not_found): path: artifact not found")] * 2
    assert rig.seen() == []
    assert not rig.incoming.exists()


async def test_the_file_is_removed_when_the_tool_answers_an_error(rig: Rig) -> None:
    notes = await stored(rig.data_dir, NOTES, "notes.md", "text/markdown")
    async with Client(rig.params(), mode="legacy") as client:
        result = await client.call_tool("stat_then_fail", {"path": notes.uri})
        assert result.is_error
        assert text(result) == "it went wrong"
        assert rig.left() == []
    (seen,) = rig.seen()
    assert (seen["mode"], seen["sha256"]) == ("0o600", notes.sha256)


async def test_the_file_is_removed_when_the_upstream_dies_during_the_call(rig: Rig) -> None:
    notes = await stored(rig.data_dir, NOTES, "notes.md", "text/markdown")
    async with raw_peer(rig.command()) as peer:
        await peer.handshake()
        answer = json.loads(
            await peer.request(1, "tools/call", {"name": "stat_then_die", "arguments": {"path": notes.uri}})
        )
        assert answer["error"]["data"]["reason"] == "upstream_unavailable"
        assert rig.left() == []
    (seen,) = rig.seen()
    assert seen["sha256"] == notes.sha256


async def test_the_file_is_removed_when_the_host_cancels_the_call(rig: Rig) -> None:
    notes = await stored(rig.data_dir, NOTES, "notes.md", "text/markdown")
    async with raw_peer(rig.command()) as peer:
        await peer.handshake()
        call = {"name": "stat_then_wait", "arguments": {"path": notes.uri}}
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call})
        wait_until(rig.seen, within=TIMEOUT, what="the upstream to look at the file")
        assert len(rig.left()) == 1
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
        # The proxy reads the host's messages in order: once a later request is answered, the cancel is done.
        await peer.request(8, "ping")
        assert rig.left() == []


async def test_a_directory_that_cannot_be_written_is_a_storage_error_and_the_tool_is_not_called(
    rig: Rig,
) -> None:
    rig.incoming.parent.mkdir(parents=True)
    rig.incoming.write_text("a file where the directory should be")
    notes = await stored(rig.data_dir, NOTES, "notes.md", "text/markdown")
    async with raw_peer(rig.command()) as peer:
        await peer.handshake()
        answer = json.loads(
            await peer.request(1, "tools/call", {"name": "stat_file", "arguments": {"path": notes.uri}})
        )
    assert answer["error"]["data"]["reason"] == "storage_unavailable"
    assert rig.seen() == []


async def test_a_large_artifact_is_streamed_to_its_file_without_the_proxy_holding_it(rig: Rig) -> None:
    block = bytes(range(256)) * 4096  # 1 MiB
    blocks = 96
    digest = hashlib.sha256()
    for index in range(blocks):
        digest.update(index.to_bytes(4, "big") + block[4:])

    async def chunks() -> AsyncIterator[bytes]:
        for index in range(blocks):
            yield index.to_bytes(4, "big") + block[4:]

    async with open_service(Settings(data_dir=rig.data_dir), migrate=True) as service:
        large = await service.create_artifact(
            OURS, chunks(), name="large.bin", mime_type="application/octet-stream", expected_size=blocks * MiB
        )
    small = await stored(rig.data_dir, NOTES, "notes.md", "text/markdown")
    command = ["env", f"{CAP_SETTING}={2 * blocks * MiB}", *rig.command()]
    async with raw_peer(command) as peer:
        await peer.handshake()
        warm = {"name": "stat_file", "arguments": {"path": small.uri}}
        await peer.request(1, "tools/call", warm)
        before = vm_hwm(peer.process.pid)
        answer = json.loads(
            await peer.request(2, "tools/call", {"name": "stat_file", "arguments": {"path": large.uri}})
        )
        seen = json.loads(answer["result"]["content"][0]["text"])
        assert (seen["size"], seen["sha256"]) == (blocks * MiB, digest.hexdigest())
        # Holding it whole would take 96 MiB; the proxy holds a storage block or two at a time.
        assert vm_hwm(peer.process.pid) - before < 32 * MiB
        assert rig.left() == []
