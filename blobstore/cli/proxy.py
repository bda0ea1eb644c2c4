"""``blobstore proxy``: put any MCP server behind the store (docs/proxy.md).

The host starts the proxy on stdio; the proxy starts the upstream (``-- command args...``) or connects to it
(``--upstream-url``), relays every message and offloads large payloads of tool results into the same store
``blobstore serve`` and ``blobstore mcp`` read.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import click

from blobstore.cli import main
from blobstore.cli.common import data_dir_option, describe_error, fail, settings_from
from blobstore.config import Settings
from blobstore.errors import BlobstoreError
from blobstore.models import Caller


def profile_help() -> str:
    from mcp_resources.proxy.rules import DEFAULT_PROFILE, HOST_PROFILES

    caps = "; ".join(
        f"{name}: {p.max_result_bytes // 1024} KiB, {p.max_result_tokens:,} tokens, "
        f"images {p.max_image_edge} px"
        for name, p in HOST_PROFILES.items()
    )
    return f"Caps of the host results go to ({caps}). Default: {DEFAULT_PROFILE}."


def parse_header(value: str) -> tuple[str, str]:
    name, sep, rest = value.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise click.BadParameter(f"expected 'Name: value', got {value!r}", param_hint="--upstream-header")
    return name.strip(), rest.strip()


async def run_proxy(
    settings: Settings,
    *,
    command: list[str],
    url: str | None,
    headers: dict[str, str],
    profile: str,
    offload_config: Path | None,
    read_tool: bool,
) -> int:
    from blobstore.runtime import open_service
    from mcp_resources.embed import EmbeddedStore
    from mcp_resources.handles import ArgumentHandles
    from mcp_resources.proxy.argument_handles import ToolArguments
    from mcp_resources.proxy.contracts import ResultOffloader
    from mcp_resources.proxy.http_upstream import HttpUpstream
    from mcp_resources.proxy.local import LocalStore
    from mcp_resources.proxy.long_values import MessageSinks
    from mcp_resources.proxy.message_reader import READ_SIZE, ByteSource, MessageReader
    from mcp_resources.proxy.offload import Offloader
    from mcp_resources.proxy.relay import Relay
    from mcp_resources.proxy.rules import load_rules
    from mcp_resources.proxy.transport import HostChannel, HostStdio, StdioUpstream, Upstream

    rules = load_rules(settings, profile=profile, config_path=offload_config, read_tool_hint=read_tool)
    # A server, like `blobstore mcp`: it brings the schema up to date before it serves.
    async with open_service(settings, migrate=True) as service:
        caller = Caller(namespace=settings.mcp_namespace, actor="mcp-proxy")
        # The store's windows (read_artifact, resources/read) are sized for the host's caps, as results are.
        local = LocalStore(service, caller, window_max=rules.profile.window_max())
        store = EmbeddedStore(
            service=service,
            caller=local.resources.caller_for,
            default_caller=caller,
            resources=local.resources,
            tools=None,
        )

        def offloader(read_tool_name: str | None, upstream_name: str) -> ResultOffloader:
            return Offloader(
                rules=rules,
                store=store,
                caller=caller,
                upstream_name=upstream_name,
                read_tool_name=read_tool_name,
                audit=service.audit,
            )

        def reading(stream: ByteSource) -> MessageReader:
            return MessageReader(
                stream,
                max_message=settings.proxy_max_message_bytes,
                sinks=lambda: MessageSinks(service, caller),
                long_at=rules.streaming_threshold(),
            )

        upstream: Upstream = (
            HttpUpstream(url, headers, reading=reading)
            if url is not None
            else StdioUpstream(command, reading=reading)
        )
        await upstream.start()
        stdio = HostStdio(limit=READ_SIZE)
        await stdio.open()
        host = HostChannel(stdio, max_message=settings.proxy_max_message_bytes)
        async with local.running():
            relay = Relay(
                host=host,
                upstream=upstream,
                local=local,
                offloader=offloader,
                arguments=ToolArguments(ArgumentHandles(service), caller, rules.arguments),
                read_tool=read_tool,
            )
            return await relay.run()


@main.command(
    "proxy",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@data_dir_option
@click.option(
    "--namespace", default=None, help="Namespace to store and read in (env BLOBSTORE_MCP_NAMESPACE)."
)
@click.option("--database-url", default=None, help="Metadata database URL (env BLOBSTORE_DATABASE_URL).")
@click.option("--storage-url", default=None, help="Blob storage URL (env BLOBSTORE_STORAGE_URL).")
@click.option("--upstream-url", default=None, help="A streamable-HTTP upstream instead of a command.")
@click.option(
    "--upstream-header",
    "upstream_headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="An HTTP header sent to --upstream-url on every request (repeatable).",
)
@click.option(
    "--host-profile",
    type=click.Choice(["claude-desktop", "claude-code", "vscode-copilot", "cursor", "gemini-cli", "generic"]),
    default="generic",
    show_default=True,
    help=profile_help(),
)
@click.option(
    "--offload-config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML file with per-tool offload rules (docs/proxy.md).",
)
@click.option(
    "--no-read-tool",
    is_flag=True,
    default=False,
    help="Do not list the read tool nor mention it next to links (for hosts that read resources well).",
)
@click.argument("upstream_command", nargs=-1, type=click.UNPROCESSED)
def proxy_command(
    data_dir: str | None,
    namespace: str | None,
    database_url: str | None,
    storage_url: str | None,
    upstream_url: str | None,
    upstream_headers: tuple[str, ...],
    host_profile: str,
    offload_config: Path | None,
    no_read_tool: bool,
    upstream_command: tuple[str, ...],
) -> None:
    """Serve an upstream MCP server on stdio, offloading large results into the store.

    \b
    blobstore proxy [store options] -- <upstream command> [args...]
    blobstore proxy [store options] --upstream-url URL [--upstream-header 'Name: value']...
    """
    command = list(upstream_command)
    if command and command[0] == "--":
        command = command[1:]
    if upstream_url is None and not command:
        fail("give the upstream command after --, or --upstream-url", code=2)
    if upstream_url is not None and command:
        fail("give either an upstream command or --upstream-url, not both", code=2)
    if upstream_url is not None and not upstream_url.startswith(("http://", "https://")):
        fail(f"--upstream-url: expected an http:// or https:// URL, got {upstream_url!r}", code=2)
    try:
        headers = dict(parse_header(value) for value in upstream_headers)
    except click.BadParameter as exc:
        fail(f"--upstream-header: {exc.message}", code=2)
    flags: dict[str, object] = {"data_dir": data_dir, "mcp_namespace": namespace}
    if database_url is not None:
        flags["database_url"] = database_url
    if storage_url is not None:
        flags["storage_url"] = storage_url
    settings = settings_from(**flags)

    from mcp_resources.proxy.rules import OffloadConfigError, load_rules

    try:
        load_rules(
            settings, profile=host_profile, config_path=offload_config, read_tool_hint=not no_read_tool
        )
    except OffloadConfigError as exc:
        fail(str(exc), code=2)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    try:
        status = asyncio.run(
            run_proxy(
                settings,
                command=command,
                url=upstream_url,
                headers=headers,
                profile=host_profile,
                offload_config=offload_config,
                read_tool=not no_read_tool,
            )
        )
    except BlobstoreError as exc:
        fail(describe_error(exc))
    except (FileNotFoundError, PermissionError) as exc:
        fail(f"cannot start the upstream: {exc.strerror}: {exc.filename}")
    sys.exit(status)
