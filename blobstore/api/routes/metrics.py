"""``GET /metrics``: the process's Prometheus metrics (:mod:`blobstore.metrics`).

Mounted only when ``BLOBSTORE_METRICS=true``. It needs the ``admin`` scope: once a token exists, a scraper
sends an admin token; in local mode (no token) loopback clients hold every scope, as for the rest of the API.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from blobstore import metrics
from blobstore.api.deps import RuntimeDep, require
from blobstore.models import Caller, Scope

router = APIRouter(tags=["metrics"])


@router.get("/metrics", summary="Prometheus metrics of this process (admin scope)")
async def get_metrics(
    runtime: RuntimeDep, _caller: Annotated[Caller, Depends(require(Scope.ADMIN))]
) -> Response:
    metrics.UPLOADS_OPEN.set(await runtime.repo.count_all_open_uploads())
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)
