"""The ``blobstore`` command.

Each group of subcommands lives in its own module and registers itself on :data:`main`. Modules are imported
only when one of their commands runs (or for ``--help``), so ``blobstore ls`` does not pay for the server, MCP
and S3 imports. Settings are built once per invocation from the environment plus the flags given
(:func:`blobstore.config.load_settings`).
"""

from __future__ import annotations

import importlib

import click

from blobstore import __version__

COMMAND_MODULES: dict[str, str] = {
    "serve": "serve",
    "mcp": "mcp",
    "upload": "transfer",
    "download": "transfer",
    "ls": "transfer",
    "info": "transfer",
    "rm": "transfer",
    "cleanup": "admin",
    "verify": "admin",
    "stats": "admin",
    "migrate": "admin",
    "token": "tokens",
    "proxy": "proxy",
    "call": "tool_calls",
    "tools": "tool_calls",
    "resources": "tool_calls",
    "read": "tool_calls",
    "test": "tool_tests",
}


class LazyGroup(click.Group):
    """A group whose subcommands are defined in modules loaded on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMAND_MODULES) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            importlib.import_module(f"blobstore.cli.{module}")
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="blobstore")
def main() -> None:
    """mcp-blobstore: chunked binary transfer and content-addressed resource store for MCP."""
