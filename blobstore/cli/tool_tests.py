"""``blobstore test SCRIPT``: run a TOML or YAML script of tool calls and resource reads against an MCP
server and check what they return (docs/client.md, "Test scripts").

Each step's lines are printed as it ends, then a summary table; ``--junit FILE`` writes the JUnit XML report
CI systems read. The exit status is 0 when every step passed, 1 when one failed or could not run, 2 for a
mistake in the script or the command line.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from blobstore.cli import main
from blobstore.cli.common import echo_json, fail
from blobstore.cli.tool_calls import make_target, output_option, progress_option, run_tester, server_options

TEST_EXAMPLES = """
\b
Examples:
  blobstore test examples/image_tool_checks.toml --save-dir out --junit out/report.xml
  blobstore test checks.yaml --url http://127.0.0.1:8420/mcp --header 'Authorization: Bearer bst_…'
"""


@main.command("test", epilog=TEST_EXAMPLES)
@click.argument("script_path", metavar="SCRIPT", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--save-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(),
    help="Where each step's binary content is saved as STEP_N.ext (default: the current directory).",
)
@click.option("--force", is_flag=True, help="Replace files that exist.")
@click.option(
    "--junit", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write a JUnit XML report."
)
@progress_option
@output_option
@server_options
def test_command(
    script_path: Path,
    save_dir: Path,
    force: bool,
    junit: Path | None,
    show_progress: bool | None,
    output: str,
    url: str | None,
    headers: tuple[str, ...],
    protocol: str,
    timeout: float,
    server_command: tuple[str, ...],
) -> None:
    """Run the steps of SCRIPT (TOML, or YAML for .yaml/.yml) against an MCP server and check their
    expectations. The server is the script's [server], or the one given here."""
    from blobstore.cli.tester.calls import SaveOptions
    from blobstore.cli.tester.junit import write_junit
    from blobstore.cli.tester.progress import Bars
    from blobstore.cli.tester.script import StepResult, load_script, run_script, step_lines, summary_rows
    from blobstore.cli.tester.target import CommandFailure, connect

    override = make_target(url, headers, protocol, server_command, timeout) if url or server_command else None
    try:
        script = load_script(script_path)
        target = script.target(override, timeout)
    except CommandFailure as exc:
        fail(str(exc), code=exc.status)
    options = SaveOptions(save_dir, force=force)
    started = datetime.now(UTC)

    def echo(result: StepResult) -> None:
        if output == "text":
            for line in step_lines(result):
                click.echo(line)

    async def action() -> list[StepResult]:
        with Bars(show_progress) as bars:
            async with connect(target) as client:
                return await run_script(
                    client, script, server=target.name, options=options, bars=bars, echo=echo
                )

    results = run_tester(action)
    if junit is not None:
        write_junit(junit, script, results, started)
    failed = [r for r in results if not r.passed]
    if output == "json":
        echo_json(
            {
                "script": str(script_path),
                "server": target.name,
                "passed": len(results) - len(failed),
                "failed": len(failed),
                "steps": [_step_json(r) for r in results],
            }
        )
    else:
        _print_summary(summary_rows(results))
        click.echo(f"{len(results)} steps: {len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


def _step_json(result: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "name": result.step.name,
        "does": result.step.does,
        "outcome": result.outcome,
        "failures": result.failures,
        "error": result.error,
        "seconds": round(result.seconds, 3),
    }
    if result.report is not None:
        found["report"] = result.report.as_json()
    return found


def _print_summary(rows: list[tuple[str, str, str, str, str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Summary", title_justify="left")
    for column in ("step", "does", "result", "blocks", "saved", "time"):
        table.add_column(column, overflow="fold", justify="right" if column == "time" else "left")
    for row in rows:
        table.add_row(*row)
    Console(soft_wrap=False).print(table)
