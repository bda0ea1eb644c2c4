"""Download URLs that need no token until they expire: what SEP-2631's ``files/authorizeDownload`` answers
(:mod:`mcp_resources.files_capability`) and what the proxy passes to a tool's URL argument.

A presigned S3 URL where presigned downloads are on (``BLOBSTORE_S3_PRESIGN_DOWNLOADS``), else a signed
``/share/<namespace>/<artifact id>`` URL of ``blobstore serve`` (the console's share links: the same key,
:mod:`blobstore.signed_links`). Either lives ``BLOBSTORE_S3_PRESIGN_SECONDS``, never past the artifact's own
expiry, and points at ``BLOBSTORE_PUBLIC_URL``, else ``http://<host>:<port>`` of the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

import anyio.to_thread

from blobstore.models import Artifact, BlobInfo
from blobstore.service import ArtifactService
from blobstore.signed_links import LinkSigner
from blobstore.signed_targets import Signers

SHARE_PREFIX: Final = "/share"
"""The console's share links (``blobstore.api.console``), which serve a signed ``/share/<ns>/<id>``."""


@dataclass(frozen=True, slots=True)
class DownloadLink:
    url: str
    expires: datetime


class DownloadLinks:
    """Signed or presigned download URLs of one service's artifacts."""

    def __init__(self, service: ArtifactService) -> None:
        settings = service.settings
        self.service = service
        self.signers = Signers(settings.data_dir, settings.link_key)
        self.base = (settings.public_url or f"http://{settings.host}:{settings.port}").rstrip("/")
        self.lifetime = timedelta(seconds=settings.s3_presign_seconds)

    async def signer(self) -> LinkSigner:
        signer = self.signers.loaded
        if signer is None:
            signer = await anyio.to_thread.run_sync(self.signers.load)
        return signer

    def expiry(self) -> datetime:
        """When a link made now expires (before the artifact's own expiry, see :meth:`link`)."""
        return self.service.clock() + self.lifetime

    async def link(self, artifact: Artifact, blob: BlobInfo) -> DownloadLink:
        """A URL of the bytes of an artifact the caller has opened (so its namespace is checked)."""
        expires = self.expiry()
        if artifact.expires_at is not None:
            expires = min(expires, artifact.expires_at)
        url = await self.service.presigned_download(artifact, blob)
        if url is None:
            signed = (await self.signer()).sign(f"{SHARE_PREFIX}/{artifact.namespace}/{artifact.id}", expires)
            url = f"{self.base}{signed.target}"
        return DownloadLink(url, expires)


__all__ = ["SHARE_PREFIX", "DownloadLink", "DownloadLinks"]
