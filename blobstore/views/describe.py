"""The words of the views: what an answer is, and which view to call next.

Below both edges so that ``read_artifact``, ``tool_result_for`` and the proxy's offload lines say the same
thing. Every line names the artifact and what part of it the answer holds (a model without vision or audio
still learns the facts), and a hint names the call that reads the next piece.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def page_list(pages: Iterable[int]) -> str:
    """``[3, 4, 5, 9]`` as ``"3-5,9"``: the form the ``pages`` argument takes."""
    runs: list[list[int]] = []
    for page in pages:
        if runs and page == runs[-1][1] + 1:
            runs[-1][1] = page
        else:
            runs.append([page, page])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def seconds(value: float) -> str:
    """``40.0``, ``42.34``, ``612.437``: to the millisecond the views work in, with at least one decimal.
    Rounding to a tenth would make the next segment's hint start up to 50 ms off where this one ended."""
    text = f"{value:.3f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def pages_line(name: str, pages: Iterable[int], total: int, what: str) -> str:
    """``report.pdf, pages 3-5 of 42, text layer``."""
    listed = list(pages)
    noun = "page" if len(listed) == 1 else "pages"
    return f"{name}, {noun} {page_list(listed)} of {total}, {what}"


def next_pages_hint(pages: Iterable[int], total: int, *, tool_call: bool = True, also: str = "") -> str:
    """How to read the pages after the last one asked for (as many again, with the call's other arguments
    ``also``, e.g. ``page_format="ocr"``), or that it was the last."""
    listed = list(pages)
    last = max(listed)
    if last >= total:
        return f"Page {last} is the last page."
    count = len(listed)
    following = page_list(range(last + 1, min(total, last + count) + 1))
    more = f", {also}" if also else ""
    call = f'read_artifact(uri, pages="{following}"{more})' if tool_call else f"pages {following}"
    return f"Next: {call}."


def segment_line(name: str, start: float, end: float, total: float) -> str:
    """``meeting.wav, 40.0-70.0 s of 612.4 s``."""
    return f"{name}, {seconds(start)}-{seconds(end)} s of {seconds(total)} s"


def next_speech(speech: Sequence[Sequence[float]], end: float) -> float | None:
    """Where the speech after ``end`` starts (``end`` itself when it falls inside speech), or None when no
    speech follows: the start a ``Next:`` line names, skipping silence."""
    for start, stop in speech:
        if stop > end + 0.0005:
            return max(end, float(start))
    return None


def next_segment_hint(
    end: float, total: float, length: float, speech: Sequence[Sequence[float]] | None = None
) -> str:
    """The call that hears what follows: the next ``length`` seconds, or, where the recording's speech map
    is known, the next ``length`` seconds of speech (silence skipped)."""
    if end >= total - 0.0005:
        return "That segment reaches the end of the recording."
    start = end
    if speech is not None:
        found = next_speech(speech, end)
        if found is None:
            return f"No speech follows {seconds(end)} s (the voice-activity detector's speech map)."
        start = found
    step = min(length, total - start)
    return f"Next: read_artifact(uri, start_seconds={seconds(start)}, duration_seconds={step:g})."
