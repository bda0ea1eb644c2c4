"""Collect every log record of the whole test run into one file, for ``test_no_secrets_in_logs``.

The handler goes on the root logger once collection is done (so before the first test runs) and comes off at
the end of the run. This directory sorts last, so its test runs after everything else has logged.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

from tests.security import leaks

_handler: logging.Handler | None = None


def pytest_collection_finish(session: pytest.Session) -> None:
    global _handler
    if _handler is not None:
        return
    fd, name = tempfile.mkstemp(prefix="blobstore-test-run-", suffix=".log")
    os.close(fd)
    handler = logging.FileHandler(name, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)
    _handler = handler
    leaks.inprocess_log = Path(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _handler
    if _handler is None:
        return
    logging.getLogger().removeHandler(_handler)
    _handler.close()
    _handler = None
    if leaks.inprocess_log is not None:
        leaks.inprocess_log.unlink(missing_ok=True)
        leaks.inprocess_log = None
