"""Share links: a signed ``/share/<namespace>/<artifact id>`` that serves the artifact's bytes to whoever
holds it, and never outlives the authority of whoever minted it.

A link names its minter (``by``: the id of the token that made it, never its secret; ``local`` in local mode;
the actor name of an operator's own process, ``blobstore proxy`` or ``blobstore mcp`` over stdio), and the
signature covers it. Minting needs the ``read`` scope (a link hands on what the token could read itself) and
caps the expiry at the token's own. Serving checks, on every request and on whichever replica, that:

- a token minter is still active (neither revoked nor expired), of the link's namespace, with ``read``;
- a ``local`` link's local mode still lasts: the first active token ends it, as it ends local mode's console
  sessions;
- an operator's process, which holds no token, minted it: only the expiry (``BLOBSTORE_S3_PRESIGN_SECONDS``,
  at most an hour) and the link key bound it.

A link without a minter (made by an earlier version) is refused. Rotating the link key revokes every link.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final

from blobstore.auth import LOCAL_ACTOR, is_token_id, require_scope, token_state
from blobstore.clock import Clock
from blobstore.errors import InvalidRequest, LinkRefused
from blobstore.link_keys import LinkKeys
from blobstore.models import Artifact, Caller, Scope
from blobstore.records import TokenRecords
from blobstore.signed_links import SignedLink
from blobstore.signed_targets import LINK_ACTOR

SHARE_PREFIX: Final = "/share"
LINK_SCOPES: Final = frozenset({Scope.READ})
"""What a share link may do: read its one artifact's bytes."""


def share_path(namespace: str, artifact_id: str) -> str:
    return f"{SHARE_PREFIX}/{namespace}/{artifact_id}"


def capped(caller: Caller, expires: datetime) -> datetime:
    """``expires``, or the caller's token's expiry when that comes first."""
    if caller.expires_at is not None and caller.expires_at < expires:
        return caller.expires_at
    return expires


class ShareLinks:
    """Mints and checks the share links of one store."""

    def __init__(self, keys: LinkKeys, tokens: TokenRecords, clock: Clock) -> None:
        self.keys = keys
        self.tokens = tokens
        self.clock = clock

    async def mint(self, caller: Caller, artifact: Artifact, expires: datetime) -> SignedLink:
        """A link to ``artifact`` (one ``caller`` has opened: its namespace is checked) until ``expires``,
        capped at the caller's token's expiry; its ``expires_at`` says when it really ends."""
        require_scope(caller, Scope.READ)
        if caller.actor == LINK_ACTOR:
            raise InvalidRequest("a link cannot mint another link")
        signer = await self.keys.signer()
        return signer.sign(
            share_path(artifact.namespace, artifact.id), capped(caller, expires), minter=caller.actor
        )

    async def check(self, namespace: str, artifact_id: str, params: Mapping[str, str]) -> Caller:
        """Who a request for ``/share/<namespace>/<artifact id>?<params>`` is: a reader of that namespace
        when the link is valid and its minter's authority lasts; ``LinkRefused`` otherwise."""
        minter = params.get("by")
        if not minter:
            raise LinkRefused()
        now = self.clock()
        await self.keys.verify(
            share_path(namespace, artifact_id),
            params.get("expires"),
            params.get("sig"),
            now=now,
            minter=minter,
        )
        await self._still_minting(minter, namespace, now)
        return Caller(namespace=namespace, actor=LINK_ACTOR, scopes=LINK_SCOPES)

    async def _still_minting(self, minter: str, namespace: str, now: datetime) -> None:
        if is_token_id(minter):
            record = await self.tokens.get_token(minter)
            if (
                record is None
                or token_state(record, now) != "active"
                or record.namespace != namespace
                or Scope.READ not in record.scopes
            ):
                raise LinkRefused("the link's token is revoked or expired")
        elif minter == LOCAL_ACTOR and await self.tokens.count_tokens(now=now) > 0:
            raise LinkRefused("the link was made in local mode, which has ended")
        # Else an operator's own process minted it (no token): its expiry and the key bound it.
