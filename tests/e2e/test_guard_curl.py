"""The request guard's examples of docs/http-api.md ("Hosts and origins") as written, with curl against a real
``blobstore serve`` in local mode: a foreign ``Host`` is refused, and so is a change sent with a foreign
``Origin``; nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.e2e import docs_examples as doc
from tests.fixtures.server import serving

pytestmark = pytest.mark.e2e


def test_the_documented_refusals(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        result = doc.run(doc.block("Host: rebind.attacker.example:8420"), tmp_path, B=server.url)
        listed = httpx.get(f"{server.url}/v1/artifacts").json()["items"]
    first, second = (json.loads(text) for text in result.stdout.decode().replace("}{", "}\n{").splitlines())
    assert (first["status"], first["code"], first["host"]) == (
        421,
        "host_not_allowed",
        "rebind.attacker.example:8420",
    )
    assert (second["status"], second["code"], second["origin"]) == (
        403,
        "cross_origin_refused",
        "http://localhost:9999",
    )
    assert listed == []


@pytest.mark.parametrize("server_name", ["granian", "uvicorn", "hypercorn"])
def test_every_asgi_server_takes_a_trusted_proxys_forwarded_headers_alike(
    tmp_path: Path, server_name: str
) -> None:
    """From loopback (a trusted proxy by default): the forwarded scheme and host make the server's origin and
    links, and the forwarded client is the client (not loopback: no local mode). uvicorn's own handling,
    which would apply them first by its own list, is off under ``blobstore serve``."""
    behind_tls = {"X-Forwarded-Proto": "https", "Host": "localhost:8443", "Origin": "https://localhost:8443"}
    with serving(tmp_path, "--server", server_name) as server, httpx.Client(base_url=server.url) as http:
        stored = http.post("/v1/artifacts", params={"name": "a.txt"}, content=b"a", headers=behind_tls)
        remote = http.get("/v1/artifacts", headers={"X-Forwarded-For": "203.0.113.9"})
        spoofed_origin = http.post(
            "/v1/artifacts",
            params={"name": "b.txt"},
            content=b"b",
            headers={"Origin": "https://localhost:8443"},
        )
    assert stored.status_code == 201, stored.text
    assert stored.json()["content_url"].startswith("https://localhost:8443/v1/artifacts/")
    assert (remote.status_code, remote.json()["code"]) == (401, "unauthorized")
    assert (spoofed_origin.status_code, spoofed_origin.json()["code"]) == (403, "cross_origin_refused")
