"""Bearer tokens: format, storage as a hash, local mode and its limits, expiry, revocation, bad headers."""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from blobstore.api import create_app
from blobstore.auth import (
    Authenticator,
    bearer_token,
    create_token,
    is_loopback_client,
    parse_expiry,
    parse_scopes,
    split_token,
    validate_namespace,
)
from blobstore.errors import InvalidRequest
from blobstore.metadata.tables import tokens
from blobstore.models import Caller, Scope
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from tests.fixtures.settings import make_settings
from tests.security import leaks
from tests.security.conftest import BASE, Tenant, issue

TOKEN_FORMAT = re.compile(r"bst_[A-Za-z0-9_-]{16}_[A-Za-z0-9_-]{43}")


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "unauthorized"


async def test_token_has_a_public_id_and_only_the_hash_of_its_secret_is_stored(
    service: ArtifactService,
) -> None:
    issued = await create_token(service.repo, namespace="ns1", scopes=frozenset({Scope.READ}))
    leaks.register_secret(issued.token)
    assert TOKEN_FORMAT.fullmatch(issued.token)
    parts = split_token(issued.token)
    assert parts is not None
    token_id, secret = parts
    assert token_id == issued.record.id
    async with service.repo.engine.connect() as conn:
        rows = (await conn.execute(sa.select(tokens))).mappings().all()
    assert len(rows) == 1
    assert rows[0]["secret_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert all(secret not in str(value) for value in rows[0].values())


async def test_two_tokens_never_share_id_or_secret(service: ArtifactService) -> None:
    made = [
        await create_token(service.repo, namespace="ns", scopes=frozenset({Scope.READ})) for _ in range(20)
    ]
    for item in made:
        leaks.register_secret(item.token)
    assert len({split_token(m.token) for m in made}) == 20
    assert len({m.record.id for m in made}) == 20


async def test_a_token_id_never_begins_with_a_dash_so_every_command_line_takes_it_as_an_argument(
    service: ArtifactService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sixteen-character URL-safe id begins with "-" once in 64 draws; "blobstore token revoke -LJ..." was
    # then read as an unknown option. The draws below are what the random source gives first.
    draws = iter(["-LJNb8MZW0eQ3YM-", "-AAAAAAAAAAAAAAA", "LJNb8MZW0eQ3YM-x"])
    real = secrets.token_urlsafe
    monkeypatch.setattr("blobstore.auth.secrets.token_urlsafe", lambda n: next(draws) if n == 12 else real(n))
    issued = await create_token(service.repo, namespace="ns", scopes=frozenset({Scope.READ}))
    leaks.register_secret(issued.token)
    assert issued.record.id == "LJNb8MZW0eQ3YM-x"
    assert split_token(issued.token) is not None


async def test_without_tokens_a_loopback_request_acts_in_the_default_namespace(
    http: httpx.AsyncClient, service: ArtifactService
) -> None:
    stored = await http.post("/v1/artifacts", params={"name": "local.bin"}, content=b"local bytes")
    assert stored.status_code == 201, stored.text
    listed = await service.list_artifacts(Caller(namespace="default"))
    assert [a.id for a in listed.items] == [stored.json()["id"]]


async def test_once_a_token_exists_a_request_without_one_is_refused(
    http: httpx.AsyncClient, service: ArtifactService
) -> None:
    assert (await http.get("/v1/artifacts")).status_code == 200
    tenant = await issue(service, "ns")
    assert_unauthorized(await http.get("/v1/artifacts"))
    assert_unauthorized(await http.post("/v1/artifacts", params={"name": "x"}, content=b"x"))
    assert (await http.get("/v1/artifacts", headers=tenant.headers)).status_code == 200


async def test_mcp_over_http_needs_a_token_once_one_exists(
    http: httpx.AsyncClient, service: ArtifactService
) -> None:
    await issue(service, "ns")
    response = await http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert_unauthorized(response)


async def test_local_mode_refuses_clients_that_are_not_on_loopback(app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as remote:
        assert_unauthorized(await remote.get("/v1/artifacts"))


@pytest.mark.parametrize(
    ("host", "insecure", "client", "status"),
    [
        ("0.0.0.0", False, "127.0.0.1", 401),  # bound publicly without the flag: no local mode at all
        ("0.0.0.0", True, "203.0.113.7", 200),  # the explicit flag opens it to everyone
        ("127.0.0.1", True, "203.0.113.7", 200),
    ],
)
async def test_local_mode_depends_on_the_bind_address_and_the_insecure_flag(
    tmp_path: Path, host: str, insecure: bool, client: str, status: int
) -> None:
    settings = make_settings(tmp_path, host=host, insecure_no_auth=insecure)
    async with open_service(settings) as service:
        app = create_app(settings, service=service)
        transport = httpx.ASGITransport(app=app, client=(client, 40000))
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url=BASE) as remote,
        ):
            assert (await remote.get("/v1/artifacts")).status_code == status


async def test_an_expired_token_is_refused(http: httpx.AsyncClient, service: ArtifactService) -> None:
    past = datetime.now(UTC) - timedelta(minutes=1)
    issued = await create_token(
        service.repo,
        namespace="ns",
        scopes=frozenset({Scope.READ}),
        expires_at=past,
        now=past - timedelta(days=1),
    )
    leaks.register_secret(issued.token)
    await issue(service, "ns")  # keeps token mode on: the expired one does not count as active
    assert_unauthorized(await http.get("/v1/artifacts", headers={"Authorization": f"Bearer {issued.token}"}))


async def test_a_revoked_token_is_refused_at_once(
    http: httpx.AsyncClient, service: ArtifactService, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    assert (await http.get("/v1/artifacts", headers=tenant_a.headers)).status_code == 200
    assert await service.repo.revoke_token(tenant_a.token_id, now=datetime.now(UTC))
    assert_unauthorized(await http.get("/v1/artifacts", headers=tenant_a.headers))
    assert (await http.get("/v1/artifacts", headers=tenant_b.headers)).status_code == 200


async def test_a_token_whose_id_and_secret_do_not_belong_together_is_refused(
    http: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    _a_id, a_secret = split_token(tenant_a.token) or ("", "")
    b_id, _ = split_token(tenant_b.token) or ("", "")
    forged = f"bst_{b_id}_{a_secret}"
    assert_unauthorized(await http.get("/v1/artifacts", headers={"Authorization": f"Bearer {forged}"}))


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "bst_abc",
        "Bearer bst_tooshort_x",
        "Bearer " + "A" * 8000,
        "Bearer bst_AAAAAAAAAAAAAAAA_" + "B" * 43,  # well formed, unknown
        "Bearer bst_AAAAAAAAAAAAAAAA_" + "B" * 42 + "=",
        "Bearer ../../etc/passwd",
    ],
)
async def test_malformed_or_unknown_credentials_are_401_never_500(
    http: httpx.AsyncClient, tenant_a: Tenant, header: str
) -> None:
    assert_unauthorized(await http.get("/v1/artifacts", headers={"Authorization": header}))


async def test_non_ascii_authorization_bytes_are_401(http: httpx.AsyncClient, tenant_a: Tenant) -> None:
    response = await http.get("/v1/artifacts", headers=[(b"authorization", b"Bearer \xe9\xffx")])
    assert_unauthorized(response)


async def test_an_authorization_value_with_a_nul_byte_is_a_malformed_request(
    http: httpx.AsyncClient, tenant_a: Tenant
) -> None:
    # RFC 9110 §5.5: a field value with NUL "MUST" be rejected (or the NUL replaced); never a 500.
    response = await http.get("/v1/artifacts", headers=[(b"authorization", b"Bearer \xe9\xff\x00x")])
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")


async def test_scheme_is_case_insensitive(http: httpx.AsyncClient, tenant_a: Tenant) -> None:
    response = await http.get("/v1/artifacts", headers={"Authorization": f"bEaReR {tenant_a.token}"})
    assert response.status_code == 200


async def test_the_local_mode_answer_is_cached_and_reset_by_token_changes(service: ArtifactService) -> None:
    auth = Authenticator(service.repo, allow_local=True, cache_seconds=3600.0)
    assert not await auth.has_tokens()
    # Created behind the authenticator's back (another process): the cached answer stands...
    made = await create_token(service.repo, namespace="ns", scopes=frozenset({Scope.READ}))
    leaks.register_secret(made.token)
    assert not await auth.has_tokens()
    # ...until it is forgotten (as token changes through the service do) or it ages out.
    auth.forget()
    assert await auth.has_tokens()
    auth.cache_seconds = 0.0
    await service.repo.revoke_token(made.record.id, now=datetime.now(UTC))
    assert not await auth.has_tokens()


def test_scopes_parse_from_a_comma_list_and_refuse_unknown_names() -> None:
    assert parse_scopes("read, WRITE") == frozenset({Scope.READ, Scope.WRITE})
    for bad in ("", "read,delete", ",", "root"):
        with pytest.raises(InvalidRequest):
            parse_scopes(bad)


def test_expiry_accepts_durations_and_iso_times_in_the_future_only() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert parse_expiry("30d", now) == now + timedelta(days=30)
    assert parse_expiry("12h", now) == now + timedelta(hours=12)
    assert parse_expiry("2031-01-01", now) == datetime(2031, 1, 1, tzinfo=UTC)
    for bad in ("yesterday", "2020-01-01", "0s", "-5d", "5y"):
        with pytest.raises(InvalidRequest):
            parse_expiry(bad, now)


@pytest.mark.parametrize("name", ["", "../x", "a/b", "a\x00b", "-lead", "x" * 65, "ünï", " a"])
def test_namespaces_are_plain_names(name: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_namespace(name)


def test_bearer_parsing_takes_only_the_bearer_scheme() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Token abc") is None
    assert bearer_token("Bearer") is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        (None, True),
        ("203.0.113.7", False),
        ("::ffff:203.0.113.7", False),
        ("10.0.0.1", False),
        ("example.org", False),
        ("", False),
    ],
)
def test_loopback_clients_are_told_apart_the_same_way_every_time(host: str | None, loopback: bool) -> None:
    # The answer per address is cached: asking again must give the same answer as the first time.
    assert is_loopback_client(host) is loopback
    assert is_loopback_client(host) is loopback


async def test_requests_that_find_the_answer_stale_together_share_one_look_up(
    service: ArtifactService,
) -> None:
    looked_up: list[datetime | None] = []
    count_tokens = service.repo.count_tokens

    class Counting:
        async def count_tokens(self, *, now: datetime | None = None) -> int:
            looked_up.append(now)
            await anyio.sleep(0.01)  # the look-up is still under way when the others ask
            return await count_tokens(now=now)

    auth = Authenticator(Counting(), allow_local=True, cache_seconds=3600.0)  # type: ignore[arg-type]
    answers: list[bool] = []

    async def ask() -> None:
        answers.append(await auth.has_tokens())

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(ask)
    assert answers == [False] * 8
    assert len(looked_up) == 1
