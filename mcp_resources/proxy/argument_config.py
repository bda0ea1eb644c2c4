"""The ``--offload-config`` tables that name path and URL arguments: ``[arguments]`` and
``[tools.<name>.arguments]``.

No schema says that a string is a file path or a URL to fetch, so the operator names such arguments, each
``"path"`` (the proxy writes the artifact to a file in ``[arguments] directory`` and passes its path) or
``"url"`` (it passes a signed download URL of the store). Both need something of the deployment that the
proxy checks before it starts the upstream: a directory for the files, and an address at which the tool can
fetch from the store (``BLOBSTORE_PUBLIC_URL``, since the proxy itself has no HTTP listener, or S3 presigned
downloads).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from blobstore.config import Settings
from mcp_resources.tools.binary_schema import Form

MODES: Final = {"path": Form.PATH, "url": Form.URL}
DIRECTORY_KEY: Final = "directory"


@dataclass(frozen=True)
class ArgumentModes:
    """Which arguments of which tools take a path or a URL in place of an artifact URI."""

    directory: Path | None = None
    """Where path arguments' files are written (absolute)."""
    tools: Mapping[str, Mapping[str, Form]] = field(default_factory=dict)

    def for_tool(self, tool: str) -> Mapping[str, Form]:
        return self.tools.get(tool, {})

    def uses(self, form: Form) -> list[str]:
        """The ``tools.<name>.arguments.<argument>`` keys that ask for ``form``."""
        return [
            f"tools.{tool}.arguments.{name}"
            for tool, forms in self.tools.items()
            for name, value in forms.items()
            if value is form
        ]


Fail = Callable[[str, str], Exception]
"""Builds the one-line config error for a key and a problem."""


def directory_of(table: Any, fail: Fail) -> Path | None:
    """The ``[arguments]`` table: only ``directory``, an absolute path (``~`` expanded)."""
    if not isinstance(table, dict):
        raise fail("arguments", "must be a table")
    for key in table:
        if key != DIRECTORY_KEY:
            raise fail(f"arguments.{key}", "unknown key")
    if DIRECTORY_KEY not in table:
        return None
    value = table[DIRECTORY_KEY]
    if not isinstance(value, str) or not value:
        raise fail("arguments.directory", "must be a directory path")
    directory = Path(value).expanduser()
    if not directory.is_absolute():
        raise fail("arguments.directory", f"must be an absolute path, not {value!r}")
    return Path(os.path.normpath(directory))


def tool_modes(tool: str, table: Any, fail: Fail) -> dict[str, Form]:
    """A ``[tools.<name>.arguments]`` table: argument name → ``"path"`` or ``"url"``."""
    prefix = f"tools.{tool}.arguments"
    if not isinstance(table, dict):
        raise fail(prefix, 'must be a table of argument = "path" | "url"')
    forms: dict[str, Form] = {}
    for name, value in table.items():
        form = MODES.get(value) if isinstance(value, str) else None
        if form is None:
            raise fail(f"{prefix}.{name}", f"must be path or url, not {value!r}")
        forms[name] = form
    return forms


def can_sign_urls(settings: Settings) -> bool:
    """Whether a URL argument can point somewhere the tool can fetch from: a public address of a
    ``blobstore serve`` of this store, or presigned S3 downloads."""
    presigned = settings.s3_presign_downloads and urlsplit(settings.resolved_storage_url).scheme == "s3"
    return settings.public_url is not None or presigned


def checked(modes: ArgumentModes, settings: Settings, fail: Fail) -> ArgumentModes:
    """``modes``, once what they need is configured."""
    paths = modes.uses(Form.PATH)
    if paths and modes.directory is None:
        raise fail(paths[0], 'a "path" argument needs [arguments] directory, where its files are written')
    urls = modes.uses(Form.URL)
    if urls and not can_sign_urls(settings):
        raise fail(
            urls[0],
            'a "url" argument needs BLOBSTORE_PUBLIC_URL, the address of a blobstore serve of this store '
            "(the proxy has no HTTP listener), or BLOBSTORE_S3_PRESIGN_DOWNLOADS on S3 storage",
        )
    return modes


__all__ = ["MODES", "ArgumentModes", "can_sign_urls", "checked", "directory_of", "tool_modes"]
