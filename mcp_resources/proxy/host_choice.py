"""Which host the results go to: the profile ``--host-profile`` names, or, without it, the one the client's
``clientInfo`` names at ``initialize`` (or in the ``_meta`` of a 2026-07-28 ``server/discover``).

The choice is said twice: on the proxy's log, and in the first answer the host gets from it (the
handshake's ``instructions``), so that a model and its user both see which caps and modalities apply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp_resources.proxy.lines import profile_line
from mcp_resources.proxy.rules import OffloadRules, profile_for_client

logger = logging.getLogger("mcp_resources.proxy.host")


class HostChoice:
    """The rules in force: fixed by ``--host-profile``, or picked from the client's name once it is known."""

    def __init__(self, rules: OffloadRules, *, fixed: bool, build: Callable[[str], OffloadRules]) -> None:
        self.rules = rules
        self.fixed = fixed
        self._build = build
        self.reason = "--host-profile names it" if fixed else "no client has named itself yet"
        self.listeners: list[Callable[[OffloadRules], None]] = []
        """Called with the rules picked (the store's window caps follow the profile)."""

    def pick(self, client_info: Any) -> str:
        """The profile for the client named ``client_info``, unless ``--host-profile`` fixed one; the line
        that says which is in force and why."""
        if not self.fixed:
            name, self.reason = profile_for_client(client_info)
            self.rules = self._build(name)
            for listener in self.listeners:
                listener(self.rules)
        line = profile_line(self.rules.profile, self.reason)
        logger.info("blobstore proxy: %s", line)
        return line


def with_instructions(result: dict[str, Any], line: str) -> dict[str, Any]:
    """A handshake result whose ``instructions`` end with ``line`` (after the upstream's own)."""
    own = result.get("instructions")
    text = f"{own}\n\n{line}" if isinstance(own, str) and own else line
    return {**result, "instructions": text}
