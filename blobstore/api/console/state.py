"""What the console keeps while the app runs: the link signer (its key loaded on first use) and thumbnails."""

from __future__ import annotations

import threading

import anyio.to_thread
from starlette.applications import Starlette

from blobstore.api.console.thumbnails import ThumbnailCache
from blobstore.config import Settings
from blobstore.errors import InvalidRequest
from blobstore.signed_links import LinkSigner, load_key, rotate_key

STATE_KEY = "blobstore_console"


class ConsoleState:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.thumbnails = ThumbnailCache()
        self._signer: LinkSigner | None = None
        self._csrf_key: bytes | None = None
        # Two first requests at once must not each make a key file: the second would replace the first's.
        self._key_lock = threading.Lock()

    def _load(self, rotate: bool = False) -> LinkSigner:
        with self._key_lock:
            if rotate:
                key = rotate_key(self.settings.data_dir)
            elif self._signer is not None:
                return self._signer
            else:
                key = load_key(self.settings.data_dir, self.settings.link_key)
            signer = LinkSigner(key)
            self._csrf_key = signer.derive("console-csrf")
            self._signer = signer
            return signer

    async def signer(self) -> LinkSigner:
        if self._signer is not None:
            return self._signer
        return await anyio.to_thread.run_sync(self._load)

    async def csrf_key(self) -> bytes:
        await self.signer()
        assert self._csrf_key is not None
        return self._csrf_key

    async def rotate(self) -> None:
        """A new link key: every share link made so far is refused from now on (and the CSRF tokens of open
        pages change: they are derived from the same key)."""
        if self.settings.link_key is not None:
            raise InvalidRequest("the link key is set by BLOBSTORE_LINK_KEY: change the setting to rotate it")
        await anyio.to_thread.run_sync(self._load, True)


def console_state(app: Starlette) -> ConsoleState:
    state = getattr(app.state, STATE_KEY, None)
    if not isinstance(state, ConsoleState):
        raise RuntimeError("the console is not installed on this app")
    return state
