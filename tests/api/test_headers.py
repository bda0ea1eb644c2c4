"""``first_values``: the read path's one-pass view of the request headers answers as ``Headers`` does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers

from blobstore.api.headers import first_values

# Lower-case names, as ASGI servers give them, from a small alphabet so that names repeat; any latin-1 value.
names = st.text(alphabet="abr-", min_size=1, max_size=3).map(str.encode)
values = st.binary(max_size=8).filter(lambda value: b"\r" not in value and b"\n" not in value)


@given(st.lists(st.tuples(names, values), max_size=12))
def test_first_values_answers_every_name_as_starlette_headers_get(raw: list[tuple[bytes, bytes]]) -> None:
    found = first_values(raw)
    headers = Headers(raw=raw)
    assert set(found) == {name.decode("latin-1") for name, _ in raw}
    for name, value in found.items():
        assert headers.get(name) == value


def test_a_repeated_name_keeps_its_first_value() -> None:
    raw = [(b"range", b"bytes=0-1"), (b"host", b"x"), (b"range", b"bytes=5-9")]
    assert first_values(raw) == {"range": "bytes=0-1", "host": "x"}
