"""Liveness and readiness probes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from blobstore.api.deps import RuntimeDep
from blobstore.errors import BlobstoreError, StorageFull

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database and the storage are reachable, and whether they are full")
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    checks: dict[str, Any] = {}
    details: dict[str, str] = {}
    for name, check in (("database", runtime.repo.check), ("storage", runtime.blobs.check)):
        try:
            await check()
        except BlobstoreError as exc:
            checks[name] = exc.code
            if exc.message != exc.default_message:
                # e.g. which S3 bucket at which endpoint, and the backend's error code; never credentials.
                details[name] = exc.message
        else:
            checks[name] = "ok"
    if all(value == "ok" for value in checks.values()):
        status, code = "ok", 200
    elif all(value in {"ok", StorageFull.code} for value in checks.values()):
        # Full, yet reads and deletes (the way out) still work: stay in rotation, say so in the status.
        status, code = StorageFull.code, 200
    else:
        status, code = "unavailable", 503
    body: dict[str, Any] = {"status": status, "checks": checks}
    if details:
        body["details"] = details
    return JSONResponse(body, status_code=code)
