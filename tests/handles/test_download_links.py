"""Download links of the MCP edge (``files/authorizeDownload``, the proxy's URL arguments) follow the share
links' rules: they name the token that made them, never outlive it, and stop once it is revoked."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from blobstore.auth import Authenticator, create_token
from blobstore.errors import LinkRefused
from blobstore.models import Scope
from blobstore.service import ArtifactService
from mcp_resources.tools.download_links import DownloadLinks
from tests.handles.conftest import put


async def test_a_download_link_is_capped_at_its_tokens_expiry_and_ends_with_it(
    service: ArtifactService,
) -> None:
    ends = service.clock() + timedelta(seconds=100)  # sooner than BLOBSTORE_S3_PRESIGN_SECONDS (300)
    issued = await create_token(
        service.repo, namespace="tools", scopes=frozenset({Scope.READ}), expires_at=ends
    )
    caller = await Authenticator(service.repo, allow_local=False).authenticate(f"Bearer {issued.token}")
    assert caller.expires_at == ends
    artifact = await put(service, b"bytes for a tool", "input.bin")
    _, blob = await service.open_artifact(caller, artifact.id)

    link = await DownloadLinks(service).link(caller, artifact, blob)

    assert link.expires == ends
    url = urlsplit(link.url)
    params = {key: values[0] for key, values in parse_qs(url.query).items()}
    assert url.path == f"/share/tools/{artifact.id}"
    assert params["by"] == issued.record.id
    assert int(params["expires"]) <= ends.timestamp()
    served_as = await service.share_links.check("tools", artifact.id, params)
    assert served_as.scopes == frozenset({Scope.READ})
    assert await service.repo.revoke_token(issued.record.id, now=service.clock())
    with pytest.raises(LinkRefused, match="revoked or expired"):
        await service.share_links.check("tools", artifact.id, params)
