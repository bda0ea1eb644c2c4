"""The console's pages: login, browse, one artifact (preview, facts, share, pin, delete), upload, operate.

Every page acts for the session's caller (:mod:`blobstore.api.console.session`) through the service, as the
API routes do, so a foreign namespace's artifact is not found here either. Every change is a form POST with
the CSRF token, answered by a redirect (or the page with its result).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final, Protocol, runtime_checkable

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Match

from blobstore import metrics
from blobstore.api.console import present
from blobstore.api.console.pages import render
from blobstore.api.console.session import (
    COOKIE_NAME,
    COOKIE_PATH,
    LoginRequired,
    Session,
    check_csrf,
    check_origin,
    new_local_cookie,
    open_session,
    origin_of,
)
from blobstore.api.console.state import console_state
from blobstore.api.console.thumbnails import EDGES, MAX_SOURCE_BYTES, NoThumbnail, make_thumbnail_async
from blobstore.api.deps import app_state, base_url
from blobstore.api.routes import health
from blobstore.api.routes.artifacts import serve_content
from blobstore.auth import parse_expiry, require_scope, token_state
from blobstore.cleanup import run_cleanup
from blobstore.errors import BlobstoreError, InvalidRequest, NotFound, Unauthorized
from blobstore.models import Artifact, ArtifactFilter, BlobInfo, Caller, Scope
from blobstore.service import ArtifactService, decode_cursor, encode_cursor
from blobstore.views.engine import views_for

router = APIRouter(prefix="/console", include_in_schema=False)
share_router = APIRouter(include_in_schema=False)

PAGE_SIZE: Final = 50
MAX_SHARE: Final = timedelta(days=30)
MAX_PRESIGN_SECONDS: Final = 7 * 24 * 3600
"""The longest a presigned S3 URL (SigV4) may live."""
SHARE_PREFIX: Final = "/share"
PDF_PAGE_PROBE: Final = "/v1/artifacts/a_probe/pages/1.png"

Form1 = Annotated[str | None, Form()]


@runtime_checkable
class _Presigns(Protocol):
    async def presigned_url(
        self, blob: BlobInfo, *, expires_in: int, filename: str | None = None, content_type: str | None = None
    ) -> str: ...


def _service(request: Request) -> ArtifactService:
    return app_state(request.app).service


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


async def _session(request: Request, scope: Scope = Scope.READ) -> Session:
    session = await open_session(request)
    require_scope(session.caller, scope)
    return session


async def _changing(request: Request, csrf: str | None, scope: Scope = Scope.WRITE) -> Session:
    session = await _session(request, scope)
    await check_csrf(console_state(request.app), request, session.cookie, csrf)
    return session


def _bounded(value: str | None, name: str, limit: int) -> str | None:
    text = (value or "").strip()
    if len(text) > limit:
        raise InvalidRequest(f"{name} is at most {limit} characters")
    return text or None


# -- login ------------------------------------------------------------------------------------------------


async def _local_mode_open(request: Request) -> bool:
    authenticator = app_state(request.app).runtime.authenticator
    client = request.client.host if request.client else None
    try:
        await authenticator.authenticate(None, client_host=client)
    except Unauthorized:
        return False
    return True


@router.get("")
async def console_root() -> RedirectResponse:
    return _redirect("/console/artifacts")


@router.get("/login")
async def login_page(request: Request) -> HTMLResponse:
    return render(request, "login.html", None, local_mode=await _local_mode_open(request))


@router.post("/login")
async def login(request: Request, token: Form1 = None, local: Form1 = None) -> Response:
    # No session yet, so no CSRF token: a login posted from another site is refused by its origin.
    check_origin(request.headers, origin_of(request))
    authenticator = app_state(request.app).runtime.authenticator
    client = request.client.host if request.client else None
    if local and not token:
        if not await _local_mode_open(request):
            return render(request, "login.html", None, status=401, local_mode=False, error="tokens exist")
        cookie = new_local_cookie()
    else:
        cookie = (token or "").strip()
        try:
            await authenticator.authenticate(f"Bearer {cookie}", client_host=client)
        except Unauthorized as exc:
            local_mode = await _local_mode_open(request)
            return render(request, "login.html", None, status=401, local_mode=local_mode, error=exc.message)
    response = _redirect("/console/artifacts")
    response.set_cookie(
        COOKIE_NAME,
        cookie,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=COOKIE_PATH,
    )
    return response


@router.post("/logout")
async def logout(request: Request, csrf: Form1 = None) -> Response:
    await _changing(request, csrf, Scope.READ)
    response = _redirect("/console/login")
    response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


# -- browse -----------------------------------------------------------------------------------------------


@router.get("/artifacts")
async def browse(
    request: Request,
    ns: Annotated[str | None, Query()] = None,
    mime: Annotated[str | None, Query()] = None,
    prefix: Annotated[str | None, Query()] = None,
    q: Annotated[str | None, Query()] = None,
    upstream: Annotated[str | None, Query()] = None,
    tool: Annotated[str | None, Query()] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> HTMLResponse:
    session = await _session(request)
    caller = session.caller
    service = _service(request)
    by_metadata = {
        key: value
        for key, value in (
            ("upstream", _bounded(upstream, "upstream", 256)),
            ("tool", _bounded(tool, "tool", 256)),
        )
        if value is not None
    }
    where = ArtifactFilter(
        mime=_bounded(mime, "mime", 255),
        name_prefix=_bounded(prefix, "prefix", 1024),
        search=_bounded(q, "q", 256),
        metadata=by_metadata,
    )
    after = decode_cursor(cursor) if cursor else None
    # A token sees its own namespace only: another one named here simply holds nothing for it.
    items: list[Artifact] = []
    if ns in (None, "", caller.namespace):
        items = await service.repo.browse_artifacts(
            caller.namespace, now=service.clock(), limit=PAGE_SIZE + 1, after=after, where=where
        )
    more = len(items) > PAGE_SIZE
    items = items[:PAGE_SIZE]
    filters = {"ns": ns, "mime": mime, "prefix": prefix, "q": q, "upstream": upstream, "tool": tool}
    next_query = None
    if more and items:
        next_query = {**{k: v for k, v in filters.items() if v}, "cursor": encode_cursor(items[-1])}
    return render(
        request,
        "artifacts.html",
        session,
        items=items,
        now=service.clock(),
        filters=filters,
        next_query=next_query,
        first_page=cursor is None,
    )


# -- one artifact -----------------------------------------------------------------------------------------


def _pdf_pages_served(request: Request) -> bool:
    """Whether this app renders PDF pages (the media views' routes), asked of its router."""
    probe = {"type": "http", "method": "GET", "path": PDF_PAGE_PROBE, "root_path": "", "headers": []}
    return any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes)


async def _artifact_page(
    request: Request, session: Session, artifact_id: str, *, status: int = 200, **extra: Any
) -> HTMLResponse:
    service = _service(request)
    artifact = await service.get_artifact(session.caller, artifact_id)
    kind = present.preview_kind(artifact)
    head_text = head_hex = None
    head_length = 0
    if kind in {"text", "hex"} and artifact.size:
        limit = present.TEXT_HEAD if kind == "text" else present.HEX_HEAD
        _, win, data = await service.read_window(session.caller, artifact.id, 0, limit)
        head_length = win.length
        if kind == "text":
            head_text = present.text_head(data, artifact.mime_type)
        else:
            head_hex = present.hex_lines(data)
    pdf_facts: dict[str, Any] = {}
    pdf_pages = kind == "pdf" and _pdf_pages_served(request)
    if pdf_pages:
        views = views_for(service)
        try:
            pdf_facts = await views.facts(await views.open(session.caller, artifact.id, kinds=("pdf",)))
        except BlobstoreError as exc:
            if exc.code == NotFound.code:
                raise
            pdf_pages = False  # a PDF its decoder refuses: its facts and the download only
    base = await base_url(request)
    return render(
        request,
        "artifact.html",
        session,
        status=status,
        artifact=artifact,
        kind=kind,
        now=service.clock(),
        head_text=head_text,
        head_hex=head_hex,
        head_length=head_length,
        pdf_pages=pdf_pages,
        page_count=int(pdf_facts.get("pages") or 1),
        text_layer=pdf_facts.get("text_layer"),
        metadata_rows=present.metadata_rows(artifact.metadata),
        media_rows=present.metadata_rows(artifact.media),
        resource_link=present.resource_link_json(artifact),
        curl=present.curl_command(artifact, base, with_token=not session.is_local),
        **extra,
    )


@router.get("/artifacts/{artifact_id}")
async def artifact_page(request: Request, artifact_id: str) -> HTMLResponse:
    return await _artifact_page(request, await _session(request), artifact_id)


@router.get("/artifacts/{artifact_id}/thumbnail")
async def thumbnail(request: Request, artifact_id: str, edge: Annotated[int, Query()] = EDGES[0]) -> Response:
    session = await _session(request)
    if edge not in EDGES:
        raise InvalidRequest(f"edge must be one of {', '.join(map(str, EDGES))}")
    service = _service(request)
    artifact = await service.get_artifact(session.caller, artifact_id)
    if not present.has_thumbnail(artifact) or artifact.size > MAX_SOURCE_BYTES:
        raise NotFound("this artifact has no thumbnail")
    cache = console_state(request.app).thumbnails
    key = (artifact.namespace, artifact.sha256, edge)
    made = cache.get(key)
    if made is None:
        _, data = await service.read_all(session.caller, artifact.id, limit=MAX_SOURCE_BYTES)
        try:
            made = await make_thumbnail_async(data, edge)
        except NoThumbnail:
            raise NotFound("this artifact has no thumbnail") from None
        cache.put(key, made)
    return Response(
        made.data,
        media_type=made.mime_type,
        headers={"cache-control": "private, max-age=86400", "etag": f'"{artifact.sha256[:32]}-{edge}"'},
    )


@router.get("/artifacts/{artifact_id}/verify")
async def verify(request: Request, artifact_id: str) -> JSONResponse:
    """Read the whole artifact through the verified read path (every block against its XXH3) and hash it."""
    session = await _session(request)
    service = _service(request)
    artifact, blob = await service.open_artifact(session.caller, artifact_id)
    digest = hashlib.sha256()
    async for piece in service.stream(blob):
        digest.update(piece)
    return JSONResponse(
        {
            "blocks_verified": len(blob.block_xxh3),
            "block_size": blob.block_size,
            "sha256_matches": digest.hexdigest() == artifact.sha256,
        }
    )


@router.get("/artifacts/{artifact_id}/twins")
async def twins(request: Request, artifact_id: str) -> JSONResponse:
    """Other artifacts of the namespace over the same content: an upload that finds some was already stored
    (dedup across namespaces is never shown)."""
    session = await _session(request)
    service = _service(request)
    artifact = await service.get_artifact(session.caller, artifact_id)
    found = await service.repo.find_artifacts_with_content(
        session.caller.namespace, artifact.sha256, now=service.clock(), limit=6
    )
    others = [{"id": item.id, "name": item.name} for item in found if item.id != artifact.id][:5]
    return JSONResponse({"already_stored": bool(others), "others": others})


def _share_expiry(text: str | None, now: datetime) -> datetime:
    moment = parse_expiry(text or "1h", now)
    if moment - now > MAX_SHARE:
        raise InvalidRequest("a share link lives at most 30 days")
    return moment


async def share_url(request: Request, caller: Caller, artifact_id: str, expires: datetime) -> str:
    """A link to the artifact's bytes that needs no token until ``expires``: a presigned S3 URL where
    direct downloads are on, else a signed ``/share`` URL of this server."""
    service = _service(request)
    artifact, blob = await service.open_artifact(caller, artifact_id)
    seconds = max(1, int((expires - service.clock()).total_seconds()))
    blobs = service.blobs
    if service.settings.s3_presign_downloads and isinstance(blobs, _Presigns):
        return await blobs.presigned_url(
            blob,
            expires_in=min(seconds, MAX_PRESIGN_SECONDS),
            filename=artifact.name,
            content_type=artifact.mime_type,
        )
    signer = await console_state(request.app).signer()
    link = signer.sign(f"{SHARE_PREFIX}/{artifact.namespace}/{artifact.id}", expires)
    return f"{await base_url(request)}{link.target}"


@router.post("/artifacts/{artifact_id}/share")
async def share(
    request: Request, artifact_id: str, csrf: Form1 = None, expires: Form1 = None
) -> HTMLResponse:
    session = await _changing(request, csrf, Scope.READ)
    service = _service(request)
    moment = _share_expiry(expires, service.clock())
    url = await share_url(request, session.caller, artifact_id, moment)
    service.audit.record(
        actor=session.caller.actor,
        namespace=session.caller.namespace,
        action="share",
        result="ok",
        artifact_id=artifact_id,
        extra={"expires_at": moment.astimezone(UTC).isoformat()},
    )
    return await _artifact_page(request, session, artifact_id, share_link=url, share_expires=moment)


@router.post("/artifacts/{artifact_id}/pin")
async def pin(request: Request, artifact_id: str, csrf: Form1 = None, pinned: Form1 = None) -> Response:
    session = await _changing(request, csrf)
    keep = pinned == "1"
    await _service(request).update_artifact(session.caller, artifact_id, pinned=keep)
    return _redirect(f"/console/artifacts/{artifact_id}")


@router.post("/artifacts/{artifact_id}/delete")
async def delete(request: Request, artifact_id: str, csrf: Form1 = None) -> Response:
    session = await _changing(request, csrf)
    await _service(request).delete_artifact(session.caller, artifact_id)
    return _redirect("/console/artifacts")


# -- upload -----------------------------------------------------------------------------------------------


@router.get("/upload")
async def upload_page(request: Request) -> HTMLResponse:
    session = await _session(request, Scope.WRITE)
    return render(request, "upload.html", session)


# -- operate (admin) --------------------------------------------------------------------------------------


def _total(metric: Any) -> float:
    return float(
        sum(
            sample.value
            for family in metric.collect()
            for sample in family.samples
            if sample.name.endswith("_total")
        )
    )


async def _operate_page(request: Request, session: Session, **extra: Any) -> HTMLResponse:
    runtime = app_state(request.app).runtime
    service = runtime.service
    now = service.clock()
    ready = json.loads(bytes((await health.readyz(runtime)).body))
    tokens = await runtime.repo.list_tokens()
    return render(
        request,
        "operate.html",
        session,
        usage=await runtime.repo.usage_by_namespace(now=now),
        uploads=await runtime.repo.list_open_uploads(),
        tokens=[(record, token_state(record, now)) for record in tokens],
        ready=ready,
        stats=await runtime.repo.stats(now=now),
        headline={
            "HTTP requests": int(_total(metrics.HTTP_REQUESTS)),
            "bytes received": int(_total(metrics.BYTES_IN)),
            "bytes sent": int(_total(metrics.BYTES_OUT)),
            "storage errors": int(_total(metrics.STORAGE_ERRORS)),
            "integrity failures": int(_total(metrics.INTEGRITY_FAILURES)),
        },
        now=now,
        key_from_setting=service.settings.link_key is not None,
        **extra,
    )


@router.get("/operate")
async def operate(request: Request) -> HTMLResponse:
    return await _operate_page(request, await _session(request, Scope.ADMIN))


@router.post("/operate/cleanup")
async def cleanup(request: Request, csrf: Form1 = None, run: Form1 = None) -> HTMLResponse:
    session = await _changing(request, csrf, Scope.ADMIN)
    report = await run_cleanup(_service(request), dry_run=run != "1")
    return await _operate_page(request, session, report=report)


@router.post("/operate/tokens/{token_id}/revoke")
async def revoke(request: Request, token_id: str, csrf: Form1 = None) -> Response:
    await _changing(request, csrf, Scope.ADMIN)
    runtime = app_state(request.app).runtime
    if not await runtime.repo.revoke_token(token_id, now=runtime.service.clock()):
        raise NotFound("no such token, or it is revoked already")
    runtime.authenticator.forget()
    return _redirect("/console/operate")


@router.post("/operate/link-key")
async def rotate_link_key(request: Request, csrf: Form1 = None) -> Response:
    await _changing(request, csrf, Scope.ADMIN)
    await console_state(request.app).rotate()
    # The CSRF token of this page was derived from the old key: the next page carries a new one.
    return _redirect("/console/operate")


# -- shared links -----------------------------------------------------------------------------------------


@share_router.api_route(f"{SHARE_PREFIX}/{{namespace}}/{{artifact_id}}", methods=["GET", "HEAD"])
async def shared_content(request: Request, namespace: str, artifact_id: str) -> Response:
    """The bytes behind a signed share link, for anyone holding it until it expires (``Range`` and
    conditional requests as on the content route); 403 once expired, altered or revoked."""
    service = _service(request)
    signer = await console_state(request.app).signer()
    params = request.query_params
    signer.verify(request.url.path, params.get("expires"), params.get("sig"), now=service.clock())
    caller = Caller(namespace=namespace, actor="link", scopes=frozenset({Scope.READ}))
    return await serve_content(request, caller)


def login_redirect(_request: Request, _exc: Exception) -> Response:
    return _redirect("/console/login")


__all__ = ["LoginRequired", "login_redirect", "router", "share_router"]
