"""Native chunked uploads on a real server: out-of-order parallel chunks, a resend, a dropped connection."""

from __future__ import annotations

import hashlib
import os
import random
import socket
import struct
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from blobstore.client import AsyncBlobstoreClient
from blobstore.client.api import content_digest
from blobstore.errors import ChunkConflict, UploadIncomplete
from tests.fixtures.server import Server

pytestmark = pytest.mark.e2e

CHUNK = 256 * 1024
COUNT = 12
SIZE = CHUNK * (COUNT - 1) + 12_345


def send_half_then_reset(url: str, upload_id: str, index: int, data: bytes) -> None:
    """Announce the whole chunk, send half of it, then reset the connection, like a client that died."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    head = (
        f"PUT /v1/uploads/{upload_id}/chunks/{index} HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\n"
        "Content-Type: application/octet-stream\r\n"
        f"Content-Digest: {content_digest(data)}\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(head + data[: len(data) // 2])
        # Linger 0: close() sends RST instead of FIN, the abrupt end of a dropped link.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


async def test_out_of_order_parallel_chunks_with_resend_and_disconnect_read_back_identical(
    server: Server, tmp_path: Path
) -> None:
    data = os.urandom(SIZE)
    chunks = [data[i * CHUNK : (i + 1) * CHUNK] for i in range(COUNT)]
    dropped = 5
    order = [i for i in range(COUNT) if i != dropped]
    random.Random(7).shuffle(order)

    async with AsyncBlobstoreClient(server.url) as client:
        session = await client.begin_upload(
            "shuffled.bin", size=SIZE, sha256=hashlib.sha256(data).hexdigest(), chunk_size=CHUNK
        )
        await anyio.to_thread.run_sync(
            send_half_then_reset, server.url, session.upload_id, dropped, chunks[dropped]
        )
        async with anyio.create_task_group() as group:
            for index in order:
                group.start_soon(client.put_chunk, session.upload_id, index, chunks[index])
        await client.put_chunk(session.upload_id, order[0], chunks[order[0]])  # identical resend

        status = await client.upload_status(session.upload_id)
        assert status.chunks_received == frozenset(order)
        assert status.missing == [dropped]
        with pytest.raises(UploadIncomplete):
            await client.complete_upload(session.upload_id)

        await client.put_chunk(session.upload_id, dropped, chunks[dropped])
        artifact = await client.complete_upload(session.upload_id)
        again = await client.complete_upload(session.upload_id)
        downloaded = await client.download(artifact.id, tmp_path / "out.bin")

    assert again.id == artifact.id
    assert artifact.size == SIZE
    assert downloaded.verified
    assert (tmp_path / "out.bin").read_bytes() == data


async def test_resending_a_chunk_with_different_bytes_is_a_conflict(server: Server) -> None:
    async with AsyncBlobstoreClient(server.url) as client:
        session = await client.begin_upload("c.bin", size=2 * CHUNK, chunk_size=CHUNK)
        await client.put_chunk(session.upload_id, 0, b"a" * CHUNK)

        with pytest.raises(ChunkConflict):
            await client.put_chunk(session.upload_id, 0, b"b" * CHUNK)

        await client.abort_upload(session.upload_id)
