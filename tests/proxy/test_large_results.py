"""Large upstream messages through ``blobstore proxy``: read as they arrive, payloads streamed into the store.

The upstream is a real child process (``raw_upstream.py``) writing results of tens of megabytes in pieces.
The message cap (``BLOBSTORE_PROXY_MAX_MESSAGE_BYTES``) counts what the proxy holds of a message, so a cap
far smaller than the message that still lets its payload through shows the message was never held whole.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Final

import pytest

from tests.proxy.conftest import (
    RAW_UPSTREAM,
    call,
    link_of,
    proxy_command,
    raw_peer,
    stored,
    vm_hwm,
)
from tests.proxy.raw_upstream import payload_sha256, text_sha256

MiB: Final = 1024 * 1024


@pytest.mark.parametrize("id_last", [False, True], ids=["id-first", "id-last"])
async def test_a_large_image_streams_into_the_store_under_a_cap_far_smaller_than_its_message(
    data_dir: Path, small_cap: int, id_last: bool
) -> None:
    size = 48 * MiB  # 64 MiB of base64 in one line: sixteen times the cap
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "big", {"size": size, "kind": "image", "id_last": id_last})
        link = link_of(answer)
        assert answer["id"] == 1
        assert "image" in answer["result"]["content"][0]["text"]
        # The upstream's later messages still flow.
        echo = await call(peer, 2, "echo", {"text": "after"})
        assert echo["result"]["content"][0]["text"].startswith("5 ")
        assert await peer.close() == 0
    (artifact,) = await stored(data_dir)
    assert artifact.uri == link["uri"]
    assert (artifact.size, artifact.sha256) == (size, payload_sha256(size))
    assert artifact.metadata["tool"] == "big"


async def test_a_large_text_streams_into_the_store_and_the_host_gets_its_head(
    data_dir: Path, small_cap: int
) -> None:
    size = 24 * MiB
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "big", {"size": size, "kind": "text"})
        link_of(answer)
        shown = answer["result"]["content"][0]["text"]
        assert shown.startswith("The quick brown fox jumps over the lazy dog. 0123456789\n")
        assert f"of {size} bytes" in shown
        assert len(json.dumps(answer)) < 1024 * 1024
        assert await peer.close() == 0
    (artifact,) = await stored(data_dir)
    assert (artifact.size, artifact.sha256, artifact.mime_type) == (size, text_sha256(size), "text/plain")


async def test_a_large_upstream_resource_read_streams_into_the_store(data_dir: Path, small_cap: int) -> None:
    size = 16 * MiB
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        answer = json.loads(await peer.request(1, "resources/read", {"uri": f"raw://big/{size}"}))
        data = answer["error"]["data"]
        assert (answer["error"]["code"], data["reason"]) == (-32602, "range_required")
        assert (data["size"], data["sha256"]) == (size, payload_sha256(size))
        assert await peer.close() == 0
    (artifact,) = await stored(data_dir)
    assert artifact.uri == data["uri"]


async def test_a_message_over_the_cap_gets_an_error_naming_it_and_nothing_is_stored(
    data_dir: Path, small_cap: int
) -> None:
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        # The payload sits where no rule offloads it, so the proxy would have to hold all of it.
        answer = await call(peer, 1, "big", {"size": 8 * MiB, "where": "meta"})
        error = answer["error"]
        assert error["code"] == -32603
        assert f"over the {small_cap}-byte cap (BLOBSTORE_PROXY_MAX_MESSAGE_BYTES)" in error["message"]
        assert error["data"] == {
            "reason": "message_refused",
            "cause": "over_cap",
            "maxMessageBytes": small_cap,
        }
        echo = await call(peer, 2, "echo", {"text": "still here"})
        assert echo["result"]["content"][0]["text"].startswith("10 ")
        assert await peer.close() == 0
    assert await stored(data_dir) == []


async def test_large_tool_arguments_from_the_host_reach_the_upstream_without_being_held(
    data_dir: Path,
) -> None:
    argument = "0123456789abcdef" * (4 * MiB)  # 64 MiB of one string
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        await call(peer, 1, "echo", {"text": "warm"})
        before = vm_hwm(peer.process.pid)
        answer = await call(peer, 2, "echo", {"text": argument})
        size, digest = answer["result"]["content"][0]["text"].split()
        assert (int(size), digest) == (len(argument), hashlib.sha256(argument.encode()).hexdigest())
        # Holding the line once would take 64 MiB; the proxy's old relay held it three times.
        assert vm_hwm(peer.process.pid) - before < 32 * MiB
        assert await peer.close() == 0


async def test_tool_arguments_over_the_cap_get_an_error_naming_it_and_later_calls_go_through(
    data_dir: Path, small_cap: int
) -> None:
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "echo", {"text": "x" * (2 * small_cap)})
        assert answer["error"]["code"] == -32603
        assert f"the host's message is over the {small_cap}-byte cap" in answer["error"]["message"]
        echo = await call(peer, 2, "echo", {"text": "next"})
        assert echo["result"]["content"][0]["text"].startswith("4 ")
        assert await peer.close() == 0


async def test_a_large_payload_of_a_never_offloaded_tool_reaches_the_host_as_it_came(
    data_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "offload.toml"
    config.write_text('never_offload = ["big"]\n')
    size = 6 * MiB
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM, "--offload-config", str(config))) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "big", {"size": size, "kind": "audio", "mime": "audio/wav"})
        (block,) = answer["result"]["content"]
        assert (block["type"], block["mimeType"]) == ("audio", "audio/wav")
        assert hashlib.sha256(base64.b64decode(block["data"])).hexdigest() == payload_sha256(size)
        assert await peer.close() == 0
    assert await stored(data_dir) == []  # what was staged on the way is gone


async def test_a_large_payload_mirrored_in_structured_content_is_replaced_there_too(data_dir: Path) -> None:
    size = 6 * MiB
    async with raw_peer(proxy_command(data_dir, RAW_UPSTREAM)) as peer:
        await peer.handshake()
        answer = await call(peer, 1, "big", {"size": size, "kind": "audio", "mirror": True})
        link = link_of(answer)
        (mirrored,) = answer["result"]["structuredContent"]["content"]
        assert (
            mirrored == link
        )  # without an outputSchema, the object gives way to the link (proxy-offload-rules.md)
        assert len(json.dumps(answer)) < 64 * 1024
        assert await peer.close() == 0
    (artifact,) = await stored(data_dir)
    assert artifact.sha256 == payload_sha256(size)


@pytest.mark.parametrize(
    ("profile", "window", "cap"),
    [("claude-code", 64 * 1024, 100_000), ("claude-desktop", 760 * 1024, 1024 * 1024)],
)
async def test_a_full_window_of_the_read_tool_fits_the_hosts_caps(
    data_dir: Path, profile: str, window: int, cap: int
) -> None:
    size = 2 * MiB
    command = proxy_command(data_dir, RAW_UPSTREAM, "--host-profile", profile)
    async with raw_peer(command) as peer:
        await peer.handshake()
        link = link_of(await call(peer, 1, "big", {"size": size, "kind": "blob"}))
        # Asked for more than fits: the window is clamped to what the host takes whole.
        line = await peer.request(
            2, "tools/call", {"name": "read_artifact", "arguments": {"uri": link["uri"], "length": MiB}}
        )
        assert len(line) <= cap  # bytes, and for claude-code 25,000 tokens at 4 bytes a token
        answer = json.loads(line)
        blobs = [b["resource"]["blob"] for b in answer["result"]["content"] if b["type"] == "resource"]
        assert [len(base64.b64decode(blob)) for blob in blobs] == [window]
        assert await peer.close() == 0
