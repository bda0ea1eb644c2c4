"""A tool call's arguments from the command line, checked against the tool's ``inputSchema`` before anything
is sent.

``--json '{…}'`` or ``--json-file F`` give an object, ``--arg key=value`` sets one top-level argument (the
value as the schema types it: as is where the property is a string, else as JSON when it parses), and
``--file key=PATH`` puts a local file where the schema asks for binary content, in the form it asks for
(base64, a ``data:`` URL, or the text). Where the property is a store's file parameter and the server offers
the store's upload tools, the file is uploaded first, in chunks, and the argument is its artifact URI.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from mcp import Client
from mcp.types import CallToolResult

from blobstore.cli.tester.target import CommandFailure
from mcp_resources.tools.binary_schema import BinarySite, Form, Key, binary_sites

UPLOAD_TOOLS: Final = frozenset({"upload_begin", "upload_chunk", "upload_commit"})
"""The store's upload tools (docs/mcp.md, "Tools"): a server that lists them takes files by upload."""
URI_PLACEHOLDER: Final = "blobstore://artifacts/a_" + "A" * 22
"""What an uploaded file's argument is checked as before the upload: an artifact URI of the shortest shape."""
MESSAGE_CHARS: Final = 300
"""A validator's message quotes the refused value; a long one (base64) is cut to keep the line one line."""


def schema_types(node: Any) -> set[str]:
    """The JSON types a schema node admits, looking into ``anyOf``/``oneOf`` branches."""
    if not isinstance(node, dict):
        return set()
    found: set[str] = set()
    kind = node.get("type")
    if isinstance(kind, str):
        found.add(kind)
    elif isinstance(kind, list):
        found.update(k for k in kind if isinstance(k, str))
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key) or []:
            found |= schema_types(branch)
    return found


def _property(schema: Mapping[str, Any] | None, name: str) -> Any:
    properties = (schema or {}).get("properties")
    return properties.get(name) if isinstance(properties, dict) else None


def parse_assignment(text: str, option: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CommandFailure(f"{option}: expected KEY=VALUE, got {text!r}", status=2)
    return key, value


def typed_value(raw: str, node: Any) -> Any:
    """``raw`` as the argument's value: the string itself where the schema wants only a string, else its JSON
    value when it parses as JSON (``640``, ``true``, ``[1, 2]``), else the string."""
    if schema_types(node) == {"string"}:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def json_object(text: str, source: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CommandFailure(f"{source}: not valid JSON: {exc}", status=2) from None
    if not isinstance(value, dict):
        raise CommandFailure(f"{source}: the arguments must be a JSON object", status=2)
    return value


@dataclass(frozen=True)
class FileArgument:
    """``--file key=PATH``: a local file for the top-level argument ``key``."""

    key: str
    path: Path
    site: BinarySite

    @property
    def mime_type(self) -> str:
        return mimetypes.guess_type(self.path.name)[0] or "application/octet-stream"

    def inline(self) -> str:
        """The file in the form its schema asks for: base64, a ``data:`` URL or the text."""
        data = self.path.read_bytes()
        if self.site.form is Form.TEXT:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                raise CommandFailure(
                    f"--file {self.key}: the schema asks for text and {self.path} is not UTF-8", status=2
                ) from None
        encoded = base64.b64encode(data).decode("ascii")
        if self.site.form is Form.DATA_URL:
            return f"data:{self.mime_type};base64,{encoded}"
        return encoded


def file_argument(key: str, path: Path, schema: Mapping[str, Any] | None) -> FileArgument:
    if not path.is_file():
        raise CommandFailure(f"--file {key}: no such file: {path}", status=2)
    for site in binary_sites(schema):
        if site.path == (Key(key),):
            return FileArgument(key, path, site)
    raise CommandFailure(
        f"--file {key}: the tool's inputSchema asks for no binary content at {key!r} "
        "(no contentEncoding, contentMediaType, format byte or x-mcp-file there)",
        status=2,
    )


@dataclass
class Arguments:
    values: dict[str, Any]
    uploads: list[FileArgument]
    """Files the server takes by upload; their values are set by :func:`upload_files`."""


def build_arguments(
    *,
    schema: Mapping[str, Any] | None,
    json_text: str | None = None,
    json_source: str = "--json",
    assignments: Sequence[str] = (),
    files: Sequence[str] = (),
    base: Mapping[str, Any] | None = None,
    server_tools: Iterable[str] = (),
    relative_to: Path | None = None,
) -> Arguments:
    """The arguments of a call: ``base`` (a script's), then the JSON object, then each ``--arg``, then each
    ``--file``; checked against ``schema`` before they are returned."""
    values: dict[str, Any] = dict(base or {})
    if json_text is not None:
        values.update(json_object(json_text, json_source))
    for text in assignments:
        key, raw = parse_assignment(text, "--arg")
        values[key] = typed_value(raw, _property(schema, key))
    by_upload = set(server_tools) >= UPLOAD_TOOLS
    uploads: list[FileArgument] = []
    for text in files:
        key, raw = parse_assignment(text, "--file")
        path = Path(raw).expanduser()
        if relative_to is not None and not path.is_absolute():
            path = relative_to / path
        argument = file_argument(key, path, schema)
        if argument.site.file_param and by_upload:
            uploads.append(argument)
            values[key] = URI_PLACEHOLDER
        else:
            values[key] = argument.inline()
    check_arguments(values, schema)
    return Arguments(values, uploads)


def check_arguments(values: Mapping[str, Any], schema: Mapping[str, Any] | None) -> None:
    """Refuse arguments the tool's ``inputSchema`` refuses, with the validator's own message."""
    if not isinstance(schema, dict):
        return
    try:
        validator = validator_for(schema)(schema)
        error = best_match(validator.iter_errors(dict(values)))
    except SchemaError as exc:
        raise CommandFailure(f"the tool's inputSchema is not a valid JSON Schema: {exc.message}") from None
    if error is None:
        return
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    message = error.message
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + "…"
    at = f" at {where}" if where else ""
    raise CommandFailure(f"the tool's inputSchema refuses the arguments{at}: {message}", status=2)


def _failure(result: CallToolResult, tool: str) -> str | None:
    if not result.is_error:
        return None
    error = (result.structured_content or {}).get("error")
    if isinstance(error, dict) and error.get("message"):
        return f"{tool} failed: {error['message']} ({error.get('code')})"
    texts = [block.text for block in result.content if block.type == "text"]
    return f"{tool} failed: {texts[0] if texts else 'isError without a message'}"


ProgressUpdate = Callable[[int, int], None]


async def upload_file(client: Client, argument: FileArgument, progress: ProgressUpdate | None = None) -> str:
    """Upload a local file through the store's upload tools, chunk by chunk; its artifact URI."""
    path = argument.path
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for piece in iter(lambda: handle.read(1 << 20), b""):
            digest.update(piece)
    sha256 = digest.hexdigest()

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(tool, arguments)
        problem = _failure(result, tool)
        if problem is not None:
            raise CommandFailure(f"--file {argument.key}: uploading {path.name}: {problem}")
        return dict(result.structured_content or {})

    begun = await call(
        "upload_begin", {"name": path.name, "mime_type": argument.mime_type, "size": size, "sha256": sha256}
    )
    upload_id, chunk_size = begun["upload_id"], int(begun["chunk_size"])
    sent = 0
    with path.open("rb") as handle:
        for index, piece in enumerate(iter(lambda: handle.read(chunk_size), b"")):
            data = base64.b64encode(piece).decode("ascii")
            await call("upload_chunk", {"upload_id": upload_id, "index": index, "data": data})
            sent += len(piece)
            if progress is not None:
                progress(sent, size)
    committed = await call("upload_commit", {"upload_id": upload_id, "sha256": sha256})
    return str(committed["uri"])


async def upload_files(
    client: Client, arguments: Arguments, progress: Callable[[str], ProgressUpdate] | None = None
) -> None:
    for argument in arguments.uploads:
        update = progress(argument.path.name) if progress is not None else None
        arguments.values[argument.key] = await upload_file(client, argument, update)
