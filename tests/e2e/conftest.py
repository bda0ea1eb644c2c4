"""A real ``blobstore serve`` on a free loopback port with a temporary data directory, for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.server import Server, start_server, stop_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(tmp_path_factory.mktemp("server"))
    try:
        yield running
    finally:
        stop_server(running)
