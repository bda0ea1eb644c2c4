"""A log line's time (``blobstore.log_times``) is ``datetime.isoformat``'s text of the same moment, byte for
byte, whichever second was written before it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from blobstore.log_times import iso_micros, iso_millis, now_micros

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MOMENTS = st.integers(min_value=0, max_value=253_402_300_799_999_999)  # through 9999-12-31T23:59:59.999999


def moment(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


@given(MOMENTS, MOMENTS)
def test_the_text_is_isoformats_whatever_came_before(earlier: int, micros: int) -> None:
    iso_micros(earlier)  # the remembered second is another one, or the same
    assert iso_micros(micros) == moment(micros).isoformat()
    assert iso_millis(micros) == moment(micros).isoformat(timespec="milliseconds")


@given(st.integers(min_value=0, max_value=253_402_300_798), st.integers(min_value=0, max_value=999_999))
def test_within_one_second_only_the_fraction_changes(second: int, fraction: int) -> None:
    micros = second * 1_000_000 + fraction
    iso_micros(second * 1_000_000 + 1)
    assert iso_micros(micros) == moment(micros).isoformat()
    assert iso_millis(micros) == moment(micros).isoformat(timespec="milliseconds")


def test_a_whole_second_has_no_fraction_and_a_millisecond_text_keeps_it() -> None:
    assert iso_micros(1_000_000) == "1970-01-01T00:00:01+00:00"
    assert iso_millis(1_000_000) == "1970-01-01T00:00:01.000+00:00"
    assert iso_millis(1_000_999) == "1970-01-01T00:00:01.000+00:00"  # cut, as isoformat does


def test_now_is_the_clocks_now() -> None:
    before = datetime.now(UTC)
    now = moment(now_micros())
    after = datetime.now(UTC)
    assert before - timedelta(milliseconds=1) <= now <= after + timedelta(milliseconds=1)


def test_threads_writing_other_seconds_never_mix_their_texts() -> None:
    wrong: list[tuple[int, str]] = []

    def write(base: int) -> None:
        for step in range(2_000):
            micros = (base + step % 7) * 1_000_000 + step
            text = iso_micros(micros)
            if text != moment(micros).isoformat():
                wrong.append((micros, text))

    threads = [threading.Thread(target=write, args=(base * 1_000,)) for base in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
