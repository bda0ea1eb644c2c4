"""Request ids read from the system's generator in batches (``blobstore.request_ids``): 32 hex characters,
never repeated, not even by a forked child or by threads taking ids at once."""

from __future__ import annotations

import re
import threading

from blobstore.request_ids import PER_READ, RequestIds
from tests.fixtures.processes import in_forked_child


def test_ids_are_32_hex_characters_and_never_repeat_across_many_batches() -> None:
    ids = RequestIds()
    taken = [ids.new() for _ in range(PER_READ * 20 + 7)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", value) for value in taken)
    assert len(set(taken)) == len(taken)


def test_threads_taking_ids_at_once_never_get_the_same_one() -> None:
    ids = RequestIds()
    taken: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def take(into: list[str]) -> None:
        start.wait()
        into.extend(ids.new() for _ in range(PER_READ * 4))

    threads = [threading.Thread(target=take, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [value for into in taken for value in into]
    assert len(every) == 8 * PER_READ * 4
    assert len(set(every)) == len(every)


def test_a_forked_child_does_not_repeat_the_ids_its_parent_holds() -> None:
    ids = RequestIds()
    ids.new()  # the parent now holds a batch of ids not yet given out
    text = in_forked_child(lambda: "".join(ids.new() for _ in range(10)).encode()).decode()
    child = {text[i : i + 32] for i in range(0, len(text), 32)}
    parent = {ids.new() for _ in range(PER_READ)}
    assert len(child) == 10
    assert not child & parent
