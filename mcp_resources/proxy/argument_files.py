"""The files behind one ``tools/call``'s path arguments: written before the call goes upstream, removed once
it is over.

Each handle at a ``"path"`` argument becomes a file of its own in the configured directory (made 0700 when
missing), created exclusively with mode 0600 whatever the umask, and filled from the store's stream block by
block, so the proxy holds one storage block at a time, however large the artifact. The name is random with a
readable tail, ``<16 hex>-<artifact name>``, ending in an extension that fits the bytes' type (tools often go
by it). :meth:`ArgumentFiles.remove` deletes them all; it runs when the upstream has answered, when the host
cancels the call, when the upstream is gone, and when writing one of them fails.
"""

from __future__ import annotations

import logging
import mimetypes
import os
import re
import secrets
from pathlib import Path, PurePath
from typing import Final

import anyio.to_thread

from blobstore.errors import BlobstoreError, from_os_error
from blobstore.media import file_extension
from blobstore.service import ArtifactService
from mcp_resources.tools.handles import Located

logger = logging.getLogger("mcp_resources.proxy")

FILE_MODE: Final = 0o600
DIRECTORY_MODE: Final = 0o700
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
_STEM_CHARS: Final = 48
_OCTET_STREAM: Final = "application/octet-stream"
_OPEN_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def file_name(name: str, mime_type: str) -> str:
    """A fresh file name for bytes named ``name`` of type ``mime_type``.

    The name's own extension is kept when it agrees with the type (``.jpeg`` for ``image/jpeg``) or the
    type says nothing (``application/octet-stream``); otherwise the type's usual extension is used.
    """
    base = mime_type.split(";", 1)[0].strip().lower()
    leaf = PurePath(name).name
    suffix = PurePath(leaf).suffix.lower()
    stem = leaf[: -len(suffix)] if suffix else leaf
    guessed = mimetypes.guess_type(f"x{suffix}")[0] if suffix else None
    chosen = suffix if suffix and (guessed == base or base == _OCTET_STREAM) else file_extension(base)
    readable = _UNSAFE.sub("_", stem).strip("._")[:_STEM_CHARS] or "artifact"
    return f"{secrets.token_hex(8)}-{readable}{_UNSAFE.sub('', chosen)}"


def _create(directory: Path, name: str) -> int:
    if not directory.exists():
        directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        os.chmod(directory, DIRECTORY_MODE)  # mkdir's mode passes through the umask
    fd = os.open(directory / name, _OPEN_FLAGS, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _remove(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            # Nothing the call's answer could say; the operator learns which file stays.
            logger.warning("blobstore proxy: cannot remove the argument file %s: %s", path, exc.strerror)


class ArgumentFiles:
    """The files written for one call's path arguments."""

    def __init__(self, service: ArtifactService, directory: Path) -> None:
        self.service = service
        self.directory = directory
        self.paths: list[Path] = []

    async def write(self, found: Located) -> Path:
        """The located bytes in a new 0600 file; its absolute path. A file that cannot be made or written
        is ``storage_unavailable`` (``storage_full`` on a full disk), the directory named in the log only."""
        path = self.directory / file_name(found.artifact.name, found.mime_type)
        try:
            fd = await anyio.to_thread.run_sync(_create, self.directory, path.name)
        except OSError as exc:
            raise self._failed(exc) from None
        # Listed before a byte is written, so a failed or cancelled write is removed with the rest.
        self.paths.append(path)
        try:
            if found.view is not None:
                await anyio.to_thread.run_sync(_write_all, fd, found.view)
            elif found.span.length:
                span = found.span
                async for piece in self.service.stream(found.blob, span.offset, span.end):
                    await anyio.to_thread.run_sync(_write_all, fd, piece)
        except OSError as exc:
            raise self._failed(exc) from None
        finally:
            os.close(fd)  # no await here: a cancelled task must still close it
        return path

    def _failed(self, exc: OSError) -> BlobstoreError:
        logger.warning(
            "blobstore proxy: cannot write a path argument's file in %s: %s", self.directory, exc.strerror
        )
        return from_os_error(exc)

    async def remove(self) -> None:
        """Delete every file written (idempotent)."""
        paths, self.paths = self.paths, []
        if paths:
            await anyio.to_thread.run_sync(_remove, paths)


__all__ = ["DIRECTORY_MODE", "FILE_MODE", "ArgumentFiles", "file_name"]
