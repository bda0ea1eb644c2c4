"""Signed links: the signature covers the exact path, expiry and minter, an expired, altered or re-keyed link
is refused, and the key file of an earlier version is read when it holds a usable key."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.errors import InvalidRequest, LinkRefused
from blobstore.signed_links import KEY_FILE_NAME, LinkSigner, read_key_file

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SIGNER = LinkSigner(b"k" * 32)
LINK = SIGNER.sign("/share/alpha/a_123", NOW + timedelta(hours=1))


def test_a_link_verifies_until_its_expiry() -> None:
    assert SIGNER.verify(LINK.path, LINK.expires, LINK.signature, now=NOW) == LINK.expires
    assert LINK.expires_at == NOW + timedelta(hours=1)
    assert LINK.target == f"/share/alpha/a_123?expires={LINK.expires}&sig={LINK.signature}"
    with pytest.raises(LinkRefused, match="expired"):
        SIGNER.verify(LINK.path, LINK.expires, LINK.signature, now=NOW + timedelta(hours=1))


@pytest.mark.parametrize(
    ("path", "expires", "signature"),
    [
        ("/share/alpha/a_124", LINK.expires, LINK.signature),  # another artifact
        ("/share/beta/a_123", LINK.expires, LINK.signature),  # another namespace
        (LINK.path, LINK.expires + 3600, LINK.signature),  # a longer life
        (LINK.path, LINK.expires, LINK.signature[:-1] + ("A" if LINK.signature[-1] != "A" else "B")),
        (LINK.path, LINK.expires, None),
        (LINK.path, None, LINK.signature),
        (LINK.path, "-1", LINK.signature),
        (LINK.path, LINK.expires, LINK.signature + "x"),
    ],
)
def test_an_altered_link_is_refused(path: str, expires: int | str | None, signature: str | None) -> None:
    with pytest.raises(LinkRefused):
        SIGNER.verify(path, expires, signature, now=NOW)


def test_a_link_signed_under_another_key_is_refused() -> None:
    with pytest.raises(LinkRefused):
        LinkSigner(b"j" * 32).verify(LINK.path, LINK.expires, LINK.signature, now=NOW)


@given(st.text(min_size=1, max_size=43))
def test_no_guessed_signature_verifies(guess: str) -> None:
    if guess == LINK.signature:
        return
    with pytest.raises(LinkRefused):
        SIGNER.verify(LINK.path, LINK.expires, guess, now=NOW)


@pytest.mark.parametrize("path", ["share/x", "/a b", "/a\nb", "/a\x00"])
def test_only_plain_paths_are_signed(path: str) -> None:
    with pytest.raises(InvalidRequest):
        SIGNER.sign(path, NOW)


def test_a_links_minter_is_signed_and_named_in_its_query() -> None:
    link = SIGNER.sign("/share/alpha/a_123", NOW + timedelta(hours=1), minter="Sk6s0lOD7ShR8uIW")
    assert link.target == (
        f"/share/alpha/a_123?expires={link.expires}&by=Sk6s0lOD7ShR8uIW&sig={link.signature}"
    )
    assert SIGNER.verify(link.path, link.expires, link.signature, now=NOW, minter="Sk6s0lOD7ShR8uIW")
    for other in (None, "local", "Sk6s0lOD7ShR8uIX"):
        with pytest.raises(LinkRefused):
            SIGNER.verify(link.path, link.expires, link.signature, now=NOW, minter=other)
    # Nor does a link without a minter pass for one with, or the reverse.
    with pytest.raises(LinkRefused):
        SIGNER.verify(LINK.path, LINK.expires, LINK.signature, now=NOW, minter="local")
    for bad in ("", "a b", "a\nb"):
        with pytest.raises(InvalidRequest):
            SIGNER.sign("/share/alpha/a_1", NOW, minter=bad)


def test_the_key_file_of_an_earlier_version_is_read_when_usable(tmp_path: Path) -> None:
    assert read_key_file(tmp_path) is None
    (tmp_path / KEY_FILE_NAME).write_bytes(base64.urlsafe_b64encode(b"e" * 32) + b"\n")
    assert read_key_file(tmp_path) == b"e" * 32
    for garbage in (b"not base64 at all!", base64.urlsafe_b64encode(b"short"), b"\xff\xfe"):
        (tmp_path / KEY_FILE_NAME).write_bytes(garbage)
        assert read_key_file(tmp_path) is None
