"""``blobstore proxy``: put any MCP server behind the store (docs/proxy.md).

The host starts the proxy on stdio; the proxy starts the upstream (``-- command args...``) or connects to it
(``--upstream-url``), relays every message and offloads large payloads of tool results into the same store
``blobstore serve`` and ``blobstore mcp`` read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from blobstore.cli import main
from blobstore.cli.common import (
    HOST_PROFILE_NAMES,
    data_dir_option,
    describe_error,
    fail,
    parse_header,
    settings_from,
)
from blobstore.config import Settings
from blobstore.errors import BlobstoreError
from blobstore.models import Caller

if TYPE_CHECKING:
    from blobstore.service import ArtifactService
    from mcp_resources.proxy.contracts import OffloaderFactory, ResultOffloader
    from mcp_resources.proxy.host_choice import HostChoice
    from mcp_resources.proxy.local import LocalStore
    from mcp_resources.proxy.rules import HostProfile, OffloadRules


def profile_help() -> str:
    from mcp_resources.proxy.rules import DEFAULT_PROFILE, HOST_PROFILES

    caps = "; ".join(
        f"{name}: {p.max_result_bytes // 1024} KiB, {p.max_result_tokens:,} tokens, "
        f"images {p.max_image_edge} px"
        for name, p in HOST_PROFILES.items()
    )
    return (
        f"Caps and modalities of the host results go to ({caps}). Default: the one the client names in its "
        f"clientInfo at initialize, else {DEFAULT_PROFILE}."
    )


def offloading_store(
    service: ArtifactService, settings: Settings, rules: OffloadRules, choice: HostChoice | None = None
) -> OffloadingStore:
    """The store's side of an offloading run: the caller payloads are stored as, the in-process server of
    ``blobstore://`` reads and the read tool, with windows sized for the host's caps as results are. With a
    ``choice``, the rules and the windows follow the profile it picks at the handshake."""
    from mcp_resources.embed import EmbeddedStore
    from mcp_resources.proxy.local import LocalStore

    caller = Caller(namespace=settings.mcp_namespace, actor="mcp-proxy")

    def takes(modality: str) -> bool:
        return (choice.rules if choice is not None else rules).profile.takes(modality)

    local = LocalStore(service, caller, window_max=rules.profile.window_max(), host_takes=takes)
    if choice is not None:
        choice.listeners.append(lambda picked: local.fit(picked.profile.window_max()))
    store = EmbeddedStore(
        service=service,
        caller=local.resources.caller_for,
        default_caller=caller,
        resources=local.resources,
        tools=None,
    )

    def offloader(read_tool_name: str | None, upstream_name: str) -> ResultOffloader:
        from mcp_resources.proxy.offload import Offloader

        return Offloader(
            rules=choice.rules if choice is not None else rules,
            store=store,
            caller=caller,
            upstream_name=upstream_name,
            read_tool_name=read_tool_name,
            audit=service.audit,
        )

    return OffloadingStore(caller=caller, local=local, offloader=offloader)


@dataclass(frozen=True)
class OffloadingStore:
    caller: Caller
    local: LocalStore
    offloader: OffloaderFactory


@contextlib.asynccontextmanager
async def host_offloader(
    settings: Settings,
    *,
    profile: str,
    upstream_name: str,
    upstream_tools: set[str],
    offload_config: Path | None = None,
    read_tool: bool = True,
) -> AsyncIterator[tuple[ResultOffloader, HostProfile]]:
    """The offloader ``blobstore proxy --host-profile PROFILE`` puts in front of an upstream with these tools,
    over the store ``settings`` name: what ``blobstore call --as-host`` runs a result through."""
    from blobstore.runtime import open_service
    from mcp_resources.proxy.rules import load_rules
    from mcp_resources.proxy.upstream_tools import read_tool_name

    rules = load_rules(settings, profile=profile, config_path=offload_config, read_tool_hint=read_tool)
    async with open_service(settings, migrate=True) as service:
        side = offloading_store(service, settings, rules)
        name = read_tool_name(upstream_tools) if read_tool else None
        yield side.offloader(name, upstream_name), rules.profile


async def run_proxy(
    settings: Settings,
    *,
    command: list[str],
    url: str | None,
    headers: dict[str, str],
    profile: str | None,
    offload_config: Path | None,
    read_tool: bool,
) -> int:
    from blobstore.runtime import open_service
    from mcp_resources.proxy.argument_handles import ToolArguments
    from mcp_resources.proxy.host_choice import HostChoice
    from mcp_resources.proxy.http_upstream import HttpUpstream
    from mcp_resources.proxy.long_values import MessageSinks
    from mcp_resources.proxy.message_reader import READ_SIZE, ByteSource, MessageReader
    from mcp_resources.proxy.relay import Relay
    from mcp_resources.proxy.rules import DEFAULT_PROFILE, load_rules
    from mcp_resources.proxy.transport import HostChannel, HostStdio, StdioUpstream, Upstream
    from mcp_resources.tools.handles import ArgumentHandles

    def rules_for(name: str) -> OffloadRules:
        return load_rules(settings, profile=name, config_path=offload_config, read_tool_hint=read_tool)

    # Without --host-profile the client's clientInfo picks the profile at the handshake.
    choice = HostChoice(rules_for(profile or DEFAULT_PROFILE), fixed=profile is not None, build=rules_for)
    rules = choice.rules
    # A server, like `blobstore mcp`: it brings the schema up to date before it serves.
    async with open_service(settings, migrate=True) as service:
        side = offloading_store(service, settings, rules, choice)
        caller, local = side.caller, side.local

        def reading(stream: ByteSource) -> MessageReader:
            return MessageReader(
                stream,
                max_message=settings.proxy_max_message_bytes,
                sinks=lambda: MessageSinks(service, caller),
                long_at=choice.rules.streaming_threshold(),
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
                offloader=side.offloader,
                arguments=ToolArguments(ArgumentHandles(service), caller, rules.arguments),
                read_tool=read_tool,
                host_choice=choice,
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
    type=click.Choice(HOST_PROFILE_NAMES),
    default=None,
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
    host_profile: str | None,
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
    except ValueError as exc:
        fail(f"--upstream-header: {exc}", code=2)
    flags: dict[str, object] = {"data_dir": data_dir, "mcp_namespace": namespace}
    if database_url is not None:
        flags["database_url"] = database_url
    if storage_url is not None:
        flags["storage_url"] = storage_url
    settings = settings_from(**flags)

    from mcp_resources.proxy.rules import OffloadConfigError, load_rules

    try:
        load_rules(
            settings,
            profile=host_profile or "generic",
            config_path=offload_config,
            read_tool_hint=not no_read_tool,
        )
    except OffloadConfigError as exc:
        fail(str(exc), code=2)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    # Which host profile applies, and why, is said on the log whatever its level.
    logging.getLogger("mcp_resources.proxy.host").setLevel(logging.INFO)
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
