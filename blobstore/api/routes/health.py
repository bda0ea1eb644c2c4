"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from blobstore.api.deps import ServiceDep
from blobstore.errors import BlobstoreError

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database and the storage are reachable")
async def readyz(service: ServiceDep) -> JSONResponse:
    checks: dict[str, Any] = {}
    details: dict[str, str] = {}
    for name, check in (("database", service.repo.check), ("storage", service.blobs.check)):
        try:
            await check()
        except BlobstoreError as exc:
            checks[name] = exc.code
            if exc.message != exc.default_message:
                # e.g. which S3 bucket at which endpoint, and the backend's error code; never credentials.
                details[name] = exc.message
        else:
            checks[name] = "ok"
    ready = all(value == "ok" for value in checks.values())
    body: dict[str, Any] = {"status": "ok" if ready else "unavailable", "checks": checks}
    if details:
        body["details"] = details
    return JSONResponse(body, status_code=200 if ready else 503)
