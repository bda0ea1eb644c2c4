"""``blobstore test SCRIPT``: steps (``call`` a tool, ``read`` a resource) against one server, each with
expectations, in a TOML or YAML file (docs/client.md, "Test scripts").

A script names its server (``[server]``: ``command`` run in the script's directory, or ``url`` with
``headers``; the command line's server wins) and lists ``[[steps]]``. A step's binary content is saved as
``STEP_N.ext``; a step fails on a broken expectation, an ``isError`` it did not expect, or a failure of the
call itself, and the run goes on with the next step. The script is checked whole before anything runs: a
mistake in it is one line naming the key.
"""

from __future__ import annotations

import hashlib
import shlex
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from mcp import Client
from mcp.shared.exceptions import MCPError

from blobstore.cli.tester.calls import (
    ArgumentSources,
    Report,
    SaveOptions,
    call_tool,
    read_resource,
    window_query,
)
from blobstore.cli.tester.progress import Bars
from blobstore.cli.tester.target import ANSWER_SECONDS, PROTOCOLS, CommandFailure, Target, mcp_error_line

KINDS: Final = frozenset({"text", "image", "audio", "resource_link", "resource", "blob"})
BINARY_KINDS: Final = frozenset({"image", "audio", "resource_link", "resource", "blob"})
SIZE_KEYS: Final = ("min_width", "max_width", "min_height", "max_height")
EXPECT_KEYS: Final = frozenset(
    {"is_error", "error_code", "count", "kinds", "text_contains", "mime_type", "sha256", *SIZE_KEYS}
)
CALL_KEYS: Final = frozenset({"name", "call", "arguments", "files", "follow_links", "expect"})
READ_KEYS: Final = frozenset({"name", "read", "offset", "length", "expect"})
SERVER_KEYS: Final = frozenset({"command", "url", "headers", "protocol", "env"})


class ScriptError(CommandFailure):
    """A mistake in the script: one line naming the file and the key; exit status 2."""

    def __init__(self, path: Path, where: str, problem: str) -> None:
        super().__init__(f"{path}: {where}: {problem}" if where else f"{path}: {problem}", status=2)


@dataclass(frozen=True)
class Expect:
    is_error: bool | None = None
    error_code: str | None = None
    count: int | None = None
    kinds: tuple[str, ...] | None = None
    text_contains: tuple[str, ...] = ()
    mime_type: str | None = None
    sizes: Mapping[str, int] = field(default_factory=dict)
    sha256: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LinkRef:
    """The URI of content block ``block`` of the earlier step ``step`` (a resource_link or an embedded
    resource)."""

    step: str
    block: int


@dataclass(frozen=True)
class Step:
    name: str
    expect: Expect
    tool: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    follow_links: bool = False
    uri: str | LinkRef | None = None
    offset: int | None = None
    length: int | None = None

    @property
    def does(self) -> str:
        if self.tool is not None:
            return f"call {self.tool}"
        if isinstance(self.uri, LinkRef):
            return f"read {self.uri.step}[{self.uri.block}]"
        return f"read {self.uri}"


@dataclass(frozen=True)
class Script:
    path: Path
    steps: tuple[Step, ...]
    server: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.path.stem

    def target(self, override: Target | None, timeout: float = ANSWER_SECONDS) -> Target:
        """The command line's server, else the script's (its command runs in the script's directory), with
        ``timeout`` seconds for each answer."""
        if override is not None:
            return override
        server = self.server
        if not server:
            raise ScriptError(self.path, "server", "the script names no server; give one after -- or --url")
        command = server.get("command")
        parts = tuple(shlex.split(command) if isinstance(command, str) else command or ())
        return Target(
            command=parts,
            url=server.get("url"),
            headers=server.get("headers") or {},
            protocol=server.get("protocol") or "auto",
            env=server.get("env") or {},
            cwd=self.path.parent if parts else None,
            timeout=timeout,
        )


# -- loading --------------------------------------------------------------------------------------------


def _table(path: Path, where: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ScriptError(path, where, "must be a table (a mapping)")
    return value


def _known(path: Path, where: str, table: Mapping[str, Any], keys: frozenset[str]) -> None:
    for key in table:
        if key not in keys:
            prefix = f"{where}." if where else ""
            raise ScriptError(path, f"{prefix}{key}", f"unknown key (known: {', '.join(sorted(keys))})")


def _typed(path: Path, where: str, value: Any, kind: type, what: str) -> Any:
    # A TOML or YAML true is a Python bool, which is an int too: it is no count of anything.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ScriptError(path, where, f"must be {what}")
    return value


def _strings(path: Path, where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ScriptError(path, where, "must be a string or a list of strings")


def _string_map(path: Path, where: str, value: Any) -> dict[str, str]:
    table = _table(path, where, value)
    for key, item in table.items():
        _typed(path, f"{where}.{key}", item, str, "a string")
    return dict(table)


def _expect(path: Path, where: str, value: Any) -> Expect:
    table = _table(path, where, value)
    _known(path, where, table, EXPECT_KEYS)

    def get(key: str, kind: type, what: str) -> Any:
        return _typed(path, f"{where}.{key}", table[key], kind, what) if key in table else None

    kinds = None
    if "kinds" in table:
        kinds = _strings(path, f"{where}.kinds", table["kinds"])
        unknown = [kind for kind in kinds if kind not in KINDS]
        if unknown:
            raise ScriptError(
                path, f"{where}.kinds", f"unknown kind {unknown[0]!r} (known: {', '.join(sorted(KINDS))})"
            )
    sizes = {}
    for key in SIZE_KEYS:
        if key in table:
            sizes[key] = get(key, int, "a whole number of pixels")
    count = get("count", int, "a whole number")
    if count is not None and count < 0:
        raise ScriptError(path, f"{where}.count", "must not be negative")
    return Expect(
        is_error=get("is_error", bool, "true or false"),
        error_code=get("error_code", str, "a string"),
        count=count,
        kinds=kinds,
        text_contains=_strings(path, f"{where}.text_contains", table["text_contains"])
        if "text_contains" in table
        else (),
        mime_type=get("mime_type", str, "a string"),
        sizes=sizes,
        sha256=_string_map(path, f"{where}.sha256", table["sha256"]) if "sha256" in table else {},
    )


def _step(path: Path, index: int, value: Any, names: set[str]) -> Step:
    where = f"steps[{index}]"
    table = _table(path, where, value)
    if ("call" in table) == ("read" in table):
        raise ScriptError(path, where, "a step has either call = TOOL or read = URI")
    _known(path, where, table, CALL_KEYS if "call" in table else READ_KEYS)
    expect = _expect(path, f"{where}.expect", table.get("expect", {}))
    if "call" in table:
        tool = _typed(path, f"{where}.call", table["call"], str, "a tool name")
        default = tool
    else:
        read = table["read"]
        if isinstance(read, dict):
            _known(path, f"{where}.read", read, frozenset({"step", "block"}))
            ref = LinkRef(
                _typed(path, f"{where}.read.step", read.get("step"), str, "a step name"),
                _typed(path, f"{where}.read.block", read.get("block"), int, "a block index"),
            )
            if ref.step not in names:
                raise ScriptError(path, f"{where}.read.step", f"no earlier step is named {ref.step!r}")
            uri: str | LinkRef = ref
        else:
            uri = _typed(path, f"{where}.read", read, str, "a URI, or {step = NAME, block = N}")
        default = "read"
    name = table.get("name")
    if name is None:
        name = default
        suffix = 2
        while name in names:
            name, suffix = f"{default}-{suffix}", suffix + 1
    _typed(path, f"{where}.name", name, str, "a string")
    if name in names:
        raise ScriptError(path, f"{where}.name", f"two steps are named {name!r}")
    names.add(name)
    if "call" in table:
        return Step(
            name=name,
            expect=expect,
            tool=tool,
            arguments=dict(_table(path, f"{where}.arguments", table.get("arguments", {}))),
            files=_string_map(path, f"{where}.files", table.get("files", {})),
            follow_links=_typed(
                path, f"{where}.follow_links", table.get("follow_links", False), bool, "true or false"
            ),
        )
    window = {}
    for key in ("offset", "length"):
        if key in table:
            window[key] = _typed(path, f"{where}.{key}", table[key], int, "a whole number of bytes")
    return Step(name=name, expect=expect, uri=uri, **window)


def _server(path: Path, value: Any) -> Mapping[str, Any]:
    table = _table(path, "server", value)
    _known(path, "server", table, SERVER_KEYS)
    command = table.get("command")
    if command is not None and not (
        (isinstance(command, str) and command.strip())
        or (isinstance(command, list) and command and all(isinstance(part, str) for part in command))
    ):
        raise ScriptError(path, "server.command", "must be a command line or a list of its words")
    if "url" in table:
        _typed(path, "server.url", table["url"], str, "a URL")
    if "protocol" in table and table["protocol"] not in PROTOCOLS:
        raise ScriptError(path, "server.protocol", f"must be one of {', '.join(PROTOCOLS)}")
    for key in ("headers", "env"):
        if key in table:
            _string_map(path, f"server.{key}", table[key])
    return table


def load_script(path: Path) -> Script:
    """Read and check a script; TOML by default, YAML for ``.yaml``/``.yml``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(path, "", f"cannot read it: {exc.strerror or exc}") from None
    as_yaml = path.suffix.lower() in (".yaml", ".yml")
    try:
        document = yaml.safe_load(text) if as_yaml else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        kind = "YAML" if as_yaml else "TOML"
        line = " ".join(str(exc).split())
        raise ScriptError(path, "", f"not valid {kind}: {line}") from None
    table = _table(path, "", document if document is not None else {})
    _known(path, "", table, frozenset({"server", "steps"}))
    steps = table.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ScriptError(path, "steps", "the script needs a list of steps ([[steps]] in TOML)")
    names: set[str] = set()
    return Script(
        path=path,
        steps=tuple(_step(path, i, step, names) for i, step in enumerate(steps)),
        server=_server(path, table["server"]) if "server" in table else {},
    )


# -- running --------------------------------------------------------------------------------------------


@dataclass
class StepResult:
    step: Step
    report: Report | None = None
    failures: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and not self.failures

    @property
    def outcome(self) -> str:
        if self.error is not None:
            return "error"
        return "passed" if not self.failures else "failed"


def check(expect: Expect, report: Report, saved: Mapping[str, Path]) -> list[str]:
    """Every expectation ``report`` breaks, one line each."""
    failures = list(report.problems)
    blocks = report.blocks
    if expect.is_error is None:
        if report.is_error:
            failures.append(f"the tool answered isError: {(report.error or {}).get('message')}")
    elif report.is_error != expect.is_error:
        failures.append(f"isError is {str(report.is_error).lower()}, expected {str(expect.is_error).lower()}")
    if expect.error_code is not None:
        code = (report.error or {}).get("code")
        if code != expect.error_code:
            failures.append(f"error code is {code!r}, expected {expect.error_code!r}")
    if expect.count is not None and len(blocks) != expect.count:
        failures.append(f"{len(blocks)} blocks, expected {expect.count}")
    kinds = [block.kind for block in blocks]
    if expect.kinds is not None and tuple(kinds) != expect.kinds:
        failures.append(f"block kinds are [{', '.join(kinds)}], expected [{', '.join(expect.kinds)}]")
    text = "\n".join(block.text for block in blocks if block.text is not None)
    for wanted in expect.text_contains:
        if wanted not in text:
            failures.append(f"no text contains {wanted!r}")
    if expect.mime_type is not None:
        binary = [block for block in blocks if block.kind in BINARY_KINDS]
        if not binary:
            failures.append(f"no binary block to have MIME type {expect.mime_type}")
        for block in binary:
            if block.mime_type != expect.mime_type:
                failures.append(f"{block.name}: MIME type {block.mime_type}, expected {expect.mime_type}")
    if expect.sizes:
        images = [block for block in blocks if "width" in block.facts]
        if not images:
            failures.append("no image to check the pixel size of")
        for block in images:
            for key, bound in expect.sizes.items():
                side = key.split("_")[1]
                value = block.facts[side]
                if (key.startswith("min") and value < bound) or (key.startswith("max") and value > bound):
                    failures.append(f"{block.name}: {side} {value} px, expected {key} {bound}")
    for name, digest in expect.sha256.items():
        path = saved.get(name)
        if path is None:
            failures.append(
                f"{name}: this step saved no such file (it saved: {', '.join(saved) or 'nothing'})"
            )
            continue
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != digest.lower():
            failures.append(f"{name}: sha256 {got}, expected {digest}")
    return failures


def _saved(report: Report) -> dict[str, Path]:
    found = {path.name: path for path in report.saved()}
    for block in report.blocks:
        followed = block.facts.get("followed")
        if isinstance(followed, dict):
            path = Path(followed["path"])
            found[path.name] = path
    return found


def _uri_of(step: Step, results: Mapping[str, StepResult]) -> str:
    ref = step.uri
    if not isinstance(ref, LinkRef):
        assert ref is not None
        return ref
    earlier = results[ref.step].report
    content = (earlier.result.get("content") if earlier is not None else None) or []
    block = content[ref.block] if 0 <= ref.block < len(content) else None
    uri = None
    if isinstance(block, dict):
        uri = (
            block.get("uri")
            if block.get("type") == "resource_link"
            else (block.get("resource") or {}).get("uri")
        )
    if not isinstance(uri, str):
        raise CommandFailure(
            f"step {ref.step!r} has no resource_link or embedded resource at block {ref.block}"
        )
    return uri


async def run_step(
    client: Client,
    step: Step,
    *,
    script: Script,
    server: str,
    options: SaveOptions,
    bars: Bars,
    results: Mapping[str, StepResult],
) -> StepResult:
    outcome = StepResult(step)
    started = time.monotonic()
    try:
        if step.tool is not None:
            step_options = SaveOptions(
                options.directory, save=True, force=options.force, follow_links=step.follow_links
            )
            files = [f"{key}={value}" for key, value in step.files.items()]
            sources = ArgumentSources(base=step.arguments, files=files, relative_to=script.path.parent)
            outcome.report = await call_tool(
                client,
                server=server,
                tool=step.tool,
                sources=sources,
                options=step_options,
                bars=bars,
                stem=step.name,
            )
        else:
            uri = window_query(_uri_of(step, results), step.offset, step.length)
            outcome.report = await read_resource(client, uri, options=options, bars=bars, stem=step.name)
        outcome.failures = check(step.expect, outcome.report, _saved(outcome.report))
    except CommandFailure as exc:
        outcome.error = str(exc)
    except MCPError as exc:
        outcome.error = f"the server answered with an error: {mcp_error_line(exc)}"
    outcome.seconds = time.monotonic() - started
    return outcome


async def run_script(
    client: Client,
    script: Script,
    *,
    server: str,
    options: SaveOptions,
    bars: Bars,
    echo: Callable[[StepResult], None],
) -> list[StepResult]:
    results: dict[str, StepResult] = {}
    for step in script.steps:
        result = await run_step(
            client, step, script=script, server=server, options=options, bars=bars, results=results
        )
        results[step.name] = result
        echo(result)
    return list(results.values())


def step_lines(result: StepResult) -> list[str]:
    step = result.step
    shown = [f"Step {step.name}: {step.does}"]
    if result.report is not None:
        shown.extend(f"  {part}" for line in result.report.lines() for part in line.split("\n"))
    if result.error is not None:
        shown.append(f"  ERROR: {result.error}")
    shown.extend(f"  FAILED: {failure}" for failure in result.failures)
    if result.passed:
        shown.append("  passed")
    return shown


def summary_rows(results: Sequence[StepResult]) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    for result in results:
        report = result.report
        kinds = ", ".join(block.kind for block in report.blocks) if report is not None else "-"
        saved = ", ".join(_saved(report)) if report is not None else ""
        rows.append(
            (
                result.step.name,
                result.step.does,
                result.outcome,
                kinds or "-",
                saved or "-",
                f"{result.seconds:.2f} s",
            )
        )
    return rows
