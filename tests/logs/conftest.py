"""The log check sees the whole run: every log record of the run goes to one file, and the check runs after
every other test, wherever its directory sorts.

The handler goes on the root logger once collection is done (so before the first test runs) and comes off at
the end of the run. The check is moved to the end of the run's items, and asserts that it is there.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest

from tests.security import leaks

HERE = Path(__file__).parent

_handler: logging.Handler | None = None


def is_log_check(item: pytest.Item) -> bool:
    return HERE in item.path.parents


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """After any other reordering: the log check goes last, the other tests keep their order."""
    items[:] = [item for item in items if not is_log_check(item)] + [
        item for item in items if is_log_check(item)
    ]


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
