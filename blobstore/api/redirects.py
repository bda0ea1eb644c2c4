"""Download redirects to presigned S3 URLs (``BLOBSTORE_S3_PRESIGN_DOWNLOADS``).

A plain ``GET`` of the whole content, or of one byte range, is answered ``307 Temporary Redirect`` to a GET
URL of the blob's generation, presigned for ``BLOBSTORE_S3_PRESIGN_SECONDS``, after the same authorisation and
visibility checks as any download. ``307`` rather than ``302``: the client must repeat the same method (and
its ``Range``), and nobody may treat the short-lived URL as the resource's place. S3 then answers the
``Range`` itself, with the ``Content-Disposition`` and ``Content-Type`` the API would send.

Everything else stays on the API: ``HEAD`` (no bytes to move), requests with ``If-None-Match``,
``If-Modified-Since``, ``If-Match`` or ``If-Unmodified-Since`` (S3 would compare its own ``ETag`` and
modification time, which are not the artifact's: a deduplicated artifact is newer than its blob), an
``If-Range`` that failed, several ranges (S3 serves one) and ``offset``/``length`` windows (their headers are
the API's). An ``If-Range`` that matched is settled here; the follower sends the ``Range`` on.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import Response

from blobstore.api.conditional import DownloadPlan, Outcome
from blobstore.models import Artifact, BlobInfo
from blobstore.service import ArtifactService

_VALIDATED = ("if-none-match", "if-modified-since", "if-match", "if-unmodified-since")
"""Preconditions the storage would judge by its own validators: such requests stay on the API."""


def redirectable(method: str, headers: Mapping[str, str], plan: DownloadPlan) -> bool:
    if method != "GET" or any(name in headers for name in _VALIDATED):
        return False
    if plan.outcome is Outcome.FULL:
        # An If-Range that failed asks for the whole body; a follower would send its Range on to the storage.
        return "if-range" not in headers
    # One range (an If-Range already matched here): the storage answers the same Range.
    return plan.outcome is Outcome.PARTIAL and "," not in headers.get("range", "")


async def presigned_redirect(
    service: ArtifactService,
    artifact: Artifact,
    blob: BlobInfo,
    plan: DownloadPlan,
    *,
    method: str,
    headers: Mapping[str, str],
) -> Response | None:
    """The redirect for this download, or None when the API serves it itself."""
    if not redirectable(method, headers, plan):
        return None
    url = await service.presigned_download(artifact, blob)
    if url is None:
        return None
    # The URL is a bearer capability until it expires: no cache may keep or share the redirect.
    return Response(status_code=307, headers={"location": url, "cache-control": "no-store"})
