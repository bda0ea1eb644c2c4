"""A real ``blobstore serve`` on a free loopback port with a temporary data directory, for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.server import Server, serving


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("server")) as running:
        yield running
