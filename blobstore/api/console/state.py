"""What the console keeps while the app runs: its thumbnails. Sessions and the link key live in the metadata
database (``Runtime.console_sessions``, ``ArtifactService.share_links``), so every replica shares them."""

from __future__ import annotations

from starlette.applications import Starlette

from blobstore.api.console.thumbnails import ThumbnailCache
from blobstore.config import Settings

STATE_KEY = "blobstore_console"


class ConsoleState:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.thumbnails = ThumbnailCache()


def console_state(app: Starlette) -> ConsoleState:
    state = getattr(app.state, STATE_KEY, None)
    if not isinstance(state, ConsoleState):
        raise RuntimeError("the console is not installed on this app")
    return state
