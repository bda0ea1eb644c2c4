"""The view kinds, one module each (a :class:`~blobstore.views.kind.ViewKind` named ``KIND``).

:data:`KINDS` is their one registration: the HTTP edge mounts their routes, the MCP edge offers their
``read_artifact`` arguments and resources, and the worker runs their jobs, in this order.
"""

from __future__ import annotations

from typing import Final

from blobstore.views.kind import ViewKind
from blobstore.views.kinds import frames, ocr, pages, regions, segments, transcripts

KINDS: Final[tuple[ViewKind, ...]] = (
    pages.KIND,
    segments.KIND,
    frames.KIND,
    regions.KIND,
    ocr.KIND,
    transcripts.KIND,
)
