"""Generation keys and staging refs: unique, parseable, and safe to join onto paths."""

from __future__ import annotations

import pytest

from blobstore.errors import InvalidRequest
from blobstore.storage.keys import (
    generation_key,
    is_generation_key,
    validate_chunk_index,
    validate_key,
    validate_staging_ref,
)

DIGEST = "ab" * 32


def test_digest_key_fans_out_by_the_digest_and_adds_a_random_suffix() -> None:
    key = generation_key(DIGEST)
    prefix, suffix = key.rsplit(".", 1)
    assert prefix == f"blobs/ab/ab/{DIGEST}"
    assert len(suffix) == 22
    assert validate_key(key) == key


def test_keys_for_the_same_digest_never_repeat() -> None:
    assert len({generation_key(DIGEST) for _ in range(1000)}) == 1000


def test_key_without_a_digest_is_random_and_valid() -> None:
    key = generation_key(None)
    _, underscore, fan, name = key.split("/")
    assert underscore == "_"
    assert fan == name[:2]
    assert is_generation_key(key)


def test_generation_key_refuses_a_malformed_digest() -> None:
    with pytest.raises(InvalidRequest):
        generation_key("AB" * 32)


@pytest.mark.parametrize(
    "key",
    [
        f"blobs/ab/ab/{DIGEST}",
        f"blobs/ab/cd/{DIGEST}.{'a' * 22}",
        f"/blobs/ab/ab/{DIGEST}.{'a' * 22}",
        f"blobs/ab/ab/{DIGEST}.{'a' * 21}/",
        f"blobs/ab/ab/{DIGEST}.../../../x",
        "blobs/_/../" + "a" * 22,
        "blobs/_/aa/" + "a" * 21 + "\x00",
        "staging/u_1/0",
        "blobs/_/ab/" + "c" * 22,
    ],
)
def test_malformed_keys_are_refused(key: str) -> None:
    assert not is_generation_key(key)
    with pytest.raises(InvalidRequest):
        validate_key(key)


@pytest.mark.parametrize("ref", ["", "..", "a/b", "a\x00", "x" * 129, "sp ace"])
def test_malformed_staging_refs_are_refused(ref: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_staging_ref(ref)


def test_upload_ids_are_valid_staging_refs() -> None:
    assert validate_staging_ref("u_AbC-123_x") == "u_AbC-123_x"


@pytest.mark.parametrize("index", [-1, True, 1.5])
def test_chunk_index_must_be_a_non_negative_integer(index: object) -> None:
    with pytest.raises(InvalidRequest):
        validate_chunk_index(index)  # type: ignore[arg-type]
