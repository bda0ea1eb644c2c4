"""MCP uploads on an S3 endpoint without UploadPartCopy (s3rver) and PostgreSQL."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from blobstore.config import Settings
from blobstore.runtime import open_service
from mcp_resources.transports.server import create_server, fixed_caller
from tests.mcp.conftest import CALLER

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


async def test_a_10_mib_upload_commit_succeeds_on_s3rver(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=request.getfixturevalue("pg_url"),
        storage_url=request.getfixturevalue("s3rver_storage_url"),
        s3_endpoint_url=request.getfixturevalue("s3rver_endpoint_url"),
    )
    data = os.urandom(10 * MiB)
    digest = hashlib.sha256(data).hexdigest()
    async with open_service(settings, migrate=True) as service:
        server = create_server(service, caller_for=fixed_caller(CALLER))
        async with Client(server) as client:
            begun = await client.call_tool("upload_begin", {"name": "ten.bin", "size": len(data)})
            facts: dict[str, Any] = begun.structured_content or {}
            chunk = facts["chunk_size"]
            for index in range(facts["chunk_count"]):
                piece = data[index * chunk : (index + 1) * chunk]
                sent = await client.call_tool(
                    "upload_chunk",
                    {
                        "upload_id": facts["upload_id"],
                        "index": index,
                        "data": base64.b64encode(piece).decode(),
                    },
                )
                assert not sent.is_error, sent.content
            committed = await client.call_tool(
                "upload_commit", {"upload_id": facts["upload_id"], "sha256": digest}
            )
        assert not committed.is_error, committed.content
        stored = committed.structured_content or {}
        assert (stored["sha256"], stored["size"]) == (digest, len(data))
        _artifact, blob = await service.open_artifact(CALLER, stored["artifact_id"])
        assert b"".join([piece async for piece in service.stream(blob)]) == data
