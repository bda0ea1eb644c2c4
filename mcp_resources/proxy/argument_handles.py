"""Artifact URIs in the host's ``tools/call`` arguments, resolved before the call goes upstream.

Every ``tools/list`` page the upstream answers passes :meth:`ToolArguments.learn` (each tool's binary sites,
found in its original ``inputSchema`` by :func:`~mcp_resources.tools.binary_schema.binary_sites`) and
:meth:`ToolArguments.advertised` (those schemas rewritten by
:func:`~mcp_resources.tools.binary_schema.advertise_handles`, so the model knows a handle is accepted). A
``tools/call`` whose arguments hold a handle at a remembered site passes :meth:`ToolArguments.prepared`:
:class:`~mcp_resources.tools.handles.ArgumentHandles` replaces the handle with the bytes as the proxy's
caller, and the request goes upstream re-serialised; a handle that cannot be resolved is answered to the host
here, as a tool error (or, for the store's own failures, a JSON-RPC error), and nothing goes upstream.

The arguments ``--offload-config`` names (:class:`~mcp_resources.proxy.argument_config.ArgumentModes`) are
sites of their own, whatever their schema says: at a ``"path"`` one the handle's bytes are written to a file
(:class:`~mcp_resources.proxy.argument_files.ArgumentFiles`) and the argument becomes its path; at a
``"url"`` one the argument becomes a signed download URL (:class:`~mcp_resources.tools.download_links
.DownloadLinks`). Every handle of a call is looked up before any file is written, so a call refused here
leaves nothing behind; the files of a call that went upstream are removed by :meth:`Prepared.release`, which
the relay calls once the call is over.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import INTERNAL_ERROR

from blobstore.errors import BlobstoreError, InvalidRequest
from blobstore.models import Caller
from mcp_resources.errors import jsonrpc_code, to_mcp_error, tool_failure
from mcp_resources.proxy.argument_config import ArgumentModes
from mcp_resources.proxy.argument_files import ArgumentFiles
from mcp_resources.tools.binary_schema import (
    BinarySite,
    EveryItem,
    Form,
    Key,
    Slot,
    advertise_handles,
    advertise_named,
    binary_sites,
)
from mcp_resources.tools.download_links import DownloadLinks
from mcp_resources.tools.handles import ArgumentHandles, Located
from mcp_resources.uris import parse_store_uri


@dataclass(frozen=True, slots=True)
class Refusal:
    """The answer to a call whose handles could not be resolved: a ``result`` or ``error`` fragment."""

    fragment: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A call ready to go upstream, and the files its path arguments were written to."""

    message: dict[str, Any]
    files: ArgumentFiles | None = None

    async def release(self) -> None:
        """The call is over (answered, cancelled, or its upstream gone): remove its files."""
        if self.files is not None:
            await self.files.remove()


def refusal(exc: BlobstoreError) -> Refusal:
    """A failure the model can act on is the tool's result; the store's own is a protocol error."""
    if jsonrpc_code(exc.code) == INTERNAL_ERROR:
        error = to_mcp_error(exc)
        return Refusal({"error": {"code": error.code, "message": error.message, "data": error.data}})
    failure = tool_failure(exc).model_dump(by_alias=True, mode="json", exclude_none=True)
    return Refusal({"result": failure})


class ToolArguments:
    """The binary sites of the upstream's tools, the path and URL arguments of the config, and the handles
    in calls to them."""

    def __init__(
        self,
        handles: ArgumentHandles,
        caller: Caller,
        modes: ArgumentModes | None = None,
        links: DownloadLinks | None = None,
    ) -> None:
        self.handles = handles
        self.caller = caller
        self.modes = modes or ArgumentModes()
        self.links = links or DownloadLinks(handles.service)
        self._sites: dict[str, list[BinarySite]] = {}

    def learn(self, tools: Mapping[str, Mapping[str, Any]]) -> None:
        """Remember the binary sites of the upstream's tools, from their schemas as the upstream sent them."""
        self._sites = {}
        for name, tool in tools.items():
            schema = tool.get("inputSchema")
            sites = binary_sites(schema if isinstance(schema, dict) else None)
            if sites:
                self._sites[name] = sites

    def sites(self, tool: str) -> list[BinarySite]:
        """Where a tool's arguments take a handle: the config's named arguments (a string, or each item of an
        array), then the schema's binary sites outside them."""
        named = self.modes.for_tool(tool)
        sites = [
            BinarySite(path, form)
            for name, form in named.items()
            for path in ((Key(name),), (Key(name), EveryItem()))
        ]
        for site in self._sites.get(tool, []):
            first = site.path[0] if site.path else None
            if not (isinstance(first, Key) and first.name in named):
                sites.append(site)
        return sites

    def advertised(self, tools: list[Any]) -> list[Any] | None:
        """A ``tools/list`` page's tools with each binary, path or URL property saying it takes a handle;
        None when no tool of the page has one (the page goes to the host as it came)."""
        changed = False
        listed: list[Any] = []
        for tool in tools:
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            if not isinstance(schema, dict):
                listed.append(tool)
                continue
            named = self.modes.for_tool(str(tool.get("name")))
            rewritten = advertise_named(schema, named) if named else schema
            if binary_sites(schema):
                rewritten = advertise_handles(rewritten)
            if rewritten is schema:
                listed.append(tool)
            else:
                listed.append({**tool, "inputSchema": rewritten})
                changed = True
        return listed if changed else None

    def holds_handles(self, params: Mapping[str, Any]) -> bool:
        """Whether a call's arguments hold an artifact URI at a site of its tool."""
        arguments = params.get("arguments")
        sites = self.sites(str(params.get("name")))
        return (
            bool(sites) and isinstance(arguments, dict) and bool(self.handles.handle_slots(arguments, sites))
        )

    async def prepared(self, message: dict[str, Any]) -> Prepared | Refusal:
        """The ``tools/call`` request to send upstream (the same message object when it holds no handle)
        with the files written for it, or the answer the host gets instead (nothing left written)."""
        params = message.get("params")
        if not isinstance(params, dict) or not self.holds_handles(params):
            return Prepared(message)
        tool = str(params.get("name"))
        directory = self.modes.directory
        files = ArgumentFiles(self.handles.service, directory) if directory is not None else None
        try:
            arguments = await self._resolved(tool, params["arguments"], files)
        except BaseException as exc:
            if files is not None:
                await files.remove()
            if isinstance(exc, BlobstoreError):
                return refusal(exc)
            raise
        return Prepared({**message, "params": {**params, "arguments": arguments}}, files)

    async def _resolved(
        self, tool: str, arguments: dict[str, Any], files: ArgumentFiles | None
    ) -> dict[str, Any]:
        """A copy of ``arguments`` with every handle replaced; every one is looked up (and the cap checked)
        before any byte is read or written."""
        copied: dict[str, Any] = copy.deepcopy(arguments)
        slots = self.handles.handle_slots(copied, self.sites(tool))
        carried = [slot for slot in slots if slot.site.form is not Form.URL]
        located = await self.handles.locate(self.caller, carried)
        linked = [await self._whole(slot) for slot in slots if slot.site.form is Form.URL]
        for found in located:
            if found.slot.site.form is Form.PATH:
                assert files is not None  # the config names no path argument without a directory
                started = time.monotonic()
                found.slot.replace(str(await files.write(found)))
                self.handles.audit_resolved(self.caller, tool, found, started)
            else:
                await self.handles.fill(self.caller, tool, found)
        for found in linked:
            started = time.monotonic()
            found.slot.replace((await self.links.link(self.caller, found.artifact, found.blob)).url)
            self.handles.audit_resolved(self.caller, tool, found, started)
        return copied

    async def _whole(self, slot: Slot) -> Located:
        """A handle at a URL argument: the whole artifact, since a download URL serves all of it."""
        found = await self.handles.look_up(self.caller, slot)
        ref = parse_store_uri(slot.value)
        if found.view is not None or ref is None or ref.has_window:
            raise InvalidRequest(
                f"{slot.name} takes the URL of a whole artifact: pass blobstore://artifacts/{{id}}, not a "
                "window or a view of it",
                argument=slot.name,
            )
        return found


__all__ = ["Prepared", "Refusal", "ToolArguments", "refusal"]
