"""The transfer commands on a real terminal: tmux runs the installed CLI against a real server, and what a
person would see is read back from the pane (``capture-pane``), after the command has ended."""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.files import write_distinct_blocks
from tests.fixtures.server import Server, cli_env, serving
from tests.fixtures.terminal import WAIT_DEADLINE_SECONDS, Tmux
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.e2e

RESULT_LINE = re.compile(r"a_[A-Za-z0-9_-]{20,}  \d+\.\d MiB  (\S+)(, resumed: \d+ chunks already there)?")


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own: the interruption tests pause it (SIGSTOP), which must not hold up others."""
    root = tmp_path / "server"
    root.mkdir()
    with serving(root) as running:
        try:
            yield running
        finally:
            resume(running)  # a paused server could not stop in time
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def terminal(own_server: Server, tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(cli_env(tmp_path, own_server.url), tmp_path)
    try:
        yield session
    finally:
        session.close()


def pause(server: Server) -> None:
    os.killpg(server.process.pid, signal.SIGSTOP)


def resume(server: Server) -> None:
    os.killpg(server.process.pid, signal.SIGCONT)


def interrupt_while_paused(terminal: Tmux, server: Server, name: str, transfer: str) -> None:
    """Ctrl-C to the ``transfer`` in window ``name`` while ``server`` is paused, so that the transfer is
    certainly still running; it must exit 130 with the one line that says how to resume it."""
    pause(server)
    try:
        assert terminal.dead_status(name) is None, f"the {transfer} finished before it could be interrupted"
        terminal.interrupt(name)
        status = terminal.wait_exit(name)
    finally:
        resume(server)
    interrupted = terminal.screen(name)
    assert status == 130, interrupted
    assert (
        interrupted[-1] == f"blobstore: interrupted; run the same command again to resume the {transfer}"
    ), interrupted
    assert "Aborted!" not in interrupted


def wait_for_file(pattern: str, root: Path, terminal: Tmux, name: str) -> Path:
    def appeared() -> Path | None:
        found = next(iter(root.glob(pattern)), None)
        if found is None and terminal.dead_status(name) is not None:
            pytest.fail(f"the command ended before {pattern} appeared:\n" + "\n".join(terminal.screen(name)))
        return found

    # Polled often: the command runs on, and the test acts on the file while the transfer is under way.
    return wait_until(appeared, within=WAIT_DEADLINE_SECONDS, what=f"{pattern} to appear", interval=0.01)


def assert_clean_transfer(lines: list[str], names: list[str]) -> None:
    """Per file: its finished bar on a line of its own, then its result line; nothing drawn after the last."""
    results = [i for i, line in enumerate(lines) if RESULT_LINE.fullmatch(line)]
    assert [RESULT_LINE.fullmatch(lines[i]).group(1) for i in results] == names, lines  # type: ignore[union-attr]
    assert results[-1] == len(lines) - 1, lines
    for name, index in zip(names, results, strict=True):
        bar = lines[index - 1]
        assert bar.startswith(name), lines
        assert "━" in bar, lines
        assert re.search(r"(\d+\.\d)/\1 MiB", bar), lines  # the bar ended at 100 %


def test_upload_progress_bars_and_result_lines_do_not_collide_on_a_terminal(
    terminal: Tmux, tmp_path: Path
) -> None:
    write_distinct_blocks(tmp_path / "big1.bin", 24)
    write_distinct_blocks(tmp_path / "big2.bin", 50)

    terminal.run(
        "up", ["upload", str(tmp_path / "big1.bin"), str(tmp_path / "big2.bin"), "--chunk-size", "1M"]
    )
    status = terminal.wait_exit("up")

    lines = terminal.screen("up")
    assert status == 0, lines
    assert_clean_transfer(lines, ["big1.bin", "big2.bin"])


def uploaded(terminal: Tmux, path: Path, size_mib: int) -> str:
    """The id of a new artifact of ``size_mib`` distinct MiB written to ``path``, uploaded in the terminal."""
    write_distinct_blocks(path, size_mib)
    terminal.run("up", ["upload", str(path), "--json"])
    assert terminal.wait_exit("up") == 0
    found = re.search(r'"id": "(a_[^"]+)"', "".join(terminal.screen("up")))
    assert found is not None
    return found.group(1)


def test_download_progress_bar_and_result_line_are_clean_on_a_terminal(
    terminal: Tmux, own_server: Server, tmp_path: Path
) -> None:
    artifact_id = uploaded(terminal, tmp_path / "src.bin", 20)

    terminal.run("down", ["download", artifact_id, "-o", str(tmp_path / "back.bin")])
    status = terminal.wait_exit("down")

    lines = terminal.screen("down")
    assert status == 0, lines
    assert lines[-1] == f"{tmp_path / 'back.bin'}  20.0 MiB"
    assert lines[-2].startswith(artifact_id), lines
    assert "20.0/20.0 MiB" in lines[-2], lines


def test_interrupted_upload_says_that_the_same_command_resumes_it(
    terminal: Tmux, own_server: Server, tmp_path: Path
) -> None:
    write_distinct_blocks(tmp_path / "big.bin", 64)
    command = ["upload", str(tmp_path / "big.bin"), "--chunk-size", "1M", "--parallel", "1"]
    terminal.run("first", command)
    # The resume state is written once the upload exists on the server: pause the server there, so the
    # upload is certainly still running when Ctrl-C arrives.
    wait_for_file("cache/mcp-blobstore/uploads/*.json", tmp_path, terminal, "first")
    interrupt_while_paused(terminal, own_server, "first", "upload")

    terminal.run("again", command)
    again_status = terminal.wait_exit("again")
    again = terminal.screen("again")

    assert again_status == 0, again
    assert_clean_transfer(again, ["big.bin"])
    assert ", resumed: " in again[-1]


def test_interrupted_download_says_that_the_same_command_resumes_it(
    terminal: Tmux, own_server: Server, tmp_path: Path
) -> None:
    command = ["download", uploaded(terminal, tmp_path / "src.bin", 96), "-o", str(tmp_path / "back.bin")]

    terminal.run("first", command)
    # The partial file exists once the download has started: pause the server there, so the download is
    # certainly still running when Ctrl-C arrives.
    wait_for_file("back.bin.part", tmp_path, terminal, "first")
    interrupt_while_paused(terminal, own_server, "first", "download")
    terminal.run("again", command)
    again_status = terminal.wait_exit("again")

    assert again_status == 0, terminal.screen("again")
    assert (tmp_path / "back.bin").read_bytes() == (tmp_path / "src.bin").read_bytes()
