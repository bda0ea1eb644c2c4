"""The view cache is the store's renditions: one row and one blob per view, shared by every artifact over the
same bytes and by every replica over the same database and storage, kept as long as its source and removed by
cleanup with it. Run on SQLite with local storage and on PostgreSQL with S3."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobstore.api.deps import app_state
from blobstore.cleanup import run_cleanup
from blobstore.config import Settings
from blobstore.metadata.migrate import upgrade
from blobstore.models import Artifact
from blobstore.runtime import cleanup_parts, open_service
from blobstore.service import ArtifactService
from blobstore.views.engine import MediaViews, views_for
from tests.fixtures.asgi import running_app
from tests.mcp.conftest import CALLER, put
from tests.views import media

Replica = Callable[[str], contextlib.AbstractAsyncContextManager[ArtifactService]]
"""Opens one server replica's service (its own data directory, named) over the test's database and storage."""


@pytest.fixture(
    params=[
        "sqlite-local",
        pytest.param("postgresql-s3", marks=[pytest.mark.postgres, pytest.mark.s3]),
    ]
)
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Replica:
    shared: dict[str, Any] = {}
    if request.param == "sqlite-local":
        shared["data_dir"] = tmp_path / "data"
    else:
        shared["database_url"] = migrated(request.getfixturevalue("pg_url"))
        shared["storage_url"] = request.getfixturevalue("s3_storage_url")
        shared["s3_endpoint_url"] = request.getfixturevalue("s3_endpoint_url")

    @contextlib.asynccontextmanager
    async def opened(name: str) -> AsyncIterator[ArtifactService]:
        settings = Settings(**{"data_dir": tmp_path / name, **shared})
        async with open_service(settings) as service:
            yield service

    return opened


@pytest.fixture
def replica_settings(
    pg_url: str, s3_storage_url: str, s3_endpoint_url: str, tmp_path: Path
) -> Callable[[str], Settings]:
    """The settings of one named server replica over the test's PostgreSQL database and S3 bucket."""
    migrated_url = migrated(pg_url)

    def settings(name: str) -> Settings:
        return Settings(
            data_dir=tmp_path / name,
            database_url=migrated_url,
            storage_url=s3_storage_url,
            s3_endpoint_url=s3_endpoint_url,
        )

    return settings


def migrated(pg_url: str) -> str:
    """``pg_url`` migrated: a server replica on PostgreSQL requires what ``blobstore migrate`` did."""
    # On a thread of its own: Alembic's environment runs its own event loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(upgrade, pg_url).result()
    return pg_url


async def figures(service: ArtifactService) -> tuple[int, int]:
    """How many renditions and how many blobs the store holds."""
    stats = await service.repo.stats(now=service.clock())
    return stats["renditions"], stats["blobs"]


async def page_text(views: MediaViews, artifact: Artifact, page: int) -> str:
    (view,) = await views.page_texts(await views.open(CALLER, artifact.id), (page,))
    return view.data.decode("utf-8")


async def test_a_second_read_of_a_view_is_a_lookup_in_the_renditions(replica: Replica) -> None:
    async with replica("a") as service:
        artifact = await put(service, media.text_pdf(3), "report.pdf")
        first = MediaViews(service)
        assert media.marker(2) in await page_text(first, artifact, 2)
        assert (first.cache.computed, first.runner.started) == (1, 1)
        # A new engine has no memory of its own: what it finds, it finds in the store.
        second = MediaViews(service)
        again = await page_text(second, artifact, 2)
        assert (second.cache.hits, second.cache.computed, second.runner.started) == (1, 0, 0)
        assert media.marker(2) in again
        assert (await figures(service))[0] == 2  # the facts (taken at upload) and the page


async def test_artifacts_over_the_same_bytes_share_one_rendition_and_equal_views_one_blob(
    replica: Replica,
) -> None:
    async with replica("a") as service:
        data = media.image_pdf(2)
        one = await put(service, data, "scan.pdf")
        views = MediaViews(service)
        await views.page_texts(await views.open(CALLER, one.id), (1,))
        renditions, blobs = await figures(service)
        other = await put(service, data, "copy.pdf")
        await views.page_texts(await views.open(CALLER, other.id), (1,))
        assert views.cache.hits >= 1
        assert await figures(service) == (renditions, blobs)
        # Page 2 has no text layer either: another rendition, over the blob page 1's empty text already is.
        await views.page_texts(await views.open(CALLER, other.id), (2,))
        assert await figures(service) == (renditions + 1, blobs)


@pytest.mark.postgres
@pytest.mark.s3
async def test_replicas_on_one_database_and_storage_share_their_views(
    replica_settings: Callable[[str], Settings],
) -> None:
    async with open_service(replica_settings("a")) as a, open_service(replica_settings("b")) as b:
        artifact = await put(a, media.text_pdf(4), "shared.pdf")
        on_a, on_b = MediaViews(a), MediaViews(b)
        source_a = await on_a.open(CALLER, artifact.id)
        image_a = await on_a.page_image(source_a, 3, 200)
        source_b = await on_b.open(CALLER, artifact.id)
        image_b = await on_b.page_image(source_b, 3, 200)
        assert (on_a.cache.computed, on_a.runner.started) == (1, 1)
        assert (on_b.cache.hits, on_b.cache.computed, on_b.runner.started) == (1, 0, 0)
        assert image_b == image_a
        assert image_b.data.startswith(b"\x89PNG")


@pytest.mark.postgres
@pytest.mark.s3
async def test_a_page_read_over_http_on_one_replica_is_a_lookup_on_the_other(
    replica_settings: Callable[[str], Settings],
) -> None:
    async with running_app(replica_settings("a")) as app_a, running_app(replica_settings("b")) as app_b:
        clients = [
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
            for app in (app_a, app_b)
        ]
        async with clients[0] as on_a, clients[1] as on_b:
            stored = await on_a.post("/v1/artifacts", params={"name": "r.pdf"}, content=media.text_pdf(3))
            assert stored.status_code == 201
            page = f"/v1/artifacts/{stored.json()['id']}/pages/3.txt"
            first = await on_a.get(page)
            second = await on_b.get(page)
        engines = [views_for(app_state(app).runtime.service) for app in (app_a, app_b)]
    assert first.status_code == second.status_code == 200
    assert media.marker(3) in second.text
    assert second.content == first.content
    assert second.headers["etag"] == first.headers["etag"]
    assert engines[0].cache.computed == 2  # the facts (at upload) and the page
    assert (engines[1].cache.computed, engines[1].runner.started) == (0, 0)
    assert engines[1].cache.hits == 2  # the facts (page count) and the page


async def test_cleanup_after_the_source_expires_removes_its_renditions_and_only_blobs_nothing_uses(
    replica: Replica,
) -> None:
    async with replica("a") as service:
        brief = await service.create_artifact(
            CALLER, _once(media.text_pdf(2)), name="brief.pdf", ttl_seconds=60
        )
        lasting = await put(service, media.text_pdf(3), "lasting.pdf")
        views = MediaViews(service)
        first_page = await page_text(views, brief, 1)
        assert await page_text(views, brief, 2) == await page_text(views, lasting, 2)
        # An artifact whose bytes are those of a view: the view's blob is the artifact's too.
        copy = await service.create_artifact(CALLER, _once(first_page.encode()), name="page1.txt")
        # Renditions: both facts, brief's two pages, lasting's page 2. Blobs: both PDFs, both facts, page 1
        # (the copy's too) and page 2 (brief's and lasting's).
        assert await figures(service) == (5, 6)
        expires = brief.expires_at
        assert expires is not None
        service.clock.source = lambda: expires + timedelta(seconds=1)

        planned = await run_cleanup(cleanup_parts(service), grace_seconds=0, dry_run=True)
        assert await figures(service) == (5, 6)
        report = await run_cleanup(cleanup_parts(service), grace_seconds=0)

        assert planned.step("expire").details["views_removed"] == 3
        assert report.step("expire").details["views_removed"] == 3  # brief's facts and its two pages
        assert report.step("blobs").items == 2  # the brief PDF and its facts
        assert await figures(service) == (2, 4)
        kept = MediaViews(service)
        assert media.marker(2) in await page_text(kept, lasting, 2)
        assert kept.cache.hits == 1
        _, stored = await service.read_all(CALLER, copy.id, limit=1024)
        assert stored == first_page.encode()


async def test_views_of_a_pinned_source_live_on_and_go_when_it_is_deleted(replica: Replica) -> None:
    async with replica("a") as service:
        pinned = await service.create_artifact(
            CALLER, _once(media.text_pdf(2)), name="pinned.pdf", pinned=True
        )
        views = MediaViews(service)
        await page_text(views, pinned, 1)
        now = service.clock()
        service.clock.source = lambda: now + timedelta(days=3650)
        await run_cleanup(cleanup_parts(service), grace_seconds=0)
        assert await figures(service) == (2, 3)
        later = MediaViews(service)
        await page_text(later, pinned, 1)
        assert later.cache.hits == 1

        await service.delete_artifact(CALLER, pinned.id)
        report = await run_cleanup(cleanup_parts(service), grace_seconds=0)

        assert report.step("expire").details["views_removed"] == 2
        assert await figures(service) == (0, 0)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def test_a_view_cache_bound_makes_cleanup_delete_the_oldest_views(tmp_path: Path) -> None:
    async with open_service(Settings(data_dir=tmp_path)) as service:
        artifact = await put(service, media.text_pdf(3), "bounded.pdf")
        views = MediaViews(service)
        await page_text(views, artifact, 1)
        newest = len((await page_text(views, artifact, 2)).encode())
        assert (await figures(service))[0] == 3  # the facts (the oldest), page 1, page 2
        parts = cleanup_parts(service)
        bounded = service.settings.model_copy(update={"view_cache_max_bytes": newest})
        report = await run_cleanup(dataclasses.replace(parts, settings=bounded), grace_seconds=0)
        assert report.step("expire").details["views_trimmed"] == 2
        assert (await figures(service))[0] == 1
        again = MediaViews(service)
        assert media.marker(2) in await page_text(again, artifact, 2)
        assert media.marker(1) in await page_text(again, artifact, 1)
        assert (again.cache.hits, again.cache.computed) == (1, 1)
