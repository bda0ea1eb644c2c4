"""Resume state for uploads from files: one small JSON file per (server, file) under the user's cache.

The key is the server URL, the file's absolute path, its size and its mtime, so an edited file never resumes
into an old upload. The file holds only ids and digests (never a token), written 0600 through a temp file and
a rename so that a crash leaves either the old or the new state, never half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from blobstore.client.problems import local_file_error

_VERSION = 1


def default_state_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-blobstore" / "uploads"


@dataclass(frozen=True, slots=True)
class FileIdentity:
    server_url: str
    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, server_url: str, path: Path) -> FileIdentity:
        resolved = path.resolve()
        stat = resolved.stat()
        return cls(server_url.rstrip("/"), str(resolved), stat.st_size, stat.st_mtime_ns)

    @property
    def key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ResumeState:
    upload_id: str
    chunk_size: int
    sha256: str | None
    """None until known: a fresh upload hashes the file from its chunks while it sends them."""
    identity: FileIdentity


class UploadStateStore:
    """Blocking file work; callers run it in a worker thread."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_state_dir()

    def path_for(self, identity: FileIdentity) -> Path:
        return self.directory / f"{identity.key}.json"

    def load(self, identity: FileIdentity) -> ResumeState | None:
        try:
            text = self.path_for(identity).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise local_file_error(exc) from exc
        try:
            data = json.loads(text)
            if data.get("version") != _VERSION or FileIdentity(**data["identity"]) != identity:
                return None
            sha256 = data["sha256"]
            if sha256 is not None and not isinstance(sha256, str):
                return None
            return ResumeState(str(data["upload_id"]), int(data["chunk_size"]), sha256, identity)
        except (ValueError, KeyError, TypeError):
            # A torn or foreign file is as good as none: the upload starts over.
            return None

    def save(self, state: ResumeState) -> None:
        target = self.path_for(state.identity)
        body = {
            "version": _VERSION,
            "upload_id": state.upload_id,
            "chunk_size": state.chunk_size,
            "sha256": state.sha256,
            "identity": asdict(state.identity),
        }
        temp = target.with_suffix(f".{os.getpid()}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(body, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, target)
        except OSError as exc:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
            raise local_file_error(exc) from exc

    def remove(self, identity: FileIdentity) -> None:
        try:
            self.path_for(identity).unlink(missing_ok=True)
        except OSError as exc:
            raise local_file_error(exc) from exc
