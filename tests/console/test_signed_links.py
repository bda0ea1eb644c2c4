"""Signed links: the signature covers the exact path and expiry, an expired, altered or re-keyed link is
refused, and the key lives in the data directory (0600) unless the setting gives it."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.errors import InvalidRequest, LinkRefused
from blobstore.signed_links import KEY_FILE_NAME, LinkSigner, load_key, rotate_key

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


def test_derived_keys_differ_by_purpose_and_from_the_link_key() -> None:
    assert SIGNER.derive("a") != SIGNER.derive("b")
    assert SIGNER.derive("a") != b"k" * 32


def test_the_key_file_is_made_once_private_and_rotation_revokes(tmp_path: Path) -> None:
    first = load_key(tmp_path)
    assert load_key(tmp_path) == first
    assert stat.S_IMODE((tmp_path / KEY_FILE_NAME).stat().st_mode) == 0o600
    link = LinkSigner(first).sign("/share/alpha/a_1", NOW + timedelta(minutes=5))
    rotated = rotate_key(tmp_path)
    assert rotated != first
    assert load_key(tmp_path) == rotated
    with pytest.raises(LinkRefused):
        LinkSigner(rotated).verify(link.path, link.expires, link.signature, now=NOW)
    # The setting wins over the file.
    assert load_key(tmp_path, "s" * 40) == b"s" * 40
