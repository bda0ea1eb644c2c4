"""The store's one clock, shared by every collaborator with a deadline."""

from __future__ import annotations

from datetime import datetime

from blobstore.clock import Clock, utcnow


class StoreClock:
    """A clock whose time source may be swapped while the store runs.

    The composition root hands the same instance to the service, the upload sessions, tus, the authenticator
    and cleanup, so that setting :attr:`source` (an admin's or a test's time travel) moves every rule with a
    deadline at once.
    """

    __slots__ = ("source",)

    def __init__(self, source: Clock = utcnow) -> None:
        self.source = source

    def __call__(self) -> datetime:
        return self.source()
