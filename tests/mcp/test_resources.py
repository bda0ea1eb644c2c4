"""resources/list, templates and read over every transport with the official client."""

from __future__ import annotations

import base64
import hashlib
import random
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from mcp.types import BlobResourceContents, TextResourceContents

from mcp_resources.uris import WINDOW_META_KEY, WINDOW_URI_TEMPLATE, artifact_uri, window_uri
from tests.mcp.conftest import BIG_SIZE, BULK, Dataset, connect

QUICK = pytest.mark.parametrize("transport", ["memory", "memory-legacy", "http"], indirect=True)

MiB = 1024 * 1024


def blob_of(result: Any) -> bytes:
    (contents,) = result.contents
    assert isinstance(contents, BlobResourceContents)
    return base64.b64decode(contents.blob)


def window_meta(result: Any) -> dict[str, Any]:
    meta: dict[str, Any] = result.contents[0].meta[WINDOW_META_KEY]
    return meta


async def expect_error(client: Client, uri: str) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri, cache_mode="bypass")
    return caught.value


async def test_listing_pages_return_every_artifact_exactly_once(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    seen: list[str] = []
    pages = 0
    async with connect(transport, dataset, request) as client:
        cursor: str | None = None
        while True:
            page = await client.list_resources(cursor=cursor)
            pages += 1
            seen.extend(resource.uri for resource in page.resources)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert {artifact_uri(i) for i in dataset.bulk_ids} <= set(seen)
    bulk = {artifact_uri(i) for i in dataset.bulk_ids}
    # Newest first (the bulk set was created in id-list order, one microsecond apart), across every page.
    assert [uri for uri in seen if uri in bulk] == [artifact_uri(i) for i in reversed(dataset.bulk_ids)]
    assert pages > BULK // 1000
    assert artifact_uri(dataset.foreign.id) not in seen
    assert artifact_uri(dataset.expired_id) not in seen


@QUICK
async def test_listed_resources_carry_size_type_title_and_last_modified(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, dataset, request) as client:
        found = None
        cursor = None
        while found is None:
            page = await client.list_resources(cursor=cursor)
            found = next((r for r in page.resources if r.uri == dataset.big.uri), None)
            cursor = page.next_cursor
            if cursor is None:
                break
    assert found is not None
    assert (found.name, found.title, found.mime_type, found.size) == (
        "big.bin",
        "big.bin",
        "application/octet-stream",
        BIG_SIZE,
    )
    assert found.annotations is not None
    assert found.annotations.last_modified is not None
    assert found.annotations.last_modified.endswith("Z")


@QUICK
async def test_template_is_listed_with_its_window_rules(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, dataset, request) as client:
        templates = await client.list_resource_templates()
    # The window template first; the media views' templates follow it (tests/views).
    template = templates.resource_templates[0]
    assert (
        template.uri_template == WINDOW_URI_TEMPLATE == "blobstore://artifacts/{artifact_id}{?offset,length}"
    )
    assert template.description is not None
    for rule in ("range_required", "range_not_satisfiable", "invalid_range", "eof", str(MiB)):
        assert rule in template.description


async def test_random_windows_equal_original_bytes_and_http_range(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    http_base = request.getfixturevalue("http_base")
    rng = random.Random(f"windows-{transport}")
    size = dataset.big.size
    cases = [(rng.randrange(0, size), rng.randrange(1, 3 * MiB)) for _ in range(20)]
    cases += [(0, MiB), (size - 10, 100), (size - MiB, MiB)]
    async with connect(transport, dataset, request) as client, httpx.AsyncClient(base_url=http_base) as http:
        for offset, length in cases:
            uri = window_uri(dataset.big.id, offset, length)
            got = blob_of(await client.read_resource(uri, cache_mode="bypass"))
            end = min(offset + min(length, MiB), size)
            assert got == dataset.big_bytes[offset:end]
            ranged = await http.get(
                f"/v1/artifacts/{dataset.big.id}/content", headers={"Range": f"bytes={offset}-{end - 1}"}
            )
            assert ranged.status_code == 206
            assert ranged.content == got


@QUICK
async def test_reading_a_window_twice_gives_identical_bytes(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    uri = window_uri(dataset.big.id, 7 * MiB + 3, 300_001)
    async with connect(transport, dataset, request) as client:
        first = await client.read_resource(uri, cache_mode="bypass")
        second = await client.read_resource(uri, cache_mode="bypass")
    assert blob_of(first) == blob_of(second) == dataset.big_bytes[7 * MiB + 3 : 7 * MiB + 3 + 300_001]
    assert window_meta(first) == window_meta(second)
    assert window_meta(first)["windowSha256"] == hashlib.sha256(blob_of(first)).hexdigest()


async def test_a_default_client_reads_a_large_artifact_by_following_first_and_next(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    """The newcomer's path with the official client at its defaults: read the artifact, follow the
    ``range_required`` error's ``first`` window (the default window size), then every ``next`` to the end."""
    parts: list[bytes] = []
    async with connect(transport, dataset, request) as client:
        refused = await expect_error(client, dataset.big.uri)
        assert refused.error.data is not None
        assert refused.error.data["maxWindow"] == MiB
        # The default window: no length given.
        default = await client.read_resource(f"{dataset.big.uri}?offset=0", cache_mode="bypass")
        assert blob_of(default) == dataset.big_bytes[:MiB]
        uri: str | None = refused.error.data["first"]
        while uri is not None:
            result = await client.read_resource(uri, cache_mode="bypass")
            parts.append(blob_of(result))
            meta = window_meta(result)
            assert meta["sha256"] == dataset.big.sha256
            uri = meta["next"]
    assert meta["eof"] is True
    assert [len(part) for part in parts] == [MiB] * (BIG_SIZE // MiB)
    assert b"".join(parts) == dataset.big_bytes


@QUICK
async def test_small_text_reads_whole_as_text_and_binary_as_blob(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, dataset, request) as client:
        text = await client.read_resource(dataset.text.uri)
        empty = await client.read_resource(dataset.empty.uri)
        text_window = await client.read_resource(window_uri(dataset.text.id, 0, 10))
    (contents,) = text.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.text == dataset.text_body
    assert contents.mime_type == "text/plain"
    assert blob_of(empty) == b""
    # A window is always a byte-exact blob, even of a text artifact.
    assert blob_of(text_window) == dataset.text_body.encode()[:10]


@QUICK
async def test_window_length_is_clamped_to_the_maximum(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, dataset, request) as client:
        result = await client.read_resource(window_uri(dataset.big.id, 5, 5 * MiB))
        only_offset = await client.read_resource(f"{dataset.big.uri}?offset=9")
    assert len(blob_of(result)) == MiB
    meta = window_meta(result)
    assert (meta["offset"], meta["length"], meta["size"], meta["eof"]) == (5, MiB, BIG_SIZE, False)
    assert meta["next"] == window_uri(dataset.big.id, 5 + MiB, MiB)
    assert blob_of(only_offset) == dataset.big_bytes[9 : 9 + MiB]


@QUICK
async def test_offset_at_size_is_an_empty_blob_at_eof(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect(transport, dataset, request) as client:
        result = await client.read_resource(window_uri(dataset.big.id, BIG_SIZE, 100))
    assert blob_of(result) == b""
    meta = window_meta(result)
    assert (meta["offset"], meta["length"], meta["eof"], meta["next"]) == (BIG_SIZE, 0, True, None)


async def test_reads_carry_long_private_cache_hints_on_2026(
    dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    async with connect("memory", dataset, request) as client:
        result = await client.read_resource(window_uri(dataset.big.id, 0, 10))
    assert result.cache_scope == "private"
    assert result.ttl_ms > 24 * 3600 * 1000


async def test_error_cases_give_their_code_and_data(
    transport: str, dataset: Dataset, request: pytest.FixtureRequest
) -> None:
    big = dataset.big
    async with connect(transport, dataset, request) as client:
        large = await expect_error(client, big.uri)
        assert large.code == -32602
        assert large.data["reason"] == "range_required"
        assert large.data["size"] == BIG_SIZE
        assert large.data["maxWindow"] == MiB
        assert large.data["first"] == window_uri(big.id, 0, MiB)
        assert large.data["uri"] == big.uri
        assert blob_of(await client.read_resource(large.data["first"])) == dataset.big_bytes[:MiB]

        medium = await expect_error(client, dataset.medium.uri)
        assert (medium.data["reason"], medium.data["size"]) == ("range_required", 600 * 1024)
        assert medium.data["first"] == window_uri(dataset.medium.id, 0, 600 * 1024)

        beyond = await expect_error(client, window_uri(big.id, BIG_SIZE + 1, 10))
        assert (beyond.code, beyond.data["reason"], beyond.data["size"]) == (
            -32602,
            "range_not_satisfiable",
            BIG_SIZE,
        )

        huge = "9" * 25
        clamped = await client.read_resource(f"{big.uri}?offset=5&length={huge}", cache_mode="bypass")
        assert blob_of(clamped) == dataset.big_bytes[5 : 5 + MiB]
        far = await expect_error(client, f"{big.uri}?offset={huge}&length=10")
        assert (far.code, far.data["reason"], far.data["size"]) == (-32602, "range_not_satisfiable", BIG_SIZE)

        for query in ("offset=abc", "offset=-1", "length=0", "length=1.5", "offset=1&length=", "offset=%2B5"):
            malformed = await expect_error(client, f"{big.uri}?{query}")
            assert (malformed.code, malformed.data["reason"]) == (-32602, "invalid_range"), query
            assert malformed.data["uri"] == f"{big.uri}?{query}"

        missing_uris = [
            artifact_uri("a_AAAAAAAAAAAAAAAAAAAAAAAA"),
            artifact_uri("not-an-id"),
            artifact_uri(dataset.foreign.id),
            artifact_uri(dataset.expired_id),
            window_uri(dataset.foreign.id, 0, 5),
            "blobstore://artifacts/",
            "blobstore://elsewhere/x",
            "file:///etc/passwd",
        ]
        for uri in missing_uris:
            missing = await expect_error(client, uri)
            assert (missing.code, missing.message, missing.data["uri"]) == (-32602, "Resource not found", uri)


def test_canonical_window_uris_match_the_published_template() -> None:
    template = UriTemplate.parse(WINDOW_URI_TEMPLATE)
    uri = window_uri("a_0123456789abcdefghijklmn", 1048576, 4096)
    assert template.match(uri) == {
        "artifact_id": "a_0123456789abcdefghijklmn",
        "offset": "1048576",
        "length": "4096",
    }
    assert (
        template.expand({"artifact_id": "a_0123456789abcdefghijklmn", "offset": "1048576", "length": "4096"})
        == uri
    )
