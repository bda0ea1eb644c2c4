"""Checks of every backend's ``stage_commit``: the receipts before any byte is joined, each chunk as it is."""

from __future__ import annotations

from collections.abc import Sequence

from blobstore.errors import Corruption, SizeMismatch, UploadIncomplete
from blobstore.models import ChunkReceipt


def check_commit_chunks(chunks: Sequence[ChunkReceipt], expected_size: int | None) -> int:
    """Refuse a commit whose receipts are not chunks ``0..n-1`` in order or do not add up to the claim.

    Returns the total size the receipts describe.
    """
    for position, receipt in enumerate(chunks):
        if receipt.index != position:
            raise UploadIncomplete(missing=[position])
    total = sum(receipt.size for receipt in chunks)
    if expected_size is not None and total != expected_size:
        raise SizeMismatch(expected_size=expected_size, size=total)
    return total


def check_staged(receipt: ChunkReceipt, size: int, xxh3: str) -> None:
    """Refuse a staged chunk read back with other bytes than its receipt (the metadata's record) names."""
    if size != receipt.size or xxh3 != receipt.xxh3:
        raise Corruption(chunk=receipt.index)
