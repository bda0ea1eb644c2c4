"""A real ``blobstore serve`` with ``BLOBSTORE_METRICS=true``: MCP and HTTP requests show up in ``/metrics``
(parsed with prometheus_client's parser) and each request writes one JSON access line to the server's log."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.server import start_server, stop_server
from tests.fixtures.waiting import wait_until_async

pytestmark = pytest.mark.e2e

LOG_DEADLINE_SECONDS = 60.0


def access_lines(log: Path) -> list[dict[str, object]]:
    lines = []
    for text in log.read_text(errors="replace").splitlines():
        if text.startswith('{"ts"') and '"event":"http_request"' in text:
            lines.append(json.loads(text))
    return lines


async def test_served_process_counts_mcp_requests_by_method_and_logs_one_json_line_per_request(
    tmp_path: Path,
) -> None:
    server = start_server(tmp_path, env={"BLOBSTORE_METRICS": "true"})
    try:
        async with Client(f"{server.url}/mcp") as client:
            await client.list_resources()
            await client.list_tools()
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            missing = await http.get("/v1/artifacts/a_missing", headers={"X-Request-Id": "e2e-missing-1"})
            assert missing.status_code == 404
            assert missing.json()["request_id"] == "e2e-missing-1"
            scraped = await http.get("/metrics")
        assert scraped.status_code == 200
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(scraped.text)
            for sample in family.samples
        }
        mcp_ok = (
            ("method", "resources/list"),
            ("outcome", "ok"),
        )
        assert samples[("blobstore_mcp_requests_total", mcp_ok)] >= 1
        assert samples[("blobstore_mcp_requests_total", (("method", "tools/list"), ("outcome", "ok")))] >= 1
        posted = (("method", "POST"), ("route", "/mcp"), ("status", "200"))
        assert samples[("blobstore_http_requests_total", posted)] >= 2

        line = await wait_until_async(
            lambda: next((x for x in access_lines(server.log) if x["request_id"] == "e2e-missing-1"), None),
            within=LOG_DEADLINE_SECONDS,
            what=server.log_text,
        )
        assert line["status"] == 404
        assert line["route"] == "/v1/artifacts/{artifact_id}"
    finally:
        stop_server(server)
