"""Signing keys in the metadata database, on SQLite and PostgreSQL: the first key offered is the one every
process reads, however many offer one at once; a rotation replaces it; and :class:`LinkKeys` over it makes
replicas agree without any setting."""

from __future__ import annotations

import asyncio
import base64
from datetime import timedelta
from pathlib import Path

import pytest

from blobstore import link_keys
from blobstore.errors import InvalidRequest, LinkRefused
from blobstore.link_keys import PURPOSE, LinkKeys
from blobstore.metadata.repository import MetadataRepository
from blobstore.signed_links import KEY_FILE_NAME
from tests.metadata.helpers import T0

LATER = T0 + timedelta(hours=1)


async def test_the_first_key_offered_wins_for_everyone(repo: MetadataRepository) -> None:
    assert await repo.signing_key(PURPOSE) is None
    offered = [f"key-{index}" for index in range(8)]
    kept = await asyncio.gather(*(repo.ensure_signing_key(PURPOSE, key, now=T0) for key in offered))
    assert len(set(kept)) == 1
    assert kept[0] in offered
    assert await repo.signing_key(PURPOSE) == kept[0]
    await repo.replace_signing_key(PURPOSE, "rotated", now=T0)
    assert await repo.signing_key(PURPOSE) == "rotated"
    assert await repo.ensure_signing_key(PURPOSE, "another", now=T0) == "rotated"


def keys_of(repo: MetadataRepository, data_dir: Path, *, refresh: float = 0.0) -> LinkKeys:
    return LinkKeys(repo, configured=None, data_dir=data_dir, clock=lambda: T0, refresh_seconds=refresh)


async def test_two_replicas_agree_on_the_key_and_see_a_rotation(
    repo: MetadataRepository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = keys_of(repo, tmp_path / "one")
    second = keys_of(repo, tmp_path / "two", refresh=3600)  # keeps the key it read for an hour
    link = (await first.signer()).sign("/share/ns/a_1", LATER, minter="local")
    assert (
        await second.verify(link.path, link.expires, link.signature, now=T0, minter="local") == link.expires
    )

    await first.rotate()
    fresh = (await first.signer()).sign("/share/ns/a_1", LATER, minter="local")
    with pytest.raises(LinkRefused):
        await first.verify(link.path, link.expires, link.signature, now=T0, minter="local")
    # A link made under the new key works on a replica that still holds the old one: a refusal reads again.
    monkeypatch.setattr(link_keys, "RECHECK_SECONDS", 0.0)
    assert await second.verify(fresh.path, fresh.expires, fresh.signature, now=T0, minter="local")
    with pytest.raises(LinkRefused):
        await second.verify(link.path, link.expires, link.signature, now=T0, minter="local")


async def test_an_earlier_key_file_becomes_the_databases_key(
    repo: MetadataRepository, tmp_path: Path
) -> None:
    (tmp_path / KEY_FILE_NAME).write_bytes(base64.urlsafe_b64encode(b"k" * 32))
    keys = keys_of(repo, tmp_path)
    old = (await keys.signer()).sign("/tus/ns/u_1", LATER)
    assert await repo.signing_key(PURPOSE) == base64.urlsafe_b64encode(b"k" * 32).decode()
    # Another replica without the file reads the same key.
    other = keys_of(repo, tmp_path / "elsewhere")
    assert await other.verify(old.path, old.expires, old.signature, now=T0) == old.expires


async def test_the_setting_wins_and_cannot_be_rotated_here(repo: MetadataRepository, tmp_path: Path) -> None:
    keys = LinkKeys(repo, configured="s" * 40, data_dir=tmp_path, clock=lambda: T0)
    assert keys.from_setting
    link = (await keys.signer()).sign("/share/ns/a_1", LATER, minter="local")
    other = LinkKeys(repo, configured="s" * 40, data_dir=tmp_path / "other", clock=lambda: T0)
    assert await other.verify(link.path, link.expires, link.signature, now=T0, minter="local")
    with pytest.raises(InvalidRequest, match="BLOBSTORE_LINK_KEY"):
        await keys.rotate()
    assert await repo.signing_key(PURPOSE) is None
