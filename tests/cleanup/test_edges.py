"""An expired artifact answers "not found" on HTTP and MCP the moment it expires, before cleanup runs."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from blobstore.api import create_app
from blobstore.cleanup import run_cleanup
from blobstore.models import Caller
from blobstore.runtime import cleanup_parts
from blobstore.service import ArtifactService
from mcp_resources.transports.server import create_server, fixed_caller
from tests.cleanup.helpers import FakeClock, artifact_rows, upload
from tests.fixtures.asgi import app_client


async def test_expired_artifact_is_not_found_over_http_before_cleanup(
    service: ArtifactService, caller: Caller, clock: FakeClock
) -> None:
    caller = Caller(namespace=service.settings.mcp_namespace)
    artifact = await upload(service, caller, b"http bytes" * 50, ttl_seconds=30)
    app = create_app(service.settings, service=service)
    async with app_client(app) as http:
        content = f"/v1/artifacts/{artifact.id}/content"
        assert (await http.get(content)).content == b"http bytes" * 50
        clock.advance(30)
        assert len(await artifact_rows(service)) == 1
        for response in (
            await http.get(f"/v1/artifacts/{artifact.id}"),
            await http.get(content),
            await http.head(content),
            await http.get(content, headers={"Range": "bytes=0-3"}),
        ):
            assert response.status_code == 404
        await run_cleanup(cleanup_parts(service))
        assert (await http.get(content)).status_code == 404


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_expired_artifact_is_not_found_over_mcp_before_cleanup(
    service: ArtifactService, caller: Caller, clock: FakeClock, mode: str
) -> None:
    artifact = await upload(service, caller, b"mcp bytes" * 50, mime_type="text/plain", ttl_seconds=30)
    server = create_server(service, caller_for=fixed_caller(caller))
    async with Client(server, mode=mode) as client:
        listed = await client.list_resources()
        assert artifact.uri in {str(resource.uri) for resource in listed.resources}
        assert (await client.read_resource(artifact.uri, cache_mode="bypass")).contents
        clock.advance(30)
        for uri in (artifact.uri, f"{artifact.uri}?offset=0&length=10"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri, cache_mode="bypass")
            assert (caught.value.code, caught.value.message) == (-32602, "Resource not found")
        listed = await client.list_resources()
        assert artifact.uri not in {str(resource.uri) for resource in listed.resources}
