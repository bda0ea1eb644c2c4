"""SEP-2631 "File Objects and Transfer", experimental: ``files/authorizeUpload``, ``files/authorizeDownload``.

Followed as the draft stands in ``docs/seps/2631-file-objects-and-transfer.mdx`` of
modelcontextprotocol/modelcontextprotocol at commit ``10eb22b1ddebbafd85bb87968c1d3fd00a7c2410`` (PR #2631).
On only with ``BLOBSTORE_MCP_FILES_CAPABILITY=experimental``; the server then advertises
``experimental.files = {upload, download, transports: ["https"]}`` (the draft defines the capability for
clients; the SDK's server capabilities have no ``files`` field, so it goes under ``experimental``).

- ``files/authorizeUpload {name, mimeType?, size, digest?}`` opens a tus upload of ``size`` bytes in the
  caller's namespace (with the digest's SHA-256 as the expected one) and answers
  ``{file: FileValue, upload: {transport, method: "PATCH", url, headers, expiresAt}}``: one ``PATCH`` of the
  whole body to the signed tus URL (:mod:`blobstore.signed_targets`) stores the artifact. The file URI is
  ``blobstore://files/<upload id>``: a file parameter takes it like ``{upload_id}``.
- ``files/authorizeDownload {uri}`` takes that file URI or an artifact URI and answers
  ``{file: FileValue, download: {transport, method: "GET", url, expiresAt}}``: a presigned S3 URL where
  presigned downloads are on, else a signed ``/share`` URL of ``blobstore serve`` (the console's share
  links, served while its console is on; :mod:`mcp_resources.tools.download_links`, which the proxy's URL
  arguments use too).

The targets point at the HTTP server: ``BLOBSTORE_PUBLIC_URL``, else ``http://<host>:<port>`` of the settings.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final

from mcp.server import Server, ServerRequestContext
from mcp.types import RequestParams, Result
from pydantic import BaseModel, Field

from blobstore.auth import require_scope
from blobstore.errors import InvalidRequest, NotFound
from blobstore.links import iso_utc
from blobstore.models import ARTIFACT_URI_PREFIX, Artifact, Caller, Scope, UploadState
from blobstore.service import ArtifactService
from blobstore.signed_targets import upload_target
from blobstore.tus_uploads import TusUploads
from mcp_resources.errors import mcp_handler
from mcp_resources.reading.resources import CallerResolver
from mcp_resources.tools.download_links import DownloadLinks
from mcp_resources.tools.file_params import FILE_URI_PREFIX
from mcp_resources.uris import parse_store_uri

EXPERIMENTAL: Final = "experimental"
CAPABILITY: Final = {"files": {"upload": True, "download": True, "transports": ["https"]}}
TUS_HEADERS: Final = {
    "Tus-Resumable": "1.0.0",
    "Upload-Offset": "0",
    "Content-Type": "application/offset+octet-stream",
}


class FileDigest(BaseModel):
    algorithm: str
    value: str
    """base64url of the digest, without padding."""


class AuthorizeUploadParams(RequestParams):
    name: str
    mime_type: str | None = None
    size: int = Field(ge=0)
    digest: FileDigest | None = None


class AuthorizeDownloadParams(RequestParams):
    uri: str


class AuthorizedFile(Result):
    file: dict[str, Any]
    upload: dict[str, Any] | None = None
    download: dict[str, Any] | None = None


def sha256_hex(digest: FileDigest) -> str:
    """The hex SHA-256 a SEP-2631 digest names; only ``sha-256`` is accepted."""
    if digest.algorithm.lower() != "sha-256":
        raise InvalidRequest("digest.algorithm must be sha-256", algorithm=digest.algorithm)
    try:
        raw = base64.urlsafe_b64decode(digest.value + "=" * (-len(digest.value) % 4))
    except (binascii.Error, ValueError):
        raise InvalidRequest("digest.value must be base64url") from None
    if len(raw) != 32:
        raise InvalidRequest("digest.value must be the 32 bytes of a SHA-256")
    return raw.hex()


def file_digest(sha256: str) -> dict[str, str]:
    return {
        "algorithm": "sha-256",
        "value": base64.urlsafe_b64encode(bytes.fromhex(sha256)).rstrip(b"=").decode(),
    }


def file_value(artifact: Artifact, uri: str) -> dict[str, Any]:
    return {
        "uri": uri,
        "name": artifact.name,
        "mimeType": artifact.mime_type,
        "size": artifact.size,
        "digest": file_digest(artifact.sha256),
    }


class FilesCapability:
    """The two methods for one server, as the caller the request resolves to."""

    def __init__(self, service: ArtifactService, caller_for: CallerResolver) -> None:
        self.service = service
        self.caller_for = caller_for
        settings = service.settings
        self.tus = TusUploads(
            settings=settings, uploads=service.uploads, repo=service.repo, clock=service.clock
        )
        self.links = DownloadLinks(service)

    def install(self, server: Server[Any]) -> None:
        server.add_request_handler("files/authorizeUpload", AuthorizeUploadParams, self.authorize_upload)
        server.add_request_handler(
            "files/authorizeDownload", AuthorizeDownloadParams, self.authorize_download
        )
        plain = server.get_capabilities

        def with_files(*args: Any, **kwargs: Any) -> Any:
            capabilities = plain(*args, **kwargs)
            merged = {**(capabilities.experimental or {}), **CAPABILITY}
            return capabilities.model_copy(update={"experimental": merged})

        # Both the handshake's and server/discover's capabilities are built by this method.
        server.get_capabilities = with_files  # type: ignore[method-assign]

    @mcp_handler
    async def authorize_upload(
        self, ctx: ServerRequestContext[Any, Any], params: AuthorizeUploadParams
    ) -> AuthorizedFile:
        caller = require_scope(self.caller_for(ctx), Scope.WRITE)
        sha256 = sha256_hex(params.digest) if params.digest is not None else None
        session = await self.tus.create(
            caller, length=params.size, name=params.name, mime_type=params.mime_type, sha256=sha256
        )
        expires = min(self.links.expiry(), session.expires_at)
        target = upload_target(await self.links.signer(), caller.namespace, session.id, expires)
        file: dict[str, Any] = {
            "uri": f"{FILE_URI_PREFIX}{session.id}",
            "name": params.name,
            "size": params.size,
        }
        if params.mime_type is not None:
            file["mimeType"] = params.mime_type
        if sha256 is not None:
            file["digest"] = file_digest(sha256)
        upload = {
            "transport": "https",
            "method": "PATCH",
            "url": f"{self.links.base}{target}",
            "headers": dict(TUS_HEADERS),
            "expiresAt": iso_utc(expires),
        }
        return AuthorizedFile(file=file, upload=upload)

    async def _artifact_for(self, caller: Caller, uri: str) -> Artifact:
        if uri.startswith(FILE_URI_PREFIX):
            session = await self.service.uploads.get(caller, uri[len(FILE_URI_PREFIX) :])
            if session.state is not UploadState.COMPLETED or session.artifact_id is None:
                raise InvalidRequest(f"the upload behind {uri} is {session.state.value}, not complete")
            return await self.service.get_artifact(caller, session.artifact_id)
        ref = parse_store_uri(uri) if uri.startswith(ARTIFACT_URI_PREFIX) else None
        if ref is None or ref.has_window:
            raise NotFound()
        return await self.service.get_artifact(caller, ref.artifact_id)

    @mcp_handler
    async def authorize_download(
        self, ctx: ServerRequestContext[Any, Any], params: AuthorizeDownloadParams
    ) -> AuthorizedFile:
        caller = require_scope(self.caller_for(ctx), Scope.READ)
        artifact = await self._artifact_for(caller, params.uri)
        _artifact, blob = await self.service.open_artifact(caller, artifact.id)
        link = await self.links.link(caller, artifact, blob)
        download = {
            "transport": "https",
            "method": "GET",
            "url": link.url,
            "expiresAt": iso_utc(link.expires),
        }
        return AuthorizedFile(file=file_value(artifact, params.uri), download=download)


__all__ = ["CAPABILITY", "EXPERIMENTAL", "FILE_URI_PREFIX", "AuthorizedFile", "FilesCapability"]
