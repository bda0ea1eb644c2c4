"""The console's pages: login, browse, one artifact (preview, facts, share, pin, delete), upload, operate.

Every page acts for the session's caller (:mod:`blobstore.api.console.session`) through the service, as the
API routes do, so a foreign namespace's artifact is not found here either. Every change is a form POST with
the session's CSRF token, answered by a redirect (``303``, POST/redirect/GET): what it did is kept in the
session and shown once by the page the redirect lands on, so a reload repeats nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final, Protocol, runtime_checkable

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Match

from blobstore import metrics
from blobstore.api.console import present
from blobstore.api.console.pages import ConsoleRoute, render
from blobstore.api.console.session import (
    ENDED,
    TWO_COOKIES,
    LoginRequired,
    Session,
    check_csrf,
    clear_session_cookies,
    cookie_policy,
    cookie_values,
    open_session,
    set_session_cookie,
)
from blobstore.api.console.state import console_state
from blobstore.api.console.thumbnails import EDGES, MAX_SOURCE_BYTES, NoThumbnail, make_thumbnail_async
from blobstore.api.deps import app_state, base_url
from blobstore.api.routes import health
from blobstore.api.routes.artifacts import serve_content
from blobstore.auth import parse_expiry, require_scope, token_state
from blobstore.cleanup import run_cleanup
from blobstore.console_sessions import ConsoleSessions
from blobstore.errors import BlobstoreError, InvalidRequest, NotFound, Unauthorized
from blobstore.models import Artifact, ArtifactFilter, BlobInfo, Caller, Scope
from blobstore.service import ArtifactService, decode_cursor, encode_cursor
from blobstore.share_links import SHARE_PREFIX, capped
from blobstore.views.engine import views_for

router = APIRouter(prefix="/console", include_in_schema=False, route_class=ConsoleRoute)
share_router = APIRouter(include_in_schema=False)

PAGE_SIZE: Final = 50
MAX_SHARE: Final = timedelta(days=30)
MAX_PRESIGN_SECONDS: Final = 7 * 24 * 3600
"""The longest a presigned S3 URL (SigV4) may live."""
PDF_PAGE_PROBE: Final = "/v1/artifacts/a_probe/pages/1.png"

Form1 = Annotated[str | None, Form()]


@runtime_checkable
class _Presigns(Protocol):
    async def presigned_url(
        self, blob: BlobInfo, *, expires_in: int, filename: str | None = None, content_type: str | None = None
    ) -> str: ...


def _service(request: Request) -> ArtifactService:
    return app_state(request.app).service


def _sessions(request: Request) -> ConsoleSessions:
    return app_state(request.app).runtime.console_sessions


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


async def _session(request: Request, scope: Scope = Scope.READ) -> Session:
    session = await open_session(request)
    require_scope(session.caller, scope)
    return session


async def _changing(request: Request, csrf: str | None, scope: Scope = Scope.WRITE) -> Session:
    session = await _session(request, scope)
    check_csrf(session, csrf)
    return session


async def _outcome(request: Request, session: Session) -> dict[str, Any]:
    """What the change that redirected here did (shown once), or nothing."""
    return await _sessions(request).take_outcome(session) or {}


async def _done(request: Request, session: Session, url: str, **outcome: Any) -> RedirectResponse:
    """The answer to a change: its outcome kept for the page at ``url``, and a redirect there."""
    if outcome:
        await _sessions(request).keep_outcome(session, outcome)
    return _redirect(url)


def _bounded(value: str | None, name: str, limit: int) -> str | None:
    text = (value or "").strip()
    if len(text) > limit:
        raise InvalidRequest(f"{name} is at most {limit} characters")
    return text or None


# -- login ------------------------------------------------------------------------------------------------

LOGIN_NOTICES: Final = {
    ENDED: "Your console session has ended (logged out, unused for too long, past its lifetime, or its token "
    "was revoked or has expired). Log in again.",
    TWO_COOKIES: "Two console cookies arrived with one request: another site on this host (another port of "
    "it) set one of its own. Neither was used, both sessions are ended and the cookies cleared. Log in "
    "again; if this keeps happening, close the pages of other local servers.",
    "logout": "You have logged out: the session is ended on the server.",
}
LOGIN_FAILURES: Final = {
    "malformed": "That is not a token of this store (bst_…).",
    "unknown": "No such token.",
    "revoked": "That token is revoked.",
    "expired": "That token has expired.",
    "local": "Local mode is not open here: a token exists now (log in with one), or this browser is not on "
    "the server's machine.",
}


def _failure(exc: Unauthorized) -> str:
    """The key of a refused login's reason (the page words it; the query carries nothing of the token)."""
    for key in ("malformed", "revoked", "expired"):
        if key in exc.message:
            return key
    return "unknown"


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
async def login_page(
    request: Request,
    why: Annotated[str | None, Query(max_length=16)] = None,
    failed: Annotated[str | None, Query(max_length=16)] = None,
) -> HTMLResponse:
    return render(
        request,
        "login.html",
        None,
        local_mode=await _local_mode_open(request),
        notice=LOGIN_NOTICES.get(why or ""),
        error=LOGIN_FAILURES.get(failed or ""),
    )


@router.post("/login")
async def login(request: Request, token: Form1 = None, local: Form1 = None) -> Response:
    # No session yet, so no CSRF token: a login posted by a page of another origin never gets here (the
    # request guard refuses it).
    authenticator = app_state(request.app).runtime.authenticator
    client = request.client.host if request.client else None
    try:
        if local and not token:
            caller = await authenticator.authenticate(None, client_host=client)
        else:
            caller = await authenticator.authenticate(f"Bearer {(token or '').strip()}", client_host=client)
    except Unauthorized as exc:
        failure = "local" if local and not token else _failure(exc)
        return _redirect(f"/console/login?failed={failure}")
    sessions = _sessions(request)
    policy = cookie_policy(request)
    # A session this browser had is ended, not left behind (and never reused: a new id every login).
    for earlier in cookie_values(request.headers.items(), policy.name):
        await sessions.end_id(earlier)
    response = _redirect("/console/artifacts")
    if policy.path != "/":
        # A cookie of the name another page of the host set at the root would sit beside the new one.
        response.delete_cookie(policy.name, path="/", httponly=True, samesite="strict")
    set_session_cookie(response, policy, await sessions.start(caller))
    return response


@router.post("/logout")
async def logout(request: Request, csrf: Form1 = None) -> Response:
    session = await _changing(request, csrf, Scope.READ)
    await _sessions(request).end(session.id_hash)
    response = _redirect("/console/login?why=logout")
    clear_session_cookies(response, cookie_policy(request))
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
    outcome = await _outcome(request, session)
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
        outcome=outcome,
    )


# -- one artifact -----------------------------------------------------------------------------------------


def _pdf_pages_served(request: Request) -> bool:
    """Whether this app renders PDF pages (the media views' routes), asked of its router."""
    probe = {"type": "http", "method": "GET", "path": PDF_PAGE_PROBE, "root_path": "", "headers": []}
    return any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes)


async def _artifact_page(request: Request, session: Session, artifact_id: str) -> HTMLResponse:
    service = _service(request)
    artifact = await service.get_artifact(session.caller, artifact_id)
    outcome = await _outcome(request, session)
    shared = outcome.get("share")
    if not isinstance(shared, dict) or shared.get("artifact") != artifact.id:
        shared = None
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
        shared=shared,
        outcome=outcome,
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
    blocks = len(blob.block_xxh3)
    matches = digest.hexdigest() == artifact.sha256
    return JSONResponse(
        {
            "blocks_verified": blocks,
            "block_size": blob.block_size,
            "sha256_matches": matches,
            "summary": present.verify_words(blocks, blob.block_size, matches),
        }
    )


@router.get("/artifacts/{artifact_id}/twins")
async def twins(request: Request, artifact_id: str) -> JSONResponse:
    """Other artifacts of the namespace over the same content: an upload that finds some added no new bytes
    (dedup across namespaces is never shown)."""
    session = await _session(request)
    service = _service(request)
    artifact = await service.get_artifact(session.caller, artifact_id)
    found = await service.repo.find_artifacts_with_content(
        session.caller.namespace, artifact.sha256, now=service.clock(), limit=6
    )
    others = [{"id": item.id, "name": item.name} for item in found if item.id != artifact.id][:5]
    return JSONResponse({"same_content": others})


def _share_expiry(text: str | None, now: datetime) -> datetime:
    moment = parse_expiry(text or "1h", now)
    if moment - now > MAX_SHARE:
        raise InvalidRequest("a share link lives at most 30 days")
    return moment


async def share_url(
    request: Request, caller: Caller, artifact_id: str, wanted: datetime
) -> tuple[str, datetime]:
    """A link to the artifact's bytes that needs no token, and when it really ends: ``wanted``, or sooner the
    caller's token's expiry (a link never outlives its token), or for a presigned S3 URL where direct
    downloads are on, S3's longest lifetime; else a signed ``/share`` URL of this server, which names the
    token
    that minted it and is refused as soon as that token is revoked."""
    service = _service(request)
    artifact, blob = await service.open_artifact(caller, artifact_id)
    blobs = service.blobs
    if service.settings.s3_presign_downloads and isinstance(blobs, _Presigns):
        now = service.clock()
        until = min(capped(caller, wanted), now + timedelta(seconds=MAX_PRESIGN_SECONDS))
        seconds = max(1, math.ceil((until - now).total_seconds()))
        url = await blobs.presigned_url(
            blob, expires_in=seconds, filename=artifact.name, content_type=artifact.mime_type
        )
        return url, until
    link = await service.share_links.mint(caller, artifact, wanted)
    return f"{await base_url(request)}{link.target}", link.expires_at


@router.post("/artifacts/{artifact_id}/share")
async def share(request: Request, artifact_id: str, csrf: Form1 = None, expires: Form1 = None) -> Response:
    session = await _changing(request, csrf, Scope.READ)
    service = _service(request)
    wanted = _share_expiry(expires, service.clock())
    url, until = await share_url(request, session.caller, artifact_id, wanted)
    service.audit.record(
        actor=session.caller.actor,
        namespace=session.caller.namespace,
        action="share",
        result="ok",
        artifact_id=artifact_id,
        extra={"expires_at": until.astimezone(UTC).isoformat()},
    )
    # The link goes through the session, never the redirect's URL: it is a bearer capability.
    shared = {"artifact": artifact_id, "link": url, "expires": until.isoformat(), "capped": until < wanted}
    return await _done(request, session, f"/console/artifacts/{artifact_id}", share=shared)


@router.post("/artifacts/{artifact_id}/pin")
async def pin(request: Request, artifact_id: str, csrf: Form1 = None, pinned: Form1 = None) -> Response:
    session = await _changing(request, csrf)
    keep = pinned == "1"
    await _service(request).update_artifact(session.caller, artifact_id, pinned=keep)
    return _redirect(f"/console/artifacts/{artifact_id}")


@router.post("/artifacts/{artifact_id}/delete")
async def delete(request: Request, artifact_id: str, csrf: Form1 = None) -> Response:
    session = await _changing(request, csrf)
    service = _service(request)
    artifact = await service.get_artifact(session.caller, artifact_id)
    await service.delete_artifact(session.caller, artifact_id)
    return await _done(
        request, session, "/console/artifacts", notice=f"Deleted {artifact.name} ({artifact.id})."
    )


# -- upload -----------------------------------------------------------------------------------------------


@router.get("/upload")
async def upload_page(request: Request) -> HTMLResponse:
    session = await _session(request, Scope.WRITE)
    return render(request, "upload.html", session, outcome=await _outcome(request, session))


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


async def _operate_page(request: Request, session: Session) -> HTMLResponse:
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
            "HTTP requests": str(int(_total(metrics.HTTP_REQUESTS))),
            "bytes received": present.size_words(int(_total(metrics.BYTES_IN))),
            "bytes sent": present.size_words(int(_total(metrics.BYTES_OUT))),
            "storage errors": str(int(_total(metrics.STORAGE_ERRORS))),
            "integrity failures": str(int(_total(metrics.INTEGRITY_FAILURES))),
        },
        now=now,
        key_from_setting=service.share_links.keys.from_setting,
        outcome=await _outcome(request, session),
    )


@router.get("/operate")
async def operate(request: Request) -> HTMLResponse:
    return await _operate_page(request, await _session(request, Scope.ADMIN))


@router.post("/operate/cleanup")
async def cleanup(request: Request, csrf: Form1 = None, run: Form1 = None) -> Response:
    session = await _changing(request, csrf, Scope.ADMIN)
    report = await run_cleanup(app_state(request.app).runtime.cleanup, dry_run=run != "1")
    # The report through the session and a redirect: a reload of the page it lands on runs nothing again.
    return await _done(request, session, "/console/operate#cleanup", cleanup=report.to_dict())


@router.post("/operate/tokens/{token_id}/revoke")
async def revoke(request: Request, token_id: str, csrf: Form1 = None) -> Response:
    session = await _changing(request, csrf, Scope.ADMIN)
    runtime = app_state(request.app).runtime
    if not await runtime.repo.revoke_token(token_id, now=runtime.service.clock()):
        raise NotFound("no such token, or it is revoked already")
    runtime.authenticator.forget()
    notice = f"Token {token_id} is revoked: its console sessions and the share links it made have ended."
    return await _done(request, session, "/console/operate", notice=notice)


@router.post("/operate/link-key")
async def rotate_link_key(request: Request, csrf: Form1 = None) -> Response:
    session = await _changing(request, csrf, Scope.ADMIN)
    await _service(request).share_links.keys.rotate()
    notice = "The link key is new: every share link and upload link made before is refused."
    return await _done(request, session, "/console/operate", notice=notice)


# -- shared links -----------------------------------------------------------------------------------------


@share_router.api_route(f"{SHARE_PREFIX}/{{namespace}}/{{artifact_id}}", methods=["GET", "HEAD"])
async def shared_content(request: Request, namespace: str, artifact_id: str) -> Response:
    """The bytes behind a signed share link, for anyone holding it until it expires (``Range`` and
    conditional requests as on the content route); 403 once expired, altered, its key rotated, or its
    minting token revoked or expired (:mod:`blobstore.share_links`)."""
    caller = await _service(request).share_links.check(namespace, artifact_id, request.query_params)
    return await serve_content(request, caller)


def login_redirect(request: Request, exc: Exception) -> Response:
    """No live session: the login page, saying why when there is something to say; a cookie that opens
    nothing is cleared, and with two cookies, every one of the name the request could carry."""
    assert isinstance(exc, LoginRequired)
    if exc.reason is None:
        return _redirect("/console/login")
    response = _redirect(f"/console/login?why={exc.reason}")
    clear_session_cookies(response, cookie_policy(request), exc.clear)
    return response


__all__ = ["LoginRequired", "login_redirect", "router", "share_router"]
