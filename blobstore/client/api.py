"""One method per endpoint of the HTTP API, each retried by the policy; no transfer logic here."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

import httpx

from blobstore.client.problems import error_from_response
from blobstore.client.results import ArtifactInfo, ArtifactPage, UploadSessionInfo, UploadStatusInfo
from blobstore.client.retry import RetryableResponse, RetryPolicy, call_with_retries, is_retryable_status
from blobstore.digests import xxh3_hex


def content_digest(data: bytes | memoryview) -> str:
    """RFC 9530 ``Content-Digest`` value for ``data``: ``sha-256=:<base64>:``."""
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")
    return f"sha-256=:{digest}:"


class BlobstoreApi:
    def __init__(self, http: httpx.AsyncClient, base_url: str, retry: RetryPolicy) -> None:
        self.http = http
        self.base_url = base_url
        self.retry = retry

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send with retries; a non-2xx answer raises the catalogue error its problem body names."""

        async def attempt() -> httpx.Response:
            response = await self.http.request(
                method, path, json=json, content=content, params=params, headers=headers
            )
            if response.is_success:
                return response
            if is_retryable_status(response):
                raise RetryableResponse(response)
            raise error_from_response(response)

        return await call_with_retries(self.retry, self.base_url, attempt)

    # -- chunked uploads -----------------------------------------------------------------------------------

    async def begin_upload(
        self,
        name: str,
        *,
        mime_type: str | None = None,
        size: int | None = None,
        sha256: str | None = None,
        chunk_size: int | None = None,
        ttl_seconds: int | None = None,
        metadata: dict[str, Any] | None = None,
        direct: bool = False,
    ) -> UploadSessionInfo:
        body: dict[str, Any] = {"name": name}
        if direct:
            body["direct"] = True
        optional = {
            "mime_type": mime_type,
            "size": size,
            "sha256": sha256,
            "chunk_size": chunk_size,
            "ttl_seconds": ttl_seconds,
            "metadata": metadata,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        response = await self.request("POST", "/v1/uploads", json=body)
        return UploadSessionInfo.from_json(response.json())

    async def put_chunk(self, upload_id: str, index: int, data: bytes, *, xxh3: str | None = None) -> None:
        """Send chunk ``index`` with its ``X-Chunk-XXH3``; ``xxh3`` when already computed off the loop.

        XXH3 rather than a SHA-256 ``Content-Digest``: it catches a chunk damaged on the way at a fraction of
        the cost, and the artifact's SHA-256, declared at the start or the completion, covers every byte.
        """
        await self.request(
            "PUT",
            f"/v1/uploads/{upload_id}/chunks/{index}",
            content=data,
            headers={
                "X-Chunk-XXH3": xxh3 or xxh3_hex(data),
                "Content-Type": "application/octet-stream",
            },
        )

    async def direct_parts(self, upload_id: str, part_numbers: list[int]) -> dict[str, Any]:
        """Fresh presigned URLs for parts of a direct upload (the JSON ``DirectPartsOut``)."""
        response = await self.request(
            "POST", f"/v1/uploads/{upload_id}/parts", json={"part_numbers": part_numbers}
        )
        offer: dict[str, Any] = response.json()
        return offer

    async def upload_status(self, upload_id: str) -> UploadStatusInfo:
        response = await self.request("GET", f"/v1/uploads/{upload_id}")
        return UploadStatusInfo.from_json(response.json())

    async def complete_upload(
        self, upload_id: str, sha256: str | None = None, part_etags: Mapping[int, str] | None = None
    ) -> ArtifactInfo:
        body: dict[str, Any] = {"sha256": sha256} if sha256 is not None else {}
        if part_etags:
            body["parts"] = [{"part_number": n, "etag": etag} for n, etag in sorted(part_etags.items())]
        response = await self.request("POST", f"/v1/uploads/{upload_id}/complete", json=body)
        return ArtifactInfo.from_json(response.json())

    async def abort_upload(self, upload_id: str) -> None:
        await self.request("DELETE", f"/v1/uploads/{upload_id}")

    # -- artifacts -----------------------------------------------------------------------------------------

    async def get_artifact(self, artifact_id: str) -> ArtifactInfo:
        response = await self.request("GET", f"/v1/artifacts/{artifact_id}")
        return ArtifactInfo.from_json(response.json())

    async def list_artifacts(self, *, limit: int | None = None, cursor: str | None = None) -> ArtifactPage:
        params: dict[str, str | int] = {}
        if limit is not None:
            params["limit"] = limit
        if cursor is not None:
            params["cursor"] = cursor
        body = (await self.request("GET", "/v1/artifacts", params=params)).json()
        items = [ArtifactInfo.from_json(item) for item in body.get("items", [])]
        return ArtifactPage(items, body.get("next_cursor"))

    async def update_artifact(self, artifact_id: str, changes: dict[str, Any]) -> ArtifactInfo:
        response = await self.request("PATCH", f"/v1/artifacts/{artifact_id}", json=changes)
        return ArtifactInfo.from_json(response.json())

    async def delete_artifact(self, artifact_id: str) -> None:
        await self.request("DELETE", f"/v1/artifacts/{artifact_id}")
