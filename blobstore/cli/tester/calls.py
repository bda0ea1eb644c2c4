"""One ``tools/call`` or ``resources/read`` on a connected client, and its report: the blocks described and
saved, the links followed, the host's view, in lines for a person and as JSON for a script.

A tool is looked up in ``tools/list`` before it is called (a name the server does not offer is said so, with
the names it does offer), and its arguments are checked against its ``inputSchema`` before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import anyio.lowlevel
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.types import Tool

from blobstore.cli.tester.arguments import build_arguments, upload_files
from blobstore.cli.tester.blocks import (
    Block,
    count,
    describe_block,
    describe_contents,
    file_name,
    media_facts,
    save,
    shown_path,
    stem_of,
    structured_lines,
)
from blobstore.cli.tester.follow import Fetched, link_window, read_to_file
from blobstore.cli.tester.progress import Bars
from blobstore.cli.tester.target import CommandFailure, mcp_error_line
from blobstore.media import PROBE_BYTES, file_extension

if TYPE_CHECKING:
    # Imported where --as-host asks for it: the proxy's modules bring the whole store with them.
    from blobstore.cli.tester.as_host import HostView
    from blobstore.config import Settings


async def list_tools(client: Client) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.update((tool.name, tool) for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def find_tool(tools: Mapping[str, Tool], name: str, server: str) -> Tool:
    found = tools.get(name)
    if found is None:
        offered = ", ".join(sorted(tools)) or "no tools"
        raise CommandFailure(f"{server} has no tool {name!r} (it offers: {offered})", status=2)
    return found


@dataclass(frozen=True)
class ArgumentSources:
    """Where a call's arguments come from (see :func:`blobstore.cli.tester.arguments.build_arguments`)."""

    base: Mapping[str, Any] = field(default_factory=dict)
    json_text: str | None = None
    json_source: str = "--json"
    assignments: Sequence[str] = ()
    files: Sequence[str] = ()
    relative_to: Path | None = None


@dataclass(frozen=True)
class SaveOptions:
    directory: Path
    save: bool = True
    force: bool = False
    follow_links: bool = False


@dataclass(frozen=True)
class HostOptions:
    """``--as-host``: the profile, and the store the proxy's offloads go to."""

    profile: str
    settings: Callable[[], Settings]


@dataclass
class Report:
    """What one call or read gave, described."""

    what: str
    blocks: list[Block]
    result: dict[str, Any]
    is_error: bool = False
    error: dict[str, Any] | None = None
    host: HostView | None = None
    problems: list[str] = field(default_factory=list)
    """What went wrong beside the answer: invalid base64, a file not saved, a link that could not be read."""

    @property
    def structured(self) -> Any:
        return self.result.get("structuredContent")

    @property
    def ok(self) -> bool:
        return not self.is_error and not self.problems

    def saved(self) -> list[Path]:
        return [Path(block.facts["saved"]) for block in self.blocks if "saved" in block.facts]

    def lines(self) -> list[str]:
        shown = [line for block in self.blocks for line in block.lines()]
        if not self.blocks:
            shown.append("(no content blocks)")
        if "structuredContent" in self.result:
            shown.extend(structured_lines(self.structured))
        if self.is_error:
            shown.append(error_line(self.error))
        if self.host is not None:
            shown.append("")
            shown.extend(self.host.lines())
        return shown

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "isError": self.is_error,
            "content": [block.as_json() for block in self.blocks],
            "problems": self.problems,
        }
        if "structuredContent" in self.result:
            found["structuredContent"] = self.structured
        if self.error is not None:
            found["error"] = self.error
        if self.host is not None:
            found["host"] = self.host.as_json()
        return found


def error_line(error: Mapping[str, Any] | None) -> str:
    code = (error or {}).get("code")
    message = (error or {}).get("message") or "no message"
    return f"isError: true, the tool failed (code {code}): {message}" if code else f"isError: true: {message}"


def tool_error(result: Mapping[str, Any]) -> dict[str, Any]:
    """The code and message of an ``isError`` result: a store's ``structuredContent.error``, else its text."""
    structured = result.get("structuredContent")
    error = structured.get("error") if isinstance(structured, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return {"code": error.get("code"), "message": error["message"]}
    texts = [
        b.get("text") for b in result.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"
    ]
    return {"code": None, "message": next((t for t in texts if isinstance(t, str) and t), None)}


def link_file_name(stem: str, index: int, block: Mapping[str, Any]) -> str:
    """``STEM_INDEX.ext`` for a followed link: the extension of its MIME type, else of its name."""
    mime = block.get("mimeType")
    if isinstance(mime, str) and mime and mime != "application/octet-stream":
        return file_name(stem, index, mime)
    suffix = PurePosixPath(str(block.get("name") or "")).suffix
    safe = "".join(ch for ch in suffix if ch.isalnum() or ch == ".")
    return f"{stem}_{index}{safe if len(safe) > 1 else file_extension('application/octet-stream')}"


def fetched_notes(fetched: Fetched) -> list[str]:
    reads = count(fetched.reads, "read" if fetched.reads == 1 else "reads")
    if fetched.verified:
        check = "sha256 verified"
    else:
        check = f"sha256 {fetched.sha256} (the server stated none to check it against)"
    return [f"read {count(fetched.size, 'bytes')} in {reads}, saved {shown_path(fetched.path)}; {check}"]


def file_facts(fetched: Fetched) -> tuple[list[str], dict[str, Any]]:
    """The media facts of a file read in windows, from its head."""
    with fetched.path.open("rb") as handle:
        head = handle.read(PROBE_BYTES)
    return media_facts(fetched.mime_type or "application/octet-stream", head)


async def follow_link(
    client: Client, block: Block, wire: Mapping[str, Any], stem: str, options: SaveOptions, bars: Bars
) -> None:
    first_window, sha256 = link_window(wire)
    path = options.directory / link_file_name(stem, block.index, wire)
    fetched = await read_to_file(
        client,
        str(wire.get("uri") or ""),
        lambda _mime: path,
        force=options.force,
        first_window=first_window,
        expected_sha256=sha256,
        progress=bars.transfer(str(wire.get("name") or wire.get("uri"))),
    )
    bars.stop()
    block.notes.extend(fetched_notes(fetched))
    block.facts["followed"] = fetched.as_json()


def _sanitized(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name).strip("._") or "call"


async def call_tool(
    client: Client,
    *,
    server: str,
    tool: str,
    sources: ArgumentSources,
    options: SaveOptions,
    bars: Bars,
    stem: str | None = None,
    as_host: HostOptions | None = None,
) -> Report:
    tools = await list_tools(client)
    found = find_tool(tools, tool, server)
    arguments = build_arguments(
        schema=found.input_schema,
        json_text=sources.json_text,
        json_source=sources.json_source,
        assignments=sources.assignments,
        files=sources.files,
        base=sources.base,
        server_tools=tools,
        relative_to=sources.relative_to,
    )
    await upload_files(client, arguments, bars.transfer)
    bars.stop()
    update = bars.call(tool)

    class Progress(ProgressFnT):
        async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
            update(progress, total, message)

    try:
        answer = await client.call_tool(tool, arguments.values, progress_callback=Progress())
        # The SDK runs each progress callback as a task of its own: let one that came before the answer
        # draw its step before the bar stops.
        await anyio.lowlevel.checkpoint()
    finally:
        bars.stop()
    result: dict[str, Any] = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
    result.pop("resultType", None)
    content = result.get("content") or []
    blocks = [describe_block(i, b if isinstance(b, dict) else {}) for i, b in enumerate(content)]
    report = Report(f"call {tool}", blocks, result, is_error=bool(result.get("isError")))
    if report.is_error:
        report.error = tool_error(result)
    name = _sanitized(stem or tool)
    for block, wire in zip(blocks, content, strict=True):
        if options.save:
            save(block, options.directory, name, force=options.force)
        if options.follow_links and block.kind == "resource_link":
            try:
                await follow_link(client, block, wire, name, options, bars)
            except CommandFailure as exc:
                block.problem = str(exc)
                block.notes.append(f"not followed: {exc}")
            except MCPError as exc:
                block.problem = f"resources/read: {mcp_error_line(exc)}"
                block.notes.append(f"not followed: {block.problem}")
        if block.problem is not None:
            report.problems.append(f"{block.name}: {block.problem}")
    if as_host is not None:
        from blobstore.cli.tester.as_host import host_view

        report.host = await host_view(
            as_host.settings(),
            profile=as_host.profile,
            tool=tool,
            arguments=arguments.values,
            output_schema=found.output_schema,
            result=result,
            upstream_name=(client.server_info.name if client.server_info else None) or server,
            upstream_tools=set(tools),
        )
        if options.save:
            for block in report.host.blocks:
                save(block, options.directory, f"{name}.{as_host.profile}", force=options.force)
                if block.problem is not None:
                    report.problems.append(f"as {as_host.profile}: {block.name}: {block.problem}")
    return report


def window_query(uri: str, offset: int | None, length: int | None) -> str:
    """``uri`` with ``offset``/``length`` added as this store's window query."""
    if offset is None and length is None:
        return uri
    query = "&".join(f"{k}={v}" for k, v in (("offset", offset), ("length", length)) if v is not None)
    return f"{uri}{'&' if '?' in uri else '?'}{query}"


async def read_resource(
    client: Client, uri: str, *, options: SaveOptions, bars: Bars, stem: str | None = None
) -> Report:
    """``resources/read`` of ``uri``: each contents item described and saved; where the server asks for
    windows (``range_required``), every window read into one file and checked against its SHA-256."""
    name = _sanitized(stem) if stem else stem_of(uri)
    try:
        answer = await client.read_resource(uri)
    except MCPError as exc:
        data = exc.data if isinstance(exc.data, dict) else {}
        if data.get("reason") != "range_required" or not options.save:
            raise CommandFailure(f"resources/read {uri}: {mcp_error_line(exc)}") from None
        first = data.get("first")
        fetched = await read_to_file(
            client,
            uri,
            lambda mime: options.directory / file_name(name, 0, mime),
            force=options.force,
            first_window=first if isinstance(first, str) else None,
            progress=bars.transfer(uri),
        )
        bars.stop()
        words, facts = file_facts(fetched)
        mime = fetched.mime_type or "application/octet-stream"
        summary = ", ".join([uri, mime, count(fetched.size, "bytes"), *words])
        block = Block(
            0,
            "blob",
            summary,
            {
                "uri": uri,
                "mimeType": mime,
                "bytes": fetched.size,
                "sha256": fetched.sha256,
                **facts,
                "saved": str(fetched.path),
                "followed": fetched.as_json(),
            },
            label="Contents",
        )
        block.notes.extend(fetched_notes(fetched))
        return Report(f"read {uri}", [block], {})
    result: dict[str, Any] = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
    contents = result.get("contents") or []
    blocks = [
        describe_contents(i, c if isinstance(c, dict) else {}, kind=None, label="Contents")
        for i, c in enumerate(contents)
    ]
    report = Report(f"read {uri}", blocks, {})
    for block in blocks:
        if options.save:
            save(block, options.directory, name, force=options.force)
        if block.problem is not None:
            report.problems.append(f"{block.name}: {block.problem}")
    return report
