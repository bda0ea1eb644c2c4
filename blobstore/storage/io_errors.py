"""The one translation of a storage write's ``OSError`` into the catalogue.

Every backend's blocking file work (local disk; the spool of an S3 chunk) runs inside
:func:`mapped_os_errors`, so a full disk (``ENOSPC``, ``EDQUOT``) is ``StorageFull`` and any other I/O
failure ``StorageUnavailable``, whichever call raised it: a write, an ``fsync``, a directory ``fsync``, a link
or a rename.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from blobstore.errors import from_os_error


def without_path(exc: OSError) -> OSError:
    """The same error for the cause chain, without the file name (it contains the digest)."""
    return OSError(exc.errno, exc.strerror)


@contextmanager
def mapped_os_errors() -> Iterator[None]:
    """Raise an ``OSError`` of the body as the catalogue's error, its path left out of the cause chain."""
    try:
        yield
    except OSError as exc:
        raise from_os_error(exc) from without_path(exc)
