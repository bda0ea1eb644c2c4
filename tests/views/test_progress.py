"""Progress and cancellation of view calls: ``notifications/progress`` through the official MCP client over
stdio and streamable HTTP in both protocol eras, and a cancelled call's decoder worker stopped and its slot
freed. The slow view is OCR of pages of a real manual (seconds a page), each transport its own pages so
that no answer comes from the view cache."""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import AudioContent, ProgressNotification, ResourceLink, TextContent

from blobstore.config import Settings
from blobstore.runtime import open_service
from blobstore.views.engine import views_for
from blobstore.views.progress import Throttle, reporting
from blobstore.views.worker import run_job
from tests.fixtures.processes import WORKER, alive, child_running, descendants, until
from tests.fixtures.server import BLOBSTORE, Server, isolated_env, start_server, stop_server
from tests.mcp.conftest import CALLER, NAMESPACE, put
from tests.views import media
from tests.views.conftest import LIBTASN1_PDF

REAL_TRANSPORTS: Final = ["http", "http-legacy", "stdio", "stdio-legacy"]
OCR_PAGES: Final = {"http": "2-3", "http-legacy": "4-5", "stdio": "6-7", "stdio-legacy": "8-9"}
"""Two pages of the manual each transport reads by OCR, reporting after each (none cached by another)."""
QUIET_PAGES: Final = {"http": "10", "http-legacy": "11", "stdio": "12", "stdio-legacy": "13"}
"""A page read by OCR (seconds) by a call without a progress token."""
CANCELLED_PAGES: Final = {"http": "18-27", "http-legacy": "20-29", "stdio": "22-31", "stdio-legacy": "24-33"}
"""Ten pages of OCR (tens of seconds) for the call that is cancelled once its first page is read."""
NEXT_FRAMES: Final = {"http": 2, "http-legacy": 3, "stdio": 4, "stdio-legacy": 5}
"""The keyframes another view asks for once the call is cancelled (none cached by another transport)."""
ENV: Final = {"BLOBSTORE_VIEW_WORKERS": "1"}
"""One decoder worker: a second view runs only once the first's slot is free."""
GUARD_SECONDS: Final = 120.0
"""Against a hang only (a broken cancellation would otherwise wait for every page of OCR)."""


@dataclass
class Store:
    data_dir: Path
    manual: str
    clip: str
    recording: str
    server: Server | None = None


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    data_dir = tmp_path_factory.mktemp("progress-data")

    async def populate() -> Store:
        async with open_service(Settings(data_dir=data_dir)) as service:
            manual = await put(service, await anyio.Path(LIBTASN1_PDF).read_bytes(), "libtasn1.pdf")
            clip = await put(service, media.numbered_video(6), "clip.mp4")
            recording = await put(service, media.pattern_wav(40.0), "pattern.wav")
        return Store(data_dir, manual.uri, clip.uri, recording.uri)

    found = anyio.run(populate)
    found.server = start_server(tmp_path_factory.mktemp("progress-http"), env=ENV, data_dir=data_dir)
    try:
        yield found
    finally:
        stop_server(found.server)


@dataclass
class Notifications:
    """Every ``notifications/progress`` the client received, whichever call it was for."""

    progress: list[ProgressNotification] = field(default_factory=list)

    async def handle(self, message: Any) -> None:
        if isinstance(message, ProgressNotification):
            self.progress.append(message)


@contextlib.asynccontextmanager
async def connect(transport: str, store: Store, inbox: Notifications | None = None) -> AsyncIterator[Client]:
    mode: Any = "legacy" if transport.endswith("legacy") else "auto"
    target: Any
    if transport.startswith("http"):
        assert store.server is not None
        target = f"{store.server.url}/mcp"
    else:
        target = StdioServerParameters(
            command=BLOBSTORE,
            args=["mcp", "--data-dir", str(store.data_dir), "--namespace", NAMESPACE],
            env=isolated_env(ENV),
        )
    handler = inbox.handle if inbox is not None else None
    async with Client(target, mode=mode, message_handler=handler) as client:
        yield client


Told = tuple[float, float | None, str | None]


def _recorder(told: list[Told]) -> Any:
    async def record(progress: float, total: float | None, message: str | None) -> None:
        told.append((progress, total, message))

    return record


@pytest.mark.parametrize("transport", REAL_TRANSPORTS)
async def test_pages_read_by_ocr_report_each_page_with_the_pages_asked_as_total(
    transport: str, store: Store
) -> None:
    told: list[Told] = []
    inbox = Notifications()
    pages = OCR_PAGES[transport]
    first = int(pages.split("-")[0])
    async with connect(transport, store, inbox) as client:
        arguments = {"uri": store.manual, "pages": pages, "page_format": "ocr"}
        result = await client.call_tool("read_artifact", arguments, progress_callback=_recorder(told))
        assert not result.is_error, result.content
        # The same view again is the cache's: nothing runs long, nothing is reported.
        again: list[Told] = []
        await client.call_tool("read_artifact", arguments, progress_callback=_recorder(again))
    assert told, "a view of two pages of OCR runs for seconds"
    done = [progress for progress, _, _ in told]
    assert done == sorted(set(done))  # increasing
    assert done[-1] == 2
    assert {total for _, total, _ in told} == {2}
    assert told[-1][2] == f"page {first + 1} read by OCR (2 of 2)"
    assert again == []
    # The callback saw every notification the connection carried for this call.
    assert len(inbox.progress) == len(told)


@pytest.mark.parametrize("transport", REAL_TRANSPORTS)
async def test_a_call_without_a_progress_token_gets_no_progress_notification(
    transport: str, store: Store
) -> None:
    inbox = Notifications()
    async with connect(transport, store, inbox) as client:
        result = await client.call_tool(
            "read_artifact", {"uri": store.manual, "pages": QUIET_PAGES[transport], "page_format": "ocr"}
        )
    assert not result.is_error, result.content
    first = next(block.text for block in result.content if isinstance(block, TextContent))
    assert first.startswith(f"libtasn1.pdf, page {QUIET_PAGES[transport]} of 36, OCR text")
    assert inbox.progress == []


@pytest.mark.parametrize("transport", REAL_TRANSPORTS)
async def test_a_cancelled_view_stops_its_worker_and_frees_its_slot(transport: str, store: Store) -> None:
    told: list[Told] = []
    first_page = anyio.Event()

    async def record(progress: float, total: float | None, message: str | None) -> None:
        told.append((progress, total, message))
        first_page.set()

    with anyio.fail_after(GUARD_SECONDS):
        async with connect(transport, store) as client:
            assert store.server is not None
            http = transport.startswith("http")
            server = store.server.process.pid if http else child_running("mcp", store.data_dir)
            arguments = {"uri": store.manual, "pages": CANCELLED_PAGES[transport], "page_format": "ocr"}
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: client.call_tool("read_artifact", arguments, progress_callback=record)
                )
                await first_page.wait()
                # The next page's OCR is running in the one worker there is.
                await until(lambda: bool(descendants(server, WORKER)))
                workers = descendants(server, WORKER)
                group.cancel_scope.cancel()
            # The cancelled call's worker ends without finishing its page, and no later page starts.
            await until(lambda: not any(alive(pid) for pid in workers))
            # The slot is free: another view (the only worker's) runs and answers.
            frames = await client.call_tool(
                "read_artifact",
                {"uri": store.clip, "frames": NEXT_FRAMES[transport], "frames_mode": "even", "max_edge": 64},
            )
            assert not frames.is_error, frames.content
            assert descendants(server, WORKER) == set()
    assert [(progress, total) for progress, total, _ in told] == [(1.0, 10.0)]


@pytest.mark.parametrize("transport", REAL_TRANSPORTS)
async def test_over_http_a_view_that_reports_progress_answers_within_one_event(
    transport: str, store: Store
) -> None:
    # 30 s of 16 kHz mono WAV is 960 KB, 1.3 MB as base64: over the official client's 1 MiB cap of one
    # server-sent event. Asked over HTTP with a progress token (an event stream), the segment is linked
    # instead; over stdio, with a token or not, it is the answer's own block.
    start = REAL_TRANSPORTS.index(transport) + 5
    segment = {"uri": store.recording, "start_seconds": start, "duration_seconds": 30}
    told: list[Told] = []
    async with connect(transport, store) as client:
        streamed = await client.call_tool("read_artifact", segment, progress_callback=_recorder(told))
        plain = await client.call_tool("read_artifact", segment)
    assert not streamed.is_error, streamed.content
    middle = ResourceLink if transport.startswith("http") else AudioContent
    assert [type(block) for block in streamed.content] == [TextContent, middle, TextContent]
    assert [type(block) for block in plain.content] == [TextContent, AudioContent, TextContent]


async def test_a_decoder_worker_tells_its_steps_before_its_answer(store: Store) -> None:
    # Below the edges, without their throttle: what the worker processes write and the runner hands on.
    async with open_service(Settings(data_dir=store.data_dir)) as service:
        views = views_for(service)
        clip = await views.open(CALLER, store.clip.rsplit("/", 1)[1])
        recording = await views.open(CALLER, store.recording.rsplit("/", 1)[1])
        frames: list[Told] = []
        with reporting(_recorder(frames)):
            made = await views.frames(clip, 6, max_edge=32)
        segment: list[Told] = []
        with reporting(_recorder(segment)):
            await views.audio(recording, 3.0, 20.0)
    assert len(made) == 6
    for told, total in ((frames, 6.0), (segment, 20.0)):
        done = [progress for progress, _, _ in told]
        assert done == sorted(set(done)), told
        assert {t for _, t, _ in told} == {total}
        assert done[-1] == total  # the last step always gets through the worker's own throttle
    assert frames[0][:2] == (1.0, 6.0)
    assert frames[-1][2] == "6 of 6 keyframes extracted"
    assert segment[-1][2] == "20.0 s of 20 s of audio decoded"


async def test_a_cancelled_view_leaves_its_slot_to_the_next_in_the_engine(store: Store) -> None:
    async with open_service(Settings(data_dir=store.data_dir, view_workers=1)) as service:
        views = views_for(service)
        manual = await views.open(CALLER, store.manual.rsplit("/", 1)[1])
        with anyio.fail_after(GUARD_SECONDS):
            async with anyio.create_task_group() as group:
                group.start_soon(views.page_ocr, manual, 34)
                await until(lambda: bool(descendants(os.getpid(), WORKER)))
                workers = descendants(os.getpid(), WORKER)
                assert views.runner.limiter.borrowed_tokens == 1
                group.cancel_scope.cancel()
        assert views.runner.cancelled == 1
        assert views.runner.limiter.borrowed_tokens == 0
        assert not any(alive(pid) for pid in workers)
        # The slot serves the next view at once.
        (page,) = await views.page_texts(manual, (35,))
        assert page.data


def test_a_worker_writes_progress_lines_only_when_its_job_asks(tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(media.numbered_video(4))
    args = {"path": str(clip), "count": 4, "max_edge": 32, "layout": "frames"}
    lines: dict[bool, list[dict[str, Any]]] = {}
    for asks in (True, False):
        out = io.BytesIO()
        header, parts = run_job({"op": "video_frames", "args": args, "progress": asks}, out)
        assert header["ok"]
        assert len(parts) == 4
        lines[asks] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[False] == []
    assert lines[True][0] == {"progress": 1, "total": 4, "message": "1 of 4 keyframes extracted"}
    assert lines[True][-1] == {"progress": 4, "total": 4, "message": "4 of 4 keyframes extracted"}


def test_the_throttle_waits_a_second_then_passes_four_a_second_and_always_the_last() -> None:
    now = [0.0]
    throttle = Throttle(after=1.0, every=0.25, clock=lambda: now[0])
    passed = []
    for tenth in range(1, 31):
        now[0] = tenth / 10
        if throttle.passes(tenth, 30):
            passed.append(tenth)
    # Nothing in the first second, then one every 0.25 s (every third tenth), and the last one.
    assert passed == [10, 13, 16, 19, 22, 25, 28, 30]
    # A value no larger than the last passed never passes (progress only increases).
    now[0] = 10.0
    assert not throttle.passes(30, 30)
    assert not throttle.passes(5, 30)
