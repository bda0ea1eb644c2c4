"""The interfaces between the relay and its parts: how they answer the host, and the offloader."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol


class Replies(Protocol):
    """How a part of the relay answers the host."""

    async def to_host(self, message: bytes | Mapping[str, Any]) -> None: ...

    async def answer(self, host_id: Any, fragment: Mapping[str, Any]) -> None: ...


class OwnRequests(Protocol):
    async def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send the proxy's own request upstream; its ``result``/``error`` fragment."""


class ResultOffloader(Protocol):
    async def tool_result(
        self,
        *,
        tool: str,
        arguments: Mapping[str, Any] | None,
        output_schema: Mapping[str, Any] | None,
        result: dict[str, Any],
    ) -> dict[str, Any] | None: ...

    async def resource_read(
        self, *, uri: str, params: Mapping[str, Any], result: dict[str, Any]
    ) -> dict[str, Any] | None: ...


OffloaderFactory = Callable[[str | None, str], ResultOffloader]
"""Builds the offloader once the read tool's name (None: the read tool is off) and the upstream's name are
known."""
