"""The ``blobstore`` command.

Each group of subcommands lives in its own module and registers itself on :data:`main`; settings are built
once per invocation from the environment plus the flags given (:func:`blobstore.config.load_settings`).
"""

from __future__ import annotations

import importlib

import click

from blobstore import __version__

_SUBCOMMAND_MODULES = ("serve", "transfer", "mcp", "admin", "tokens")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="blobstore")
def main() -> None:
    """mcp-blobstore: chunked binary transfer and content-addressed resource store for MCP."""


def _register() -> None:
    for name in _SUBCOMMAND_MODULES:
        try:
            importlib.import_module(f"blobstore.cli.{name}")
        except ModuleNotFoundError as exc:
            # A subcommand module not present in this build; every other error is real.
            if exc.name != f"blobstore.cli.{name}":
                raise


_register()
