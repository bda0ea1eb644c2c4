"""Signed upload targets: a tus ``PATCH`` that whoever holds the link may send, without a token, until it
expires (the ``files/authorizeUpload`` answer of SEP-2631, ``mcp_resources.files_capability``).

The link is the upload's tus URL with ``ns`` (its namespace), ``expires`` and ``sig`` in the query; the
signature (:mod:`blobstore.signed_links`, the key the console's share links use) covers
``/tus/<namespace>/<upload id>`` and the expiry, so neither the upload, its namespace nor the expiry can be
changed. The HTTP edge verifies it (``blobstore.api.routes.tus``), the MCP edge signs it.
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlencode

from blobstore.models import Caller, Scope
from blobstore.signed_links import LinkSigner, load_key

TUS_PREFIX: Final = "/tus"
LINK_ACTOR: Final = "link"
UPLOAD_SCOPES: Final = frozenset({Scope.READ, Scope.WRITE})
"""A link may send its upload's bytes and ask for its offset (``HEAD``), nothing else."""


def signed_message(namespace: str, upload_id: str) -> str:
    """What an upload link's signature covers."""
    return f"{TUS_PREFIX}/{namespace}/{upload_id}"


def upload_target(signer: LinkSigner, namespace: str, upload_id: str, expires: datetime) -> str:
    """The path and query of a signed tus target (append it to the server's base URL)."""
    link = signer.sign(signed_message(namespace, upload_id), expires)
    query = urlencode({"ns": namespace, "expires": link.expires, "sig": link.signature})
    return f"{TUS_PREFIX}/{upload_id}?{query}"


def link_caller(namespace: str) -> Caller:
    return Caller(namespace=namespace, actor=LINK_ACTOR, scopes=UPLOAD_SCOPES)


class Signers:
    """The link signer of one data directory, its key loaded once (blocking: call from a worker thread)."""

    def __init__(self, data_dir: Path, configured: str | None) -> None:
        self.data_dir = data_dir
        self.configured = configured
        self._signer: LinkSigner | None = None
        # Two first uses at once must not each make a key file: the second would replace the first's.
        self._lock = threading.Lock()

    @property
    def loaded(self) -> LinkSigner | None:
        return self._signer

    def load(self) -> LinkSigner:
        with self._lock:
            if self._signer is None:
                self._signer = LinkSigner(load_key(self.data_dir, self.configured))
            return self._signer


__all__ = ["TUS_PREFIX", "Signers", "link_caller", "signed_message", "upload_target"]
