"""The proxy's own view reads report their progress to the host under the host's token, and a host's
``notifications/cancelled`` stops the view's decoder worker (an upstream's own progress notifications are
``test_passthrough.py``'s). The official client over stdio in both protocol eras; the slow view is OCR of
pages of a real manual, each test its own pages so that none comes from the view cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import ProgressNotification, TextContent

from blobstore.config import Settings
from blobstore.runtime import open_service
from tests.fixtures.processes import WORKER, alive, child_running, descendants, until
from tests.fixtures.server import isolated_env
from tests.mcp.conftest import put
from tests.proxy.conftest import PYTHON_UPSTREAM, blobstore_command, proxy_args
from tests.views.conftest import LIBTASN1_PDF

MODES: Final = ["legacy", "auto"]
GUARD_SECONDS: Final = 120.0
"""Against a hang only (a broken cancellation would otherwise wait for every page of OCR)."""

Told = tuple[float, float | None, str | None]


async def _manual(data_dir: Path) -> str:
    async with open_service(Settings(data_dir=data_dir)) as service:
        return (await put(service, await anyio.Path(LIBTASN1_PDF).read_bytes(), "libtasn1.pdf")).uri


def _proxy(data_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=blobstore_command(),
        args=proxy_args(data_dir, PYTHON_UPSTREAM),
        env=isolated_env({"BLOBSTORE_VIEW_WORKERS": "1"}),
    )


@pytest.mark.parametrize("mode", MODES)
async def test_the_proxys_view_reads_report_progress_only_to_a_call_with_a_token(
    data_dir: Path, mode: Any
) -> None:
    manual = await _manual(data_dir)
    told: list[Told] = []
    seen: list[ProgressNotification] = []

    async def record(progress: float, total: float | None, message: str | None) -> None:
        told.append((progress, total, message))

    async def handle(message: Any) -> None:
        if isinstance(message, ProgressNotification):
            seen.append(message)

    async with Client(_proxy(data_dir), mode=mode, message_handler=handle) as client:
        reported = await client.call_tool(
            "read_artifact", {"uri": manual, "pages": "2-3", "page_format": "ocr"}, progress_callback=record
        )
        heard = len(seen)
        quiet = await client.call_tool("read_artifact", {"uri": manual, "pages": "4", "page_format": "ocr"})
    assert not reported.is_error, reported.content
    assert not quiet.is_error, quiet.content
    assert isinstance(first := reported.content[0], TextContent)
    assert first.text.startswith("libtasn1.pdf, pages 2-3 of 36, OCR text")
    done = [progress for progress, _, _ in told]
    assert done, "two pages of OCR run for seconds"
    assert done == sorted(set(done))
    assert done[-1] == 2
    assert {total for _, total, _ in told} == {2}
    assert told[-1][2] == "page 3 read by OCR (2 of 2)"
    # Every notification the host got was for the call that asked; the call without a token got none.
    assert heard == len(told) == len(seen)


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_view_read_through_the_proxy_stops_its_worker(data_dir: Path, mode: Any) -> None:
    manual = await _manual(data_dir)
    first_page = anyio.Event()

    async def record(progress: float, total: float | None, message: str | None) -> None:
        first_page.set()

    with anyio.fail_after(GUARD_SECONDS):
        async with Client(_proxy(data_dir), mode=mode) as client:
            proxy = child_running("proxy", data_dir)
            arguments = {"uri": manual, "pages": "5-14", "page_format": "ocr"}
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: client.call_tool("read_artifact", arguments, progress_callback=record)
                )
                await first_page.wait()
                await until(lambda: bool(descendants(proxy, WORKER)))
                workers = descendants(proxy, WORKER)
                group.cancel_scope.cancel()
            await until(lambda: not any(alive(pid) for pid in workers))
            # The one worker slot is free again: another view runs, and no later page of the first starts.
            page = await client.call_tool("read_artifact", {"uri": manual, "pages": "15"})
            assert not page.is_error, page.content
            assert descendants(proxy, WORKER) == set()
            # The proxy still answers after the cancelled call.
            echo = await client.call_tool("echo", {"text": "alive"})
            assert not echo.is_error
