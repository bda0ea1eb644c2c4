"""The progress bar of ``blobstore call`` on a real terminal: tmux runs the command against the long-running
tool of server-everything, which sends ``notifications/progress``, and the pane is read back once the command
ended. Without a terminal (a pipe) no bar is drawn."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.conftest import EVERYTHING, Person
from tests.fixtures.terminal import Tmux

pytestmark = pytest.mark.usefixtures("npm_servers")

LONG_RUNNING = ["trigger-long-running-operation", "--arg", "duration=1", "--arg", "steps=4"]
ANSWER = "Long running operation completed. Duration: 1 seconds, Steps: 4."


@pytest.fixture
def terminal(person: Person) -> Iterator[Tmux]:
    session = Tmux(person.env, person.work)
    try:
        yield session
    finally:
        session.close()


def test_progress_notifications_draw_a_bar_on_a_terminal(terminal: Tmux) -> None:
    terminal.run("call", ["call", *LONG_RUNNING, "--", *EVERYTHING])
    status = terminal.wait_exit("call")

    lines = terminal.screen("call")
    assert status == 0, lines
    bars = [line for line in lines if "trigger-long-running-operation" in line and "\u2501" in line]
    assert bars, lines
    assert "4/4" in bars[-1], lines  # the bar ended where the server's last notification put it
    assert lines[-2:] == [f"Content 0 (Text): {len(ANSWER)} chars", ANSWER], lines


def test_no_bar_without_a_terminal(person: Person) -> None:
    done = person.call(*LONG_RUNNING, server=EVERYTHING)

    assert done.returncode == 0, done.stderr
    assert "4/4" not in done.stderr
    assert "\u2501" not in done.stderr
    assert done.stdout.splitlines() == [f"Content 0 (Text): {len(ANSWER)} chars", ANSWER]
