"""Blobs spliced into the stdio line: the line is byte for byte what serializing the whole message gives."""

from __future__ import annotations

import base64
import json
import os
import threading
from typing import Any

from mcp.types import JSONRPCResponse, ReadResourceResult

from mcp_resources.results.wire_blobs import MAX_REMEMBERED, SPLICE_AT, Splices, base64_text, splicing
from mcp_resources.transports.stdio import _write_all


def response(*blobs: str, uri: str = "blobstore://artifacts/a_x?offset=0&length=1048576") -> JSONRPCResponse:
    result = ReadResourceResult.model_validate(
        {
            "contents": [
                {"uri": uri, "mimeType": "application/octet-stream", "blob": blob, "_meta": {"k": i}}
                for i, blob in enumerate(blobs)
            ],
            "ttlMs": 5,
            "cacheScope": "private",
        }
    )
    wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return JSONRPCResponse(jsonrpc="2.0", id=7, result=wire)


def whole_line(message: JSONRPCResponse) -> bytes:
    return message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True) + b"\n"


def remembered(splices: Splices, data: bytes) -> str:
    with splicing(splices):
        return base64_text(data)


def test_a_remembered_blob_is_written_as_it_is_and_the_line_equals_the_whole_serialization() -> None:
    data = os.urandom(SPLICE_AT + 1001)  # a length whose base64 ends in padding
    splices = Splices()
    blob = remembered(splices, data)
    message = response(blob)

    parts = splices.line_parts(message)

    assert parts is not None
    assert b"".join(parts) == whole_line(message)
    decoded = json.loads(b"".join(parts))
    assert base64.b64decode(decoded["result"]["contents"][0]["blob"]) == data
    # Written once: the same message again is serialized the ordinary way.
    assert splices.line_parts(message) is None


def test_several_remembered_blobs_in_one_result_all_land_in_their_places() -> None:
    splices = Splices()
    blobs = [remembered(splices, os.urandom(SPLICE_AT + n)) for n in range(3)]
    message = response(*blobs)

    parts = splices.line_parts(message)

    assert parts is not None
    assert b"".join(parts) == whole_line(message)


def test_blobs_made_outside_splicing_or_small_are_not_remembered() -> None:
    splices = Splices()
    outside = base64_text(os.urandom(SPLICE_AT))
    small = remembered(splices, b"tiny")
    made = remembered(splices, os.urandom(SPLICE_AT))
    equal_copy = made[:1] + made[1:]  # the same text, another object: not one this connection made

    assert splices.line_parts(response(outside)) is None
    assert splices.line_parts(response(small)) is None
    assert equal_copy == made
    assert equal_copy is not made
    assert splices.line_parts(response(equal_copy)) is None


def test_only_the_newest_strings_are_remembered() -> None:
    splices = Splices()
    blobs = [remembered(splices, os.urandom(SPLICE_AT)) for _ in range(MAX_REMEMBERED + 1)]

    assert splices.line_parts(response(blobs[0])) is None
    newest = response(blobs[-1])
    parts = splices.line_parts(newest)
    assert parts is not None
    assert b"".join(parts) == whole_line(newest)


def test_a_placeholder_lookalike_elsewhere_in_the_message_falls_back_to_the_whole_serialization() -> None:
    splices = Splices()
    blob = remembered(splices, os.urandom(SPLICE_AT))

    assert splices.line_parts(response(blob, uri="blobstore://artifacts/\x00blob\x00")) is None


def test_messages_without_contents_are_not_touched() -> None:
    splices = Splices()
    remembered(splices, os.urandom(SPLICE_AT))
    other: Any = JSONRPCResponse(jsonrpc="2.0", id=1, result={"tools": []})

    assert splices.line_parts(other) is None


def test_write_all_writes_every_part_in_order_through_a_small_non_blocking_pipe() -> None:
    parts = [os.urandom(3 * 1024 * 1024), b"", os.urandom(10), os.urandom(200_000), b"\n"]
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    received = bytearray()

    def drain() -> None:
        while chunk := os.read(read_end, 65536):
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        _write_all(write_end, parts)
    finally:
        os.close(write_end)
        reader.join()
        os.close(read_end)
    assert bytes(received) == b"".join(parts)
