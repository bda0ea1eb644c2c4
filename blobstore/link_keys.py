"""The link key of a store: what share links and signed upload targets are signed under, the same on
every replica without any setting.

``BLOBSTORE_LINK_KEY`` wins when it is set. Otherwise the key lives in the metadata database
(``signing_keys``, purpose ``links``): the first process that needs it stores one with an insert that does
nothing on conflict and reads back whatever is stored, so replicas starting together all end up with the
first one's key. That first key is the data directory's ``link-signing.key`` of an earlier version when
there is one (upload targets made before keep working), else 32 random bytes.

Each process keeps the key it read for :data:`REFRESH_SECONDS`, so a rotation on one replica reaches the
others within that time; a link that fails to verify makes the key be read again at once (at most once a
second), so a link made under a new key works everywhere straight away.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread

from blobstore.clock import Clock
from blobstore.errors import InvalidRequest, LinkRefused
from blobstore.records import SigningKeyRecords
from blobstore.signed_links import LinkSigner, key_from_text, key_text, new_key, read_key_file

PURPOSE: Final = "links"
REFRESH_SECONDS: Final = 5.0
RECHECK_SECONDS: Final = 1.0
"""How often a refused link may make the key be read again before its refresh is due."""


class LinkKeys:
    """The link signer of one metadata database (or of the setting)."""

    def __init__(
        self,
        repo: SigningKeyRecords,
        *,
        configured: str | None,
        data_dir: Path,
        clock: Clock,
        refresh_seconds: float = REFRESH_SECONDS,
    ) -> None:
        self.repo = repo
        self.data_dir = data_dir
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self._fixed = LinkSigner(configured.encode("utf-8")) if configured is not None else None
        self._signer: LinkSigner | None = None
        self._read_at = 0.0
        # Requests that find the key stale together share one read.
        self._lock = anyio.Lock()

    @property
    def from_setting(self) -> bool:
        return self._fixed is not None

    async def signer(self) -> LinkSigner:
        if self._fixed is not None:
            return self._fixed
        if self._signer is not None and time.monotonic() - self._read_at < self.refresh_seconds:
            return self._signer
        return await self._reload(self._signer)

    async def _reload(self, stale: LinkSigner | None) -> LinkSigner:
        async with self._lock:
            current = self._signer
            if current is not None and current is not stale:
                return current  # another request read it meanwhile
            text = await self.repo.signing_key(PURPOSE)
            if text is None:
                earlier = await anyio.to_thread.run_sync(read_key_file, self.data_dir)
                offered = key_text(earlier if earlier is not None else new_key())
                text = await self.repo.ensure_signing_key(PURPOSE, offered, now=self.clock())
            signer = LinkSigner(key_from_text(text))
            self._signer, self._read_at = signer, time.monotonic()
            return signer

    async def verify(
        self,
        path: str,
        expires: str | int | None,
        signature: str | None,
        *,
        now: datetime,
        minter: str | None = None,
    ) -> int:
        """:meth:`LinkSigner.verify` under the current key, read again first when a link is refused under a
        key read a while ago (another replica may have rotated it)."""
        signer = await self.signer()
        try:
            return signer.verify(path, expires, signature, now=now, minter=minter)
        except LinkRefused:
            if self._fixed is not None or time.monotonic() - self._read_at < RECHECK_SECONDS:
                raise
        fresh = await self._reload(signer)
        return fresh.verify(path, expires, signature, now=now, minter=minter)

    async def rotate(self) -> None:
        """A new key on every replica (here at once, elsewhere within :data:`REFRESH_SECONDS`): every share
        link and upload target signed so far is refused."""
        if self._fixed is not None:
            raise InvalidRequest("the link key is set by BLOBSTORE_LINK_KEY: change the setting to rotate it")
        async with self._lock:
            await self.repo.replace_signing_key(PURPOSE, key_text(new_key()), now=self.clock())
            self._signer = None
        await self._reload(None)
