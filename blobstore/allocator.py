"""Ask the C allocator to keep freed memory for the next large buffer instead of handing it back at once.

A 1 MiB MCP window makes about 4 MiB of short-lived buffers: the blocks read and checked, the window, its
base64 text and the line's bytes. With glibc's defaults each of them came from fresh pages (mapped for the
buffer and unmapped after it, or trimmed off the top of the heap once freed), so every window paid about
1,000 page faults, each a zeroed page: half of ``blobstore mcp``'s CPU per window on a 2-vCPU VM. Buffers
below 4 MiB from the heap, and up to 32 MiB of free heap kept, let a window reuse the previous window's pages.

Only for the stdio MCP server, whose large buffers are whole windows and their base64 texts.
``blobstore serve`` keeps the defaults: there a large body grows 1 MiB batches piece by piece, which heap
memory copies on growth where a mapped chunk is moved by ``mremap``; heap settings cost a single-request
upload more CPU than they saved (docs/performance.md, "Fifth pass").
"""

from __future__ import annotations

import ctypes
import sys

# ``mallopt`` parameter numbers (glibc ``malloc.h``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 4 * 1024 * 1024
TRIM_THRESHOLD = 32 * 1024 * 1024


def keep_freed_memory(mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Serve buffers below ``mmap_threshold`` bytes from the heap and keep up to ``trim_threshold`` bytes of
    it free; False where there is no glibc ``mallopt`` to take the settings."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # musl's mallopt is a stub that returns 0: nothing was set there.
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
