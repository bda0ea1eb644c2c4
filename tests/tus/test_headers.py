"""Sans-I/O tus header parsing: Upload-Metadata, Upload-Checksum, offsets, versions, content types."""

from __future__ import annotations

import base64
import hashlib

import pytest

from blobstore.api.tus_headers import (
    format_metadata,
    is_offset_stream,
    is_supported_version,
    metadata_sha256,
    parse_checksum,
    parse_metadata,
    parse_non_negative,
)
from blobstore.errors import InvalidRequest


def test_metadata_pairs_decode_and_a_key_may_stand_alone() -> None:
    value = "filename d29ybGRfZG9taW5hdGlvbl9wbGFuLnBkZg==,is_confidential,empty "

    assert parse_metadata(value) == {
        "filename": b"world_domination_plan.pdf",
        "is_confidential": b"",
        "empty": b"",
    }


def test_metadata_round_trips_through_format() -> None:
    pairs = {"filename": "naïve résumé.txt".encode(), "flag": b""}

    assert parse_metadata(format_metadata(pairs)) == pairs


@pytest.mark.parametrize(
    "value",
    ["a YQ==,a Yg==", "a not base64!", "a YQ== extra", ",", "a YQ==,,b Yg=="],
    ids=["duplicate key", "bad base64", "three parts", "empty key", "empty pair"],
)
def test_malformed_metadata_is_refused_without_echoing_it(value: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_metadata(value)
    assert "base64!" not in str(raised.value)


def test_checksum_header_decodes_algorithm_and_digest() -> None:
    digest = hashlib.sha256(b"abc").digest()

    parsed = parse_checksum(f"sha256 {base64.b64encode(digest).decode()}")

    assert (parsed.algorithm, parsed.digest) == ("sha256", digest)


@pytest.mark.parametrize(
    "value",
    ["md4 AAAA", "sha256", "sha256 !!!", f"sha1 {base64.b64encode(b'short').decode()}", "SHA1 " + "A" * 28],
    ids=["unsupported", "no digest", "bad base64", "wrong digest size", "upper-case name"],
)
def test_malformed_or_unsupported_checksums_are_invalid_requests(value: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_checksum(value)


@pytest.mark.parametrize("value", ["-1", "1.5", "", "0x10", "1" * 20])
def test_offsets_must_be_non_negative_integers(value: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_non_negative(value, "Upload-Offset")


def test_offsets_parse_plain_decimals() -> None:
    assert parse_non_negative(" 1048576 ", "Upload-Offset") == 1048576


def test_only_tus_1_0_0_is_supported() -> None:
    assert is_supported_version("1.0.0")
    assert not is_supported_version("0.2.2")
    assert not is_supported_version(None)


def test_patch_content_type_ignores_case_and_parameters_only() -> None:
    assert is_offset_stream("Application/Offset+Octet-Stream; charset=binary")
    assert not is_offset_stream("application/octet-stream")
    assert not is_offset_stream(None)


def test_sha256_metadata_accepts_hex_prefixed_hex_and_raw_digest() -> None:
    digest = hashlib.sha256(b"x").digest()

    assert metadata_sha256(digest.hex().encode()) == digest.hex()
    assert metadata_sha256(f"sha256:{digest.hex().upper()}".encode()) == digest.hex()
    assert metadata_sha256(digest) == digest.hex()
