"""Direct transfers with the storage (S3) through the presigned URLs a server offers.

The URLs are capabilities in themselves: requests to them go through a client of their own that carries no
``Authorization`` header, so the bearer token never reaches the storage host. Part ``n`` of a direct upload is
chunk ``n - 1`` of the file; an expired URL (``403``) is replaced by a fresh one from the API and tried again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from blobstore.client.api import BlobstoreApi
from blobstore.client.chunks import ChunkFeed, send_indexed
from blobstore.client.retry import RetryableResponse, call_with_retries, is_retryable_status
from blobstore.errors import StorageUnavailable

PARTS_PER_REQUEST = 1000


def new_direct_http(timeout: float, parallel: int) -> httpx.AsyncClient:
    """The client for presigned URLs: no base URL, no token, no redirects."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        limits=httpx.Limits(max_connections=max(parallel * 2, 10)),
    )


def part_urls(offer: dict[str, Any] | None) -> dict[int, str]:
    if not offer:
        return {}
    return {int(part["part_number"]): str(part["url"]) for part in offer.get("parts", [])}


class DirectSender:
    """PUTs the parts of one direct upload to their presigned URLs, up to ``parallel`` at a time."""

    def __init__(
        self, api: BlobstoreApi, http: httpx.AsyncClient, upload_id: str, urls: dict[int, str]
    ) -> None:
        self.api = api
        self.http = http
        self.upload_id = upload_id
        self.urls = urls
        self.etags: dict[int, str] = {}
        """What the storage answered each part's PUT with: the completion names the parts by them."""

    async def _refresh(self, numbers: list[int]) -> None:
        for start in range(0, len(numbers), PARTS_PER_REQUEST):
            offer = await self.api.direct_parts(self.upload_id, numbers[start : start + PARTS_PER_REQUEST])
            self.urls.update(part_urls(offer))

    async def _put(self, number: int, data: bytes) -> None:
        async def attempt() -> None:
            response = await self.http.put(self.urls[number], content=data)
            if response.status_code == httpx.codes.FORBIDDEN:
                # Most likely expired: one fresh URL, then the answer stands.
                await self._refresh([number])
                response = await self.http.put(self.urls[number], content=data)
            if response.is_success:
                self.etags[number] = response.headers.get("etag", "")
                return
            if is_retryable_status(response):
                raise RetryableResponse(response)
            raise StorageUnavailable(f"the storage refused part {number} ({response.status_code})")

        # Only scheme and host name the storage in messages: the URL's query is the signature.
        where = httpx.URL(self.urls[number]).copy_with(path="/", query=None)
        await call_with_retries(self.api.retry, str(where).rstrip("/"), attempt)

    async def send(self, indexes: Iterable[int], feed: ChunkFeed) -> None:
        todo = list(indexes)
        await self._refresh([index + 1 for index in todo if index + 1 not in self.urls])

        async def put(index: int, data: bytes, _digest: str) -> None:
            await self._put(index + 1, data)

        await send_indexed(todo, feed, put)
