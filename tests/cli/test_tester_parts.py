"""The MCP tester's pure parts, in process: arguments typed and checked by a tool's schema, files in the form
the schema asks for, strict base64, the words of audio facts, and the names the command line offers."""

from __future__ import annotations

import base64
from pathlib import Path

import click
import pytest

from blobstore.cli.common import HOST_PROFILE_NAMES
from blobstore.cli.tester.arguments import build_arguments, file_argument, typed_value
from blobstore.cli.tester.blocks import audio_facts_words, decode_base64, describe_block
from blobstore.cli.tester.target import PROTOCOLS, CommandFailure
from blobstore.cli.tool_calls import call_command
from mcp_resources.proxy.rules import HOST_PROFILES

SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string"},
        "count": {"type": "integer"},
        "any": {},
        "picture": {"type": "string", "contentEncoding": "base64"},
        "upload": {"type": "string", "format": "uri", "x-mcp-file": {}},
        "table": {"type": "string", "contentMediaType": "text/csv"},
    },
    "required": ["count"],
}


@pytest.mark.parametrize(
    ("raw", "node", "value"),
    [
        ("007", {"type": "string"}, "007"),
        ("7", {"type": "integer"}, 7),
        ("007", {"type": "integer"}, "007"),
        ("true", {"anyOf": [{"type": "boolean"}, {"type": "string"}]}, True),
        ("[1, 2]", {}, [1, 2]),
        ("not json", {"type": "integer"}, "not json"),
    ],
)
def test_an_arg_value_is_typed_as_its_schema_asks(raw: str, node: dict[str, object], value: object) -> None:
    assert typed_value(raw, node) == value


def test_arguments_merge_json_then_args_and_are_checked() -> None:
    built = build_arguments(schema=SCHEMA, json_text='{"count": 1, "code": "a"}', assignments=["count=2"])

    assert built.values == {"count": 2, "code": "a"}

    with pytest.raises(CommandFailure) as refused:
        build_arguments(schema=SCHEMA, assignments=["code=x"])
    assert (
        str(refused.value) == "the tool's inputSchema refuses the arguments: 'count' is a required property"
    )
    assert refused.value.status == 2


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("picture", base64.b64encode(b"a,b\n1,2\n").decode()),
        ("upload", "data:text/csv;base64," + base64.b64encode(b"a,b\n1,2\n").decode()),
        ("table", "a,b\n1,2\n"),
    ],
)
def test_a_file_goes_in_the_form_its_schema_asks_for(tmp_path: Path, key: str, expected: str) -> None:
    path = tmp_path / "table.csv"
    path.write_bytes(b"a,b\n1,2\n")

    built = build_arguments(schema=SCHEMA, assignments=["count=1"], files=[f"{key}={path}"])

    assert built.values[key] == expected
    assert built.uploads == []  # the server offers no upload tools


def test_a_file_for_a_parameter_that_takes_none_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.bin").write_bytes(b"x")

    with pytest.raises(CommandFailure) as refused:
        file_argument("code", tmp_path / "x.bin", SCHEMA)

    assert str(refused.value).startswith(
        "--file code: the tool's inputSchema asks for no binary content at 'code'"
    )


@pytest.mark.parametrize(
    ("data", "position"),
    [("QUJD", -1), ("QU*D", 2), ("QUJ", 3), ("QUJDRA=", 7)],
)
def test_base64_is_strict_and_says_where_it_breaks(data: str, position: int) -> None:
    decoded, at = decode_base64(data)

    assert at == position
    assert (decoded == b"ABC") if position == -1 else decoded is None


def test_audio_facts_read_as_a_person_says_them() -> None:
    assert audio_facts_words({"duration_seconds": 612.44, "sample_rate": 44100, "channels": 2}) == [
        "612.4 s",
        "44.1 kHz stereo",
    ]
    assert audio_facts_words({"sample_rate": 8000, "channels": 6}) == ["8 kHz 6 channels"]


def test_an_unknown_block_type_is_said_not_crashed_on() -> None:
    block = describe_block(3, {"type": "hologram", "data": "x"})

    assert block.line() == "Content 3 (hologram): a block of a type this tester does not know"


def test_the_command_lines_choices_are_the_proxys_profiles_and_the_sdks_eras() -> None:
    assert tuple(HOST_PROFILES) == HOST_PROFILE_NAMES
    options = {param.name: param for param in call_command.params}
    protocol = options["protocol"].type
    assert isinstance(protocol, click.Choice)
    assert tuple(protocol.choices) == PROTOCOLS
