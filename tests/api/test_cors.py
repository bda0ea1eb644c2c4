"""CORS for the pages of the configured origins (``BLOBSTORE_CORS_ORIGINS``): preflights, exposed headers, the
tus discovery ``OPTIONS``, authentication, ``/mcp``; and nothing at all when off or for another origin."""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.api import create_app
from blobstore.api.cors import ALLOWED_METHODS, ALLOWED_REQUEST_HEADERS, EXPOSED_RESPONSE_HEADERS
from blobstore.auth import create_token
from blobstore.cli.serve import settings_environment
from blobstore.config import Settings, SettingsError, load_settings
from blobstore.models import Scope
from blobstore.runtime import open_service
from blobstore.service import ArtifactService
from blobstore.web_origins import allowed_origins
from mcp_resources.transports.http import McpHttpExtension
from tests.fixtures.mcp_wire import initialize_request
from tests.fixtures.settings import make_settings

PAGE = "http://127.0.0.1:5173"
OTHER_PAGE = "https://app.example.com"
STRANGER = "https://evil.example"
TUS = {"Tus-Resumable": "1.0.0"}

SAFELISTED_RESPONSE_HEADERS = frozenset(
    {
        "cache-control",
        "content-language",
        "content-length",
        "content-type",
        "expires",
        "last-modified",
        "pragma",
    }
)
"""Fetch standard, "CORS-safelisted response-header name": readable by a page without being exposed."""
NOT_FOR_PAGES = frozenset({"vary", "x-content-type-options", "content-security-policy", "date", "server"})
"""Headers the browser itself acts on, which no page script needs to read."""


@contextlib.asynccontextmanager
async def app_client(
    tmp_path: Path, *, mcp: bool = False, **overrides: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, ArtifactService]]:
    settings = make_settings(tmp_path, auth_cache_seconds=0, **overrides)
    async with open_service(settings, server=False) as service:
        extensions = [McpHttpExtension(settings)] if mcp else []
        app = create_app(settings, service=service, extensions=extensions)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8420"
            ) as http,
        ):
            yield http, service


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {name: value for name, value in response.headers.items() if name.startswith("access-control-")}


def listed(value: str) -> set[str]:
    return {item.strip().lower() for item in value.split(",") if item.strip()}


def preflight(method: str, headers: str = "") -> dict[str, str]:
    asked = {"Access-Control-Request-Method": method}
    if headers:
        asked["Access-Control-Request-Headers"] = headers
    return asked


def assert_readable_by_page(response: httpx.Response) -> None:
    """Every header of a cross-origin response is one a page script can read: safelisted or exposed."""
    assert response.headers["access-control-allow-origin"] == PAGE
    exposed = listed(response.headers["access-control-expose-headers"])
    for name in response.headers:
        if name.startswith("access-control-") or name in NOT_FOR_PAGES:
            continue
        assert name in SAFELISTED_RESPONSE_HEADERS or name in exposed, f"{name} is hidden from the page"


# -- off by default, listed origins only --------------------------------------------------------------------


def test_cors_is_off_by_default(tmp_path: Path) -> None:
    assert make_settings(tmp_path).cors_origins == ()


async def test_off_by_default_no_cors_headers_on_preflights_or_responses(tmp_path: Path) -> None:
    async with app_client(tmp_path) as (http, _):
        asked = await http.options(
            "/v1/artifacts", headers={"Origin": PAGE, **preflight("POST", "authorization")}
        )
        created = await http.post(
            "/v1/artifacts", params={"name": "a"}, content=b"abc", headers={"Origin": PAGE}
        )
    assert cors_headers(asked) == {}
    assert asked.status_code == 405  # no route answers OPTIONS here: the preflight fails in the browser
    # A change a page of another origin sends is refused (blobstore.api.request_guard), CORS or not.
    assert (created.status_code, created.json()["code"]) == (403, "cross_origin_refused")
    assert cors_headers(created) == {}
    assert "vary" not in created.headers


async def test_unlisted_origin_gets_no_cors_headers(tmp_path: Path) -> None:
    async with app_client(tmp_path, cors_origins=PAGE) as (http, _):
        asked = await http.options(
            "/v1/artifacts", headers={"Origin": STRANGER, **preflight("POST", "authorization")}
        )
        created = await http.post(
            "/v1/artifacts", params={"name": "a"}, content=b"abc", headers={"Origin": STRANGER}
        )
        tus_asked = await http.options("/tus/", headers={"Origin": STRANGER, **preflight("POST")})
    assert cors_headers(asked) == {}
    assert asked.status_code == 405
    assert cors_headers(created) == {}
    assert (created.status_code, created.json()["code"]) == (403, "cross_origin_refused")
    assert "origin" in listed(created.headers["vary"])
    assert cors_headers(tus_asked) == {}


async def test_origin_match_is_exact_scheme_host_and_port(tmp_path: Path) -> None:
    async with app_client(tmp_path, cors_origins=PAGE) as (http, _):
        for near in ("http://127.0.0.1:5174", "https://127.0.0.1:5173", "http://localhost:5173", "null"):
            response = await http.options("/v1/artifacts", headers={"Origin": near, **preflight("GET")})
            assert cors_headers(response) == {}, near


# -- preflights -------------------------------------------------------------------------------------------


async def test_preflight_from_a_listed_origin_allows_the_methods_and_headers_of_tus_and_ranges(
    tmp_path: Path,
) -> None:
    async with app_client(tmp_path, cors_origins=f"{OTHER_PAGE},{PAGE}") as (http, _):
        response = await http.options(
            "/v1/artifacts/a_whatever/content",
            headers={"Origin": PAGE, **preflight("GET", "authorization,range,if-range")},
        )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == PAGE
    assert listed(response.headers["access-control-allow-methods"]) == {
        "get",
        "head",
        "post",
        "patch",
        "put",
        "delete",
        "options",
    }
    allowed = listed(response.headers["access-control-allow-headers"])
    for name in (
        "authorization",
        "tus-resumable",
        "upload-length",
        "upload-offset",
        "upload-metadata",
        "upload-checksum",
        "content-type",
        "range",
        "if-range",
        "if-none-match",
        "x-http-method-override",
        "content-digest",
        "mcp-protocol-version",
    ):
        assert name in allowed, name
    assert "*" not in allowed  # the wildcard would not cover Authorization
    assert int(response.headers["access-control-max-age"]) > 0
    assert "access-control-allow-credentials" not in response.headers  # bearer tokens, never cookies
    assert {"origin", "access-control-request-method", "access-control-request-headers"} <= listed(
        response.headers["vary"]
    )


async def test_preflight_needs_no_token_while_the_request_itself_does(tmp_path: Path) -> None:
    async with app_client(tmp_path, cors_origins=PAGE) as (http, service):
        issued = await create_token(
            service.repo, namespace="web", scopes=frozenset({Scope.READ, Scope.WRITE})
        )
        asked = await http.options("/tus/", headers={"Origin": PAGE, **preflight("POST", "authorization")})
        refused = await http.post("/tus/", headers={"Origin": PAGE, **TUS, "Upload-Length": "3"})
        created = await http.post(
            "/tus/",
            headers={"Origin": PAGE, **TUS, "Upload-Length": "3", "Authorization": f"Bearer {issued.token}"},
        )
    assert asked.status_code == 204
    assert asked.headers["access-control-allow-origin"] == PAGE
    # The refusal reaches the page with its reason: 401 and WWW-Authenticate are readable.
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == PAGE
    assert "www-authenticate" in listed(refused.headers["access-control-expose-headers"])
    assert created.status_code == 201


# -- the tus discovery OPTIONS ------------------------------------------------------------------------------


async def test_tus_options_without_origin_still_answers_tus_discovery(tmp_path: Path) -> None:
    async with app_client(tmp_path, cors_origins=PAGE) as (http, _):
        response = await http.options("/tus/")
    assert response.status_code == 204
    assert response.headers["tus-version"] == "1.0.0"
    assert "creation" in response.headers["tus-extension"]
    assert cors_headers(response) == {}


async def test_tus_cors_preflight_gets_cors_headers(tmp_path: Path) -> None:
    async with app_client(tmp_path, cors_origins=PAGE) as (http, _):
        response = await http.options(
            "/tus/",
            headers={"Origin": PAGE, **preflight("POST", "tus-resumable,upload-length,upload-metadata")},
        )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == PAGE
    assert "post" in listed(response.headers["access-control-allow-methods"])
    assert {"tus-resumable", "upload-length", "upload-metadata"} <= listed(
        response.headers["access-control-allow-headers"]
    )


async def test_tus_discovery_from_a_page_exposes_the_tus_headers(tmp_path: Path) -> None:
    """A page's own ``fetch(url, {method: "OPTIONS"})``: after its preflight, the real OPTIONS (an Origin but
    no Access-Control-Request-Method) reaches the tus endpoint."""
    async with app_client(tmp_path, cors_origins=PAGE) as (http, _):
        response = await http.options("/tus/", headers={"Origin": PAGE})
    assert response.status_code == 204
    assert response.headers["tus-max-size"]
    exposed = listed(response.headers["access-control-expose-headers"])
    assert {
        "tus-version",
        "tus-extension",
        "tus-max-size",
        "tus-checksum-algorithm",
        "tus-resumable",
    } <= exposed
    assert_readable_by_page(response)


# -- responses a page reads -------------------------------------------------------------------------------


async def test_tus_upload_and_ranged_download_expose_every_header_a_page_reads(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    page = {"Origin": PAGE}
    async with app_client(tmp_path, cors_origins=PAGE) as (http, _):
        created = await http.post("/tus/", headers={**page, **TUS, "Upload-Length": str(len(data))})
        location = created.headers["location"]
        first = await http.patch(
            location,
            content=data[:4000],
            headers={
                **page,
                **TUS,
                "Content-Type": "application/offset+octet-stream",
                "Upload-Offset": "0",
                "Upload-Checksum": "sha1 " + base64.b64encode(hashlib.sha1(data[:4000]).digest()).decode(),
            },
        )
        head = await http.head(location, headers={**page, **TUS})
        last = await http.patch(
            location,
            content=data[4000:],
            headers={
                **page,
                **TUS,
                "Content-Type": "application/offset+octet-stream",
                "Upload-Offset": "4000",
            },
        )
        artifact_id = last.headers["blobstore-artifact-id"]
        ranged = await http.get(
            f"/v1/artifacts/{artifact_id}/content", headers={**page, "Range": "bytes=100-199"}
        )
        window = await http.get(
            f"/v1/artifacts/{artifact_id}/content", params={"offset": 0, "length": 1000}, headers=page
        )
        unsatisfiable = await http.get(
            f"/v1/artifacts/{artifact_id}/content", headers={**page, "Range": "bytes=999999-"}
        )
        conflict = await http.patch(
            location,
            content=b"x",
            headers={**page, **TUS, "Content-Type": "application/offset+octet-stream", "Upload-Offset": "1"},
        )
    assert created.status_code == 201
    assert first.status_code == 204
    assert head.headers["upload-offset"] == "4000"
    assert ranged.status_code == 206
    assert ranged.content == data[100:200]
    assert unsatisfiable.status_code == 416
    for response in (created, first, head, last, ranged, window, unsatisfiable, conflict):
        assert_readable_by_page(response)
    exposed = listed(ranged.headers["access-control-expose-headers"])
    needed = {
        "upload-offset",
        "upload-length",
        "upload-metadata",
        "upload-expires",
        "location",
        "tus-resumable",
    }
    needed |= {"content-range", "accept-ranges", "etag", "content-length", "content-disposition"}
    assert needed <= exposed


async def test_a_refusal_before_the_app_runs_still_reaches_the_page(tmp_path: Path) -> None:
    async with app_client(tmp_path, cors_origins=PAGE, max_artifact_size=1024) as (http, _):
        response = await http.post(
            "/v1/artifacts",
            params={"name": "big"},
            content=b"x" * (3 * 1024 * 1024),
            headers={"Origin": PAGE},
        )
    assert response.status_code == 413
    assert response.headers["access-control-allow-origin"] == PAGE


# -- /mcp ---------------------------------------------------------------------------------------------------

INITIALIZE = initialize_request("page", protocol_version="2025-06-18")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_the_listed_origins_may_change_things_as_well_as_the_servers_own(tmp_path: Path) -> None:
    allowed = allowed_origins(make_settings(tmp_path, cors_origins=OTHER_PAGE))
    assert OTHER_PAGE in allowed
    assert STRANGER not in allowed_origins(make_settings(tmp_path))
    assert OTHER_PAGE not in allowed_origins(make_settings(tmp_path))


async def test_mcp_answers_a_listed_origin_with_cors_and_refuses_a_stranger(tmp_path: Path) -> None:
    async with app_client(tmp_path, mcp=True, cors_origins=OTHER_PAGE) as (http, _):
        asked = await http.options(
            "/mcp", headers={"Origin": OTHER_PAGE, **preflight("POST", "content-type,mcp-protocol-version")}
        )
        answered = await http.post("/mcp", json=INITIALIZE, headers={"Origin": OTHER_PAGE, **MCP_HEADERS})
        refused = await http.post("/mcp", json=INITIALIZE, headers={"Origin": STRANGER, **MCP_HEADERS})
    assert asked.status_code == 204
    assert asked.headers["access-control-allow-origin"] == OTHER_PAGE
    assert answered.status_code == 200, answered.text
    assert "serverInfo" in answered.text
    assert answered.headers["access-control-allow-origin"] == OTHER_PAGE
    assert refused.status_code == 403  # DNS-rebinding protection: an origin nobody listed
    assert cors_headers(refused) == {}


async def test_mcp_without_cors_refuses_a_foreign_origin(tmp_path: Path) -> None:
    async with app_client(tmp_path, mcp=True) as (http, _):
        refused = await http.post("/mcp", json=INITIALIZE, headers={"Origin": OTHER_PAGE, **MCP_HEADERS})
    assert refused.status_code == 403
    assert cors_headers(refused) == {}


# -- the setting ---------------------------------------------------------------------------------------------


def test_origins_setting_is_a_comma_separated_list_normalized_as_browsers_send_origin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BLOBSTORE_CORS_ORIGINS", " HTTPS://App.Example.com:443/ , http://127.0.0.1:5173,,")
    settings = Settings()
    assert settings.cors_origins == ("https://app.example.com", "http://127.0.0.1:5173")


@pytest.mark.parametrize(
    "value",
    ["*", "null", "app.example.com", "https://app.example.com/path", "ftp://a.example", "http://a:99999"],
)
def test_origins_setting_refuses_wildcards_and_non_origins(value: str) -> None:
    with pytest.raises(SettingsError, match="BLOBSTORE_CORS_ORIGINS"):
        load_settings(cors_origins=value)


def test_serve_hands_the_origins_to_its_worker_as_the_same_comma_separated_variable(tmp_path: Path) -> None:
    settings = load_settings(data_dir=str(tmp_path), cors_origins=f"{PAGE},{OTHER_PAGE}")
    env = settings_environment(settings)
    assert env["BLOBSTORE_CORS_ORIGINS"] == f"{PAGE},{OTHER_PAGE}"
    assert Settings(cors_origins=env["BLOBSTORE_CORS_ORIGINS"]).cors_origins == (PAGE, OTHER_PAGE)


def test_every_listed_name_is_unique() -> None:
    for names in (ALLOWED_METHODS, ALLOWED_REQUEST_HEADERS, EXPOSED_RESPONSE_HEADERS):
        assert len({name.lower() for name in names}) == len(names)
