"""The console's repository queries on SQLite and PostgreSQL: filtered keyset pages, usage per namespace with
what dedup saved and what the proxy kept out of context, open uploads."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from blobstore.metadata.repository import MetadataRepository
from blobstore.models import ArtifactFilter
from tests.metadata.helpers import T0, blob_info, new_artifact


async def commit(
    repo: MetadataRepository,
    content: bytes,
    *,
    namespace: str = "ns",
    name: str = "report.pdf",
    mime: str = "application/pdf",
    metadata: dict[str, str] | None = None,
    seconds: int = 0,
) -> str:
    artifact = dataclasses.replace(
        new_artifact(namespace, created_at=T0 + timedelta(seconds=seconds)),
        name=name,
        mime_type=mime,
        metadata=metadata or {},
    )
    return (await repo.commit_artifact(blob=blob_info(content), artifact=artifact)).artifact.id


async def names(repo: MetadataRepository, where: ArtifactFilter, namespace: str = "ns") -> list[str]:
    found = await repo.browse_artifacts(namespace, now=T0, limit=100, after=None, where=where)
    return [artifact.name for artifact in found]


async def test_filters_narrow_a_newest_first_listing(repo: MetadataRepository) -> None:
    await commit(repo, b"a", name="shot-1.png", mime="image/png", seconds=1)
    await commit(repo, b"b", name="shot-2.png", mime="image/png", seconds=2)
    await commit(repo, b"c", name="100%_done.txt", mime="text/plain", seconds=3)
    await commit(
        repo,
        b"d",
        name="listing.json",
        mime="application/json",
        metadata={"source": "proxy", "upstream": "fs", "tool": "list"},
        seconds=4,
    )
    await commit(repo, b"e", name="shot-3.png", mime="image/png", namespace="other", seconds=5)

    assert await names(repo, ArtifactFilter()) == [
        "listing.json",
        "100%_done.txt",
        "shot-2.png",
        "shot-1.png",
    ]
    assert await names(repo, ArtifactFilter(mime="image")) == ["shot-2.png", "shot-1.png"]
    assert await names(repo, ArtifactFilter(mime="image/png", name_prefix="shot-1")) == ["shot-1.png"]
    assert await names(repo, ArtifactFilter(name_prefix="100%_")) == ["100%_done.txt"]
    assert await names(repo, ArtifactFilter(name_prefix="1_0")) == []  # "_" is a character, not a wildcard
    assert await names(repo, ArtifactFilter(search="ot-")) == ["shot-2.png", "shot-1.png"]
    assert await names(repo, ArtifactFilter(metadata={"upstream": "fs", "tool": "list"})) == ["listing.json"]
    assert await names(repo, ArtifactFilter(metadata={"upstream": "web"})) == []
    sha = blob_info(b"b").sha256
    assert await names(repo, ArtifactFilter(search=sha[:10].upper())) == ["shot-2.png"]
    assert await names(repo, ArtifactFilter(mime="image"), namespace="other") == ["shot-3.png"]


async def test_a_filtered_listing_pages_by_the_same_keyset(repo: MetadataRepository) -> None:
    for index in range(7):
        await commit(repo, f"n{index}".encode(), name=f"note-{index}", mime="text/plain", seconds=index)
    where = ArtifactFilter(mime="text")
    first = await repo.browse_artifacts("ns", now=T0, limit=3, after=None, where=where)
    second = await repo.browse_artifacts(
        "ns", now=T0, limit=3, after=(first[-1].created_at, first[-1].id), where=where
    )
    assert [item.name for item in first + second] == [f"note-{index}" for index in (6, 5, 4, 3, 2, 1)]


async def test_usage_counts_dedup_and_offloaded_bytes_per_namespace(repo: MetadataRepository) -> None:
    await commit(repo, b"x" * 100, name="one")
    await commit(repo, b"x" * 100, name="two")  # the same content again: stored once
    await commit(repo, b"y" * 40, name="proxied", metadata={"source": "proxy", "tool": "t"})
    await commit(repo, b"x" * 100, namespace="other")

    usage = {row.namespace: row for row in await repo.usage_by_namespace(now=T0)}

    assert set(usage) == {"ns", "other"}
    assert (usage["ns"].artifacts, usage["ns"].bytes, usage["ns"].bytes_stored) == (3, 240, 140)
    assert usage["ns"].bytes_deduplicated == 100
    assert usage["ns"].bytes_offloaded == 40
    assert (usage["other"].artifacts, usage["other"].bytes_deduplicated, usage["other"].bytes_offloaded) == (
        1,
        0,
        0,
    )
