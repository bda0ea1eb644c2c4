"""Download URLs that need no token until they expire: what SEP-2631's ``files/authorizeDownload`` answers
(:mod:`mcp_resources.tools.files_capability`) and what the proxy passes to a tool's URL argument.

A presigned S3 URL where presigned downloads are on (``BLOBSTORE_S3_PRESIGN_DOWNLOADS``), else a signed
``/share/<namespace>/<artifact id>`` URL of ``blobstore serve`` (the console's share links: the same key and
rules, :mod:`blobstore.share_links`, so it names its minter and ends when the minting token does). Either
lives ``BLOBSTORE_S3_PRESIGN_SECONDS``, never past the artifact's own expiry nor the caller's token's, and
points at ``BLOBSTORE_PUBLIC_URL``, else ``http://<host>:<port>`` of the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from blobstore.models import Artifact, BlobInfo, Caller
from blobstore.service import ArtifactService
from blobstore.share_links import capped
from blobstore.signed_links import LinkSigner


@dataclass(frozen=True, slots=True)
class DownloadLink:
    url: str
    expires: datetime


class DownloadLinks:
    """Signed or presigned download URLs of one service's artifacts."""

    def __init__(self, service: ArtifactService) -> None:
        settings = service.settings
        self.service = service
        self.base = (settings.public_url or f"http://{settings.host}:{settings.port}").rstrip("/")
        self.lifetime = timedelta(seconds=settings.s3_presign_seconds)

    async def signer(self) -> LinkSigner:
        """The store's link signer (the key every replica shares), for signed upload targets."""
        return await self.service.share_links.keys.signer()

    def expiry(self) -> datetime:
        """When a link made now expires (before the artifact's own expiry, see :meth:`link`)."""
        return self.service.clock() + self.lifetime

    async def link(self, caller: Caller, artifact: Artifact, blob: BlobInfo) -> DownloadLink:
        """A URL of the bytes of an artifact ``caller`` has opened (so its namespace is checked)."""
        expires = capped(caller, self.expiry())
        if artifact.expires_at is not None:
            expires = min(expires, artifact.expires_at)
        url = await self.service.presigned_download(artifact, blob)
        if url is None:
            signed = await self.service.share_links.mint(caller, artifact, expires)
            url = f"{self.base}{signed.target}"
        return DownloadLink(url, expires)


__all__ = ["DownloadLink", "DownloadLinks"]
