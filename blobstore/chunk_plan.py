"""How an upload's bytes fall into chunks: chunk ``i`` covers ``[i*chunk_size, (i+1)*chunk_size)``, and only
the last may be shorter."""

from __future__ import annotations

from dataclasses import dataclass

from blobstore.errors import ChunkIndexOutOfRange, InvalidRequest, SizeMismatch, UploadIncomplete
from blobstore.models import ChunkRecord, UploadSession


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """What the session's declared size says about the chunks."""

    chunk_size: int
    size: int | None

    @property
    def count(self) -> int | None:
        if self.size is None:
            return None
        return max(1, -(-self.size // self.chunk_size)) if self.size else 0

    def expected_length(self, index: int) -> int | None:
        """Exact length of chunk ``index`` when the size is known (None: at most ``chunk_size``)."""
        if self.size is None:
            return None
        count = self.count or 0
        if index >= count:
            raise ChunkIndexOutOfRange(index=index, chunks=count)
        return min(self.chunk_size, self.size - index * self.chunk_size)

    def missing(self, have: set[int]) -> list[int] | None:
        if self.size is None:
            if not have:
                return None
            return [i for i in range(max(have)) if i not in have]
        return [i for i in range(self.count or 0) if i not in have]

    def check_complete(self, chunks: list[ChunkRecord]) -> int:
        """Verify the chunks tile ``[0, size)`` exactly; return the total size."""
        have = {chunk.index for chunk in chunks}
        missing = self.missing(have)
        if missing:
            raise UploadIncomplete(missing=missing[:100], missing_count=len(missing))
        for position, chunk in enumerate(sorted(chunks, key=lambda c: c.index)):
            if chunk.index != position:
                raise UploadIncomplete(missing=[position], missing_count=1)
            is_last = position == len(chunks) - 1
            if not is_last and chunk.size != self.chunk_size:
                raise InvalidRequest("only the last chunk may be shorter than chunk_size", index=chunk.index)
        total = sum(chunk.size for chunk in chunks)
        if self.size is not None and total != self.size:
            raise SizeMismatch(expected=self.size, received=total)
        return total


def plan_for(session: UploadSession) -> ChunkPlan:
    return ChunkPlan(session.chunk_size, session.declared_size)
