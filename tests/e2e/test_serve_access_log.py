"""``blobstore serve`` at the default log levels writes one access line per request, the JSON
``blobstore.access`` line, under every ASGI server: the server's own access log is off."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from blobstore.cli.serve import installed_servers
from tests.e2e.test_observability import LOG_DEADLINE_SECONDS, access_lines
from tests.fixtures.server import start_server, stop_server
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("server_name", installed_servers())
def test_one_request_writes_exactly_one_access_line_the_json_one(server_name: str, tmp_path: Path) -> None:
    marker = f"a_countme{server_name}"
    server = start_server(tmp_path, "--server", server_name)
    try:
        answer = httpx.get(
            f"{server.url}/v1/artifacts/{marker}", headers={"X-Request-Id": marker}, timeout=60
        )
        assert answer.status_code == 404
        wait_until(
            lambda: any(line["request_id"] == marker for line in access_lines(server.log)),
            within=LOG_DEADLINE_SECONDS,
        )
    finally:
        # Stopped before counting, so any line the server would write for the request has been written.
        stop_server(server)

    log = server.log.read_text(errors="replace")
    mentioning = [line for line in log.splitlines() if marker in line]
    assert len(mentioning) == 1, log
    assert [line["request_id"] for line in access_lines(server.log)].count(marker) == 1
