"""``GET /metrics`` and the request-id JSON access log, over the in-process app and a real service."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from blobstore.api import create_app
from blobstore.api.observe import configure_access_log
from blobstore.auth import create_token
from blobstore.cleanup import run_cleanup
from blobstore.config import Settings
from blobstore.models import Scope
from blobstore.runtime import cleanup_parts, open_service
from blobstore.service import ArtifactService
from tests.fixtures.asgi import app_client
from tests.fixtures.ports import free_port
from tests.fixtures.problems import problem
from tests.fixtures.settings import make_settings

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, keyed by name and sorted labels."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def hear_access_log(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Capture ``blobstore.access`` whatever a server setup in this process did to it."""
    access = logging.getLogger("blobstore.access")
    monkeypatch.setattr(access, "propagate", True)
    monkeypatch.setattr(access, "disabled", False)
    caplog.set_level(logging.DEBUG, logger="blobstore.access")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path, metrics=True)


async def scrape(client: httpx.AsyncClient, **headers: str) -> Samples:
    response = await client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def test_metrics_count_requests_by_route_template_and_status_and_bytes_in_and_out(
    client: httpx.AsyncClient,
) -> None:
    before = await scrape(client)
    data = b"metrics" * 1000
    stored = await client.post("/v1/artifacts", params={"name": "m.bin"}, content=data)
    assert stored.status_code == 201
    artifact_id = stored.json()["id"]
    assert (await client.get(f"/v1/artifacts/{artifact_id}/content")).content == data
    assert (await client.get("/v1/artifacts/art_doesnotexist0000000000")).status_code == 404
    after = await scrape(client)

    route = "/v1/artifacts/{artifact_id}/content"
    assert value(after, "blobstore_http_requests_total", method="GET", route=route, status="200") == (
        value(before, "blobstore_http_requests_total", method="GET", route=route, status="200") + 1
    )
    posted = ("blobstore_http_requests_total", {"method": "POST", "route": "/v1/artifacts", "status": "201"})
    assert value(after, posted[0], **posted[1]) == value(before, posted[0], **posted[1]) + 1
    missing = {"method": "GET", "route": "/v1/artifacts/{artifact_id}", "status": "404"}
    assert value(after, "blobstore_http_requests_total", **missing) >= 1
    # Raw paths never become label values.
    assert not any(artifact_id in dict(labels).get("route", "") for _, labels in after)
    count = "blobstore_http_request_duration_seconds_count"
    assert (
        value(after, count, method="GET", route=route) == value(before, count, method="GET", route=route) + 1
    )
    bytes_in = "blobstore_http_request_body_bytes_total"
    bytes_out = "blobstore_http_response_body_bytes_total"
    assert value(after, bytes_in) - value(before, bytes_in) >= len(data)
    assert value(after, bytes_out) - value(before, bytes_out) >= len(data)
    published = "blobstore_artifacts_published_total"
    assert value(after, published, deduplicated="false") == value(before, published, deduplicated="false") + 1


async def test_metrics_report_open_uploads_integrity_failures_and_cleanup_runs(
    client: httpx.AsyncClient, service: ArtifactService
) -> None:
    begun = await client.post("/v1/uploads", json={"name": "open.bin", "size": 4096})
    assert begun.status_code == 201, begun.text
    wrong = hashlib.sha256(b"something else").hexdigest()
    refused = await client.post(
        "/v1/artifacts", params={"name": "x.bin", "sha256": wrong}, content=b"payload"
    )
    assert refused.json()["code"] == "digest_mismatch"
    doomed = await client.post("/v1/artifacts", params={"name": "gone.bin"}, content=b"freed" * 100)
    assert (await client.delete(f"/v1/artifacts/{doomed.json()['id']}")).status_code == 204
    before = await scrape(client)
    # The blob sweep is two-phase: the first run finds the blob unreferenced, the second frees it.
    reports = [await run_cleanup(cleanup_parts(service), grace_seconds=0) for _ in range(2)]
    after = await scrape(client)

    assert value(after, "blobstore_uploads_open") == 1
    assert value(after, "blobstore_integrity_failures_total", code="digest_mismatch") >= 1
    assert value(after, "blobstore_cleanup_runs_total") == value(before, "blobstore_cleanup_runs_total") + 2
    freed = "blobstore_cleanup_freed_bytes_total"
    assert sum(report.step("blobs").bytes for report in reports) == 500
    assert value(after, freed, step="blobs") - value(before, freed, step="blobs") == 500


async def test_metrics_is_not_served_unless_enabled(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    async with open_service(settings, server=False) as service:
        app = create_app(settings, service=service)
        async with app_client(app) as http:
            assert (await http.get("/metrics")).status_code == 404


async def test_metrics_needs_the_admin_scope_once_tokens_exist(
    client: httpx.AsyncClient, service: ArtifactService
) -> None:
    writer = await create_token(service.repo, namespace="team", scopes=frozenset({Scope.READ, Scope.WRITE}))
    admin = await create_token(service.repo, namespace="team", scopes=frozenset({Scope.ADMIN}))

    assert (await client.get("/metrics")).status_code == 401
    refused = await client.get("/metrics", headers={"Authorization": f"Bearer {writer.token}"})
    assert refused.status_code == 403
    assert await scrape(client, Authorization=f"Bearer {admin.token}")


# A route's error, and one of the content reads' own path (ContentReads, ahead of the routes).
@pytest.mark.parametrize(
    "path",
    ["/v1/artifacts/art_doesnotexist0000000000", "/v1/artifacts/a_AAAAAAAAAAAAAAAAAAAAAAAA/content"],
    ids=["route", "content-read"],
)
async def test_request_id_from_the_client_comes_back_in_the_header_and_the_problem_body(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path, headers={"X-Request-Id": "req-42.a"})
    assert problem(response, 404, "not_found")["request_id"] == "req-42.a"
    assert response.headers["x-request-id"] == "req-42.a"


async def test_a_missing_or_insane_request_id_is_replaced_by_a_new_one_per_request(
    client: httpx.AsyncClient,
) -> None:
    first = await client.get("/v1/artifacts/art_doesnotexist0000000000")
    second = await client.get("/v1/artifacts/art_doesnotexist0000000000", headers={"X-Request-Id": "a b<c>"})
    third = await client.get("/healthz", headers={"X-Request-Id": "x" * 129})
    ids = [first.headers["x-request-id"], second.headers["x-request-id"], third.headers["x-request-id"]]
    assert len(set(ids)) == 3
    assert all(len(found) == 32 and int(found, 16) >= 0 for found in ids)
    assert first.json()["request_id"] == ids[0]
    assert second.json()["request_id"] == ids[1]


async def test_access_log_is_one_json_line_per_request_with_its_id_and_no_secret_or_query(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "bs_tok_notarealtokenbutsecret"
    hear_access_log(caplog, monkeypatch)
    response = await client.get(
        "/v1/artifacts",
        params={"cursor": "secret-cursor-value"},
        headers={"Authorization": f"Bearer {secret}", "X-Request-Id": "trace-7", "Cookie": "session=abc"},
    )
    lines = [record for record in caplog.records if record.name == "blobstore.access"]
    assert len(lines) == 1
    assert lines[0].levelno == logging.INFO
    entry = json.loads(lines[0].getMessage())
    assert entry["request_id"] == "trace-7"
    assert entry["method"] == "GET"
    assert entry["path"] == "/v1/artifacts"
    assert entry["route"] == "/v1/artifacts"
    assert entry["status"] == response.status_code
    assert entry["bytes_out"] == len(response.content)
    assert secret not in caplog.text
    assert "secret-cursor-value" not in caplog.text
    assert "session=abc" not in caplog.text


async def test_the_access_line_of_a_content_read_is_the_json_encoders_own_text(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Answered by the content reads ahead of the middleware, whose access line is written by hand: a path
    # with a quote, a backslash, non-ASCII and a line separator comes out as json.dumps would write it.
    hear_access_log(caplog, monkeypatch)
    path = '/v1/artifacts/a"b\\\u00fc\u2028/content'
    response = await client.get(path, headers={"X-Request-Id": "trace-8"})
    assert response.headers["content-type"] == "application/problem+json"
    [line] = [record.getMessage() for record in caplog.records if record.name == "blobstore.access"]
    entry = json.loads(line)
    assert entry["path"] == path
    assert entry["route"] == "/v1/artifacts/{artifact_id}/content"
    assert entry["request_id"] == "trace-8"
    assert entry["status"] == response.status_code
    assert entry["bytes_out"] == len(response.content)
    assert line == json.dumps(entry, separators=(",", ":"))


@pytest.mark.parametrize(("level", "expected"), [("debug", logging.DEBUG), ("off", None)])
async def test_access_log_level_is_configurable(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    level: str,
    expected: int | None,
) -> None:
    settings = make_settings(tmp_path, access_log_level=level)
    hear_access_log(caplog, monkeypatch)
    async with open_service(settings, server=False) as service:
        app = create_app(settings, service=service)
        async with app_client(app) as http:
            assert (await http.get("/healthz")).status_code == 200
    levels = [record.levelno for record in caplog.records if record.name == "blobstore.access"]
    assert levels == ([] if expected is None else [expected])


async def test_metrics_count_storage_errors_by_operation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An S3 endpoint that refuses every connection: the write fails with storage_unavailable.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    port = free_port()
    settings = make_settings(
        tmp_path,
        metrics=True,
        storage_url="s3://unreachable/prefix",
        s3_endpoint_url=f"http://127.0.0.1:{port}",
        s3_region="us-east-1",
    )
    async with open_service(settings, server=False) as service:
        app = create_app(settings, service=service)
        async with app_client(app) as http:
            before = parse((await http.get("/metrics")).text)
            failed = await http.post("/v1/artifacts", params={"name": "x.bin"}, content=b"bytes")
            assert failed.status_code == 503
            after = parse((await http.get("/metrics")).text)
    errors = {
        labels: count - before.get((name, labels), 0.0)
        for (name, labels), count in after.items()
        if name == "blobstore_storage_errors_total"
    }
    counted = {dict(labels)["operation"]: dict(labels)["code"] for labels, count in errors.items() if count}
    assert sum(errors.values()) == 1
    # The S3 operation that failed names the series (the write's, e.g. PutObject), not "unknown".
    assert list(counted.values()) == ["storage_unavailable"]
    assert next(iter(counted)) not in {"unknown", ""}


async def test_the_servers_own_access_handler_gets_the_line_written_without_a_log_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    access = logging.getLogger("blobstore.access")
    for name in ("handlers", "filters"):
        monkeypatch.setattr(access, name, [])
    monkeypatch.setattr(access, "propagate", True)
    monkeypatch.setattr(access, "disabled", False)
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    request.addfinalizer(functools.partial(access.setLevel, access.level))  # setLevel clears level caches
    configure_access_log("info")

    def no_record(*args: object, **kwargs: object) -> logging.LogRecord:
        raise AssertionError("a LogRecord was built for the server's own handler")

    monkeypatch.setattr(access, "makeRecord", no_record)
    settings = make_settings(tmp_path)
    async with open_service(settings, server=False) as service:
        app = create_app(settings, service=service)
        async with app_client(app) as http:
            response = await http.get("/healthz", headers={"X-Request-Id": "own-7"})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert (entry["request_id"], entry["route"], entry["status"]) == ("own-7", "/healthz", 200)
    assert entry["bytes_out"] == len(response.content)
    assert list(entry) == [
        "ts", "event", "request_id", "method", "path", "route", "status", "duration_ms", "bytes_in",
        "bytes_out", "client",
    ]  # fmt: skip
