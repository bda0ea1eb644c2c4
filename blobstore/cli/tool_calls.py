"""``blobstore call``, ``tools``, ``resources`` and ``read``: any MCP server's tools and resources from a
terminal, binary content included (docs/client.md, "Calling any MCP server").

The server is a command after ``--`` (stdio) or ``--url`` (streamable HTTP). Every binary block a call returns
is described in one line and saved as ``TOOL_N.ext``; ``--as-host PROFILE`` adds what that host's model
receives through ``blobstore proxy``. A failure is one line on stderr and a non-zero exit status: 2 for what
the command asked (a tool the server does not offer, arguments its schema refuses), 1 for the rest (a server
that does not start or answer, a tool that answers ``isError``, a block with invalid base64).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click

from blobstore.cli import main
from blobstore.cli.common import HOST_PROFILE_NAMES, echo_json, fail, parse_header, settings_from

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def server_options(func: F) -> F:
    """``--url``, ``--header``, ``--protocol``, ``--timeout`` and the server command after ``--``."""
    func = click.argument("server_command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND ARGS...]")(
        func
    )
    func = click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=300.0,
        show_default=True,
        help="Seconds the server has for each answer.",
    )(func)
    func = click.option(
        "--protocol",
        type=click.Choice(["auto", "legacy", "2026-07-28"]),
        default="auto",
        show_default=True,
        help="Protocol era: ask the server (auto), the initialize handshake (legacy), or 2026-07-28.",
    )(func)
    func = click.option(
        "--header",
        "headers",
        multiple=True,
        metavar="'NAME: VALUE'",
        help="An HTTP header for --url, e.g. 'Authorization: Bearer …' (repeatable).",
    )(func)
    return click.option(
        "--url", default=None, help="A streamable-HTTP MCP endpoint, e.g. http://127.0.0.1:8420/mcp."
    )(func)


def output_option(func: F) -> F:
    return click.option(
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Lines for a person, or one JSON document for scripts.",
    )(func)


def progress_option(func: F) -> F:
    return click.option(
        "--progress/--no-progress",
        "show_progress",
        default=None,
        help="Progress bars on stderr (default: when stderr is a terminal).",
    )(func)


def save_options(func: F) -> F:
    func = click.option("--force", is_flag=True, help="Replace files that exist.")(func)
    func = click.option("--no-save", is_flag=True, help="Describe binary content without saving it.")(func)
    return click.option(
        "--save-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(),
        help="Where binary content is saved (default: the current directory).",
    )(func)


def make_target(
    url: str | None, headers: tuple[str, ...], protocol: str, command: tuple[str, ...], timeout: float
) -> Any:
    from blobstore.cli.tester.target import CommandFailure, Target

    parsed: dict[str, str] = {}
    for value in headers:
        try:
            name, text = parse_header(value)
        except ValueError as exc:
            fail(f"--header: {exc}", code=2)
        parsed[name] = text
    if headers and url is None:
        fail("--header needs --url", code=2)
    try:
        return Target(command=tuple(command), url=url, headers=parsed, protocol=protocol, timeout=timeout)
    except CommandFailure as exc:
        fail(str(exc), code=exc.status)


def run_tester(action: Callable[[], Awaitable[T]]) -> T:
    """Run a tester command; a :class:`CommandFailure` ends it with its line and status, Ctrl-C with 130."""
    from blobstore.cli.tester.target import CommandFailure

    try:
        return anyio.run(action)
    except CommandFailure as exc:
        fail(str(exc), code=exc.status)
    except (KeyboardInterrupt, asyncio.CancelledError):
        # asyncio reports Ctrl-C as CancelledError when anyio's cancel scopes cancelled the main task.
        fail("interrupted", code=130)


def print_lines(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


CALL_EXAMPLES = """
\b
Examples:
  blobstore call render_heatmap --arg width=800 --arg height=600 -- python examples/image_tool_server.py
  blobstore call read_artifact --json '{"uri": "blobstore://artifacts/a_…", "length": 65536}' \\
      --url http://127.0.0.1:8420/mcp --header 'Authorization: Bearer bst_…'
  blobstore call checksum_image --file image=photo.png -- python examples/file_tool_server.py
  blobstore call get-tiny-image --as-host claude-code --output json \\
      -- npx @modelcontextprotocol/server-everything
"""
TOOLS_EXAMPLES = """
\b
Examples:
  blobstore tools -- blobstore mcp
  blobstore tools --url http://127.0.0.1:8420/mcp --output json
"""
RESOURCES_EXAMPLES = """
\b
Examples:
  blobstore resources -- blobstore mcp
  blobstore resources --all --url http://127.0.0.1:8420/mcp
"""
READ_EXAMPLES = """
\b
Examples:
  blobstore read 'blobstore://artifacts/a_…?offset=0&length=65536' -- blobstore mcp
  blobstore read blobstore://artifacts/a_… --url http://127.0.0.1:8420/mcp
"""


@main.command("call", epilog=CALL_EXAMPLES)
@click.argument("tool")
@click.option("--arg", "assignments", multiple=True, metavar="KEY=VALUE", help="One argument (repeatable).")
@click.option("--json", "json_text", default=None, metavar="'{...}'", help="The arguments as a JSON object.")
@click.option(
    "--json-file",
    type=click.File("r"),
    default=None,
    help="The arguments as a JSON object in a file ('-' for stdin).",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    metavar="KEY=PATH",
    help="A local file for a binary argument, in the form its schema asks for (repeatable).",
)
@click.option(
    "--follow-links", is_flag=True, help="Read each resource_link to a file, checked by its sha256."
)
@click.option(
    "--as-host",
    type=click.Choice(HOST_PROFILE_NAMES),
    default=None,
    help="Also show what this host's model receives through blobstore proxy (stores offloads in the store).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="With --as-host: the store's data directory (env BLOBSTORE_DATA_DIR).",
)
@save_options
@progress_option
@output_option
@server_options
def call_command(
    tool: str,
    assignments: tuple[str, ...],
    json_text: str | None,
    json_file: Any,
    files: tuple[str, ...],
    follow_links: bool,
    as_host: str | None,
    data_dir: str | None,
    save_dir: Path,
    no_save: bool,
    force: bool,
    show_progress: bool | None,
    output: str,
    url: str | None,
    headers: tuple[str, ...],
    protocol: str,
    timeout: float,
    server_command: tuple[str, ...],
) -> None:
    """Call TOOL on an MCP server and describe each block of its result; save binary blocks as TOOL_N.ext."""
    from blobstore.cli.tester.calls import ArgumentSources, HostOptions, SaveOptions, call_tool
    from blobstore.cli.tester.progress import Bars
    from blobstore.cli.tester.target import connect

    target = make_target(url, headers, protocol, server_command, timeout)
    if json_text is not None and json_file is not None:
        fail("give the arguments as --json or --json-file, not both", code=2)
    source = "--json"
    if json_file is not None:
        json_text, source = json_file.read(), f"--json-file {json_file.name}"
    sources = ArgumentSources(json_text=json_text, json_source=source, assignments=assignments, files=files)
    options = SaveOptions(save_dir, save=not no_save, force=force, follow_links=follow_links)
    host = None
    if as_host is not None:
        host = HostOptions(as_host, lambda: settings_from(data_dir=data_dir))

    async def action() -> Any:
        with Bars(show_progress) as bars:
            async with connect(target) as client:
                return await call_tool(
                    client,
                    server=target.name,
                    tool=tool,
                    sources=sources,
                    options=options,
                    bars=bars,
                    as_host=host,
                )

    report = run_tester(action)
    if output == "json":
        echo_json({"server": target.name, "tool": tool, **report.as_json()})
    else:
        print_lines(report.lines())
    for problem in report.problems:
        click.echo(f"blobstore: {problem}", err=True)
    if report.is_error:
        click.echo(
            f"blobstore: {tool} answered isError ({(report.error or {}).get('code') or 'no code'})", err=True
        )
    sys.exit(0 if report.ok else 1)


def parameters(tool: Any) -> str:
    """``name: type`` for each parameter, ``?`` after optional ones and ``= default`` where there is one; a
    parameter ``--file`` can fill is a ``file``."""
    from blobstore.cli.tester.arguments import schema_types
    from mcp_resources.tools.binary_schema import Key, binary_sites

    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    found = schema.get("properties")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    required = set(schema.get("required") or [])
    files = {
        site.path[0].name
        for site in binary_sites(schema)
        if len(site.path) == 1 and isinstance(site.path[0], Key)
    }
    shown = []
    for name, node in properties.items():
        types = sorted(schema_types(node), key=lambda t: (t == "null", t))
        kind = "file" if name in files else " | ".join(types) or "any"
        mark = "" if name in required else "?"
        default = f" = {json.dumps(node['default'])}" if isinstance(node, dict) and "default" in node else ""
        shown.append(f"{name}{mark}: {kind}{default}")
    return ", ".join(shown)


@main.command("tools", epilog=TOOLS_EXAMPLES)
@output_option
@server_options
def tools_command(
    output: str,
    url: str | None,
    headers: tuple[str, ...],
    protocol: str,
    timeout: float,
    server_command: tuple[str, ...],
) -> None:
    """List an MCP server's tools and their parameters (file: a binary one --file can fill)."""
    from blobstore.cli.tester.calls import list_tools
    from blobstore.cli.tester.target import connect

    target = make_target(url, headers, protocol, server_command, timeout)

    async def action() -> list[Any]:
        async with connect(target) as client:
            return list((await list_tools(client)).values())

    tools = run_tester(action)
    if output == "json":
        echo_json([tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools])
        return
    for tool in tools:
        click.echo(f"{tool.name}({parameters(tool)})")
        description = (tool.description or "").strip().splitlines()
        if description:
            click.echo(f"  {description[0]}")


@main.command("resources", epilog=RESOURCES_EXAMPLES)
@click.option("--all", "all_pages", is_flag=True, help="Follow nextCursor through every page.")
@output_option
@server_options
def resources_command(
    all_pages: bool,
    output: str,
    url: str | None,
    headers: tuple[str, ...],
    protocol: str,
    timeout: float,
    server_command: tuple[str, ...],
) -> None:
    """List an MCP server's resources (the first page, or --all) and resource templates."""
    from blobstore.cli.tester.target import connect
    from blobstore.units import human_bytes

    target = make_target(url, headers, protocol, server_command, timeout)

    async def action() -> tuple[list[Any], list[Any], str | None]:
        async with connect(target) as client:
            resources: list[Any] = []
            cursor: str | None = None
            while True:
                page = await client.list_resources(cursor=cursor)
                resources.extend(page.resources)
                cursor = page.next_cursor
                if not (all_pages and cursor):
                    break
            templates = (await client.list_resource_templates()).resource_templates
            return resources, list(templates), cursor

    resources, templates, more = run_tester(action)
    if output == "json":
        echo_json(
            {
                "resources": [r.model_dump(by_alias=True, exclude_none=True, mode="json") for r in resources],
                "resourceTemplates": [
                    t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in templates
                ],
                "nextCursor": more,
            }
        )
        return
    for resource in resources:
        size = human_bytes(resource.size) if resource.size is not None else "-"
        click.echo(f"{resource.uri}  {resource.name}  {resource.mime_type or '-'}  {size}")
    if templates:
        click.echo("templates:")
    for template in templates:
        click.echo(f"{template.uri_template}  {template.name}")
    if more:
        click.echo("more: --all lists every page", err=True)


@main.command("read", epilog=READ_EXAMPLES)
@click.argument("uri")
@save_options
@progress_option
@output_option
@server_options
def read_command(
    uri: str,
    save_dir: Path,
    no_save: bool,
    force: bool,
    show_progress: bool | None,
    output: str,
    url: str | None,
    headers: tuple[str, ...],
    protocol: str,
    timeout: float,
    server_command: tuple[str, ...],
) -> None:
    """Read a resource (URI[?offset=&length=]): text is shown, binary saved; a resource the server reads in
    windows is read window by window into one file, checked by its sha256."""
    from blobstore.cli.tester.calls import SaveOptions, read_resource
    from blobstore.cli.tester.progress import Bars
    from blobstore.cli.tester.target import connect

    target = make_target(url, headers, protocol, server_command, timeout)
    options = SaveOptions(save_dir, save=not no_save, force=force)

    async def action() -> Any:
        with Bars(show_progress) as bars:
            async with connect(target) as client:
                return await read_resource(client, uri, options=options, bars=bars)

    report = run_tester(action)
    if output == "json":
        echo_json({"server": target.name, "uri": uri, **report.as_json()})
    else:
        print_lines(report.lines())
    for problem in report.problems:
        click.echo(f"blobstore: {problem}", err=True)
    sys.exit(0 if report.ok else 1)
