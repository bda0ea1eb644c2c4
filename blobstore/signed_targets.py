"""Signed upload targets: a tus ``PATCH`` that whoever holds the link may send, without a token, until it
expires (the ``files/authorizeUpload`` answer of SEP-2631, ``mcp_resources.tools.files_capability``).

The link is the upload's tus URL with ``ns`` (its namespace), ``expires`` and ``sig`` in the query; the
signature (:mod:`blobstore.signed_links`, the key the console's share links use) covers
``/tus/<namespace>/<upload id>`` and the expiry, so neither the upload, its namespace nor the expiry can be
changed. The HTTP edge verifies it (``blobstore.api.routes.tus``), the MCP edge signs it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final
from urllib.parse import urlencode

from blobstore.models import Caller, Scope
from blobstore.signed_links import LinkSigner

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


__all__ = ["TUS_PREFIX", "link_caller", "signed_message", "upload_target"]
