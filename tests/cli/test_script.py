"""``blobstore test SCRIPT`` as a CI job runs it: the example script against the example image server,
scripts whose expectations fail or whose steps cannot run, mistakes in a script, and the JUnit XML report."""

from __future__ import annotations

import hashlib
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from blobstore.cli.tester.script import ScriptError, load_script
from tests.cli.conftest import EVERYTHING, EXAMPLES, IMAGE_SERVER, Person, one_line_failure, sha256_of
from tests.fixtures.server import Server

sys.path.insert(0, str(EXAMPLES))
from image_tool_server import draw_heatmap


def junit_cases(path: Path) -> dict[str, ET.Element]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return {case.attrib["name"]: case for case in suite.iter("testcase")}


def test_the_example_script_passes_against_the_example_server(person: Person) -> None:
    done = person.blobstore(
        "test", str(EXAMPLES / "image_tool_checks.toml"), "--save-dir", "out", "--junit", "out/report.xml"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "3 steps: 3 passed, 0 failed"
    out = person.work / "out"
    large = draw_heatmap(1200, 1200, 1, 2)
    assert (out / "small_1.png").read_bytes() == draw_heatmap(160, 90, 10, 1)
    assert (out / "large_1.png").read_bytes() == large
    assert (out / "head_0.png").read_bytes() == large[:65536]
    assert f"    read {len(large):,} bytes in 5 reads, saved out/large_1.png; sha256 verified" in done.stdout
    cases = junit_cases(out / "report.xml")
    assert list(cases) == ["small", "large", "head"]
    for case in cases.values():
        assert case.find("failure") is None
        assert case.find("error") is None
        assert case.attrib["classname"] == "image_tool_checks"


FAILING = """\
server:
  command: [{python}, {server}]
steps:
  - name: kept
    call: render_heatmap
    arguments: {{width: 64, height: 48, cell: 8, seed: 3}}
    expect:
      kinds: [text, image]
      sha256: {{kept_1.png: {digest}}}
  - name: wrong
    call: render_heatmap
    arguments: {{width: 64, height: 48}}
    expect:
      kinds: [image]
      max_width: 32
      text_contains: [Heatmap 64x48, seed 9]
  - name: missing
    call: render_heatmaps
  - name: after
    call: render_heatmap
    arguments: {{width: 16, height: 16, cell: 4}}
    expect:
      count: 2
      mime_type: image/png
"""


def test_failed_expectations_and_steps_that_cannot_run_fail_the_run_and_the_report(person: Person) -> None:
    script = person.work / "checks.yaml"
    digest = hashlib.sha256(draw_heatmap(64, 48, 8, 3)).hexdigest()
    script.write_text(FAILING.format(python=sys.executable, server=IMAGE_SERVER[1], digest=digest))

    done = person.here("test", str(script), "--junit", "report.xml")

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "  FAILED: block kinds are [text, image], expected [image]" in lines
    assert "  FAILED: Content 1 (Image): width 64 px, expected max_width 32" in lines
    assert "  FAILED: no text contains 'seed 9'" in lines
    assert any(line.startswith("  ERROR: ") and "has no tool 'render_heatmaps'" in line for line in lines)
    assert lines[-1] == "4 steps: 2 passed, 2 failed"
    cases = junit_cases(person.work / "report.xml")
    assert cases["kept"].find("failure") is None
    failure = cases["wrong"].find("failure")
    assert failure is not None
    assert failure.attrib["message"] == "block kinds are [text, image], expected [image]"
    assert failure.text is not None
    assert len(failure.text.splitlines()) == 3
    error = cases["missing"].find("error")
    assert error is not None
    assert "render_heatmaps" in error.attrib["message"]
    assert cases["after"].find("failure") is None
    assert cases["after"].find("error") is None
    suite = ET.parse(person.work / "report.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.attrib["tests"], suite.attrib["failures"], suite.attrib["errors"]) == ("4", "1", "1")


def test_a_saved_files_sha256_is_checked(person: Person) -> None:
    script = person.work / "sha.toml"
    script.write_text(
        f"""\
[server]
command = {json.dumps(IMAGE_SERVER)}

[[steps]]
name = "tile"
call = "render_heatmap"
arguments = {{ width = 32, height = 32, cell = 4 }}
expect = {{ sha256 = {{ "tile_1.png" = "{"0" * 64}" }} }}
"""
    )

    done = person.here("test", str(script), "--output", "json")

    assert done.returncode == 1
    report = json.loads(done.stdout)
    (step,) = report["steps"]
    got = sha256_of(person.work / "tile_1.png")
    assert step["failures"] == [f"tile_1.png: sha256 {got}, expected {'0' * 64}"]
    assert (report["passed"], report["failed"]) == (0, 1)


@pytest.mark.usefixtures("npm_servers")
def test_a_script_against_a_third_party_server_given_on_the_command_line(person: Person) -> None:
    script = person.work / "everything.toml"
    script.write_text(
        """\
[[steps]]
call = "get-tiny-image"
expect = { kinds = ["text", "image", "text"], mime_type = "image/png", text_contains = "MCP logo" }

[[steps]]
call = "get-resource-links"
arguments = { count = 2 }
follow_links = true
expect = { kinds = ["text", "resource_link", "resource_link"] }

[[steps]]
read = { step = "get-resource-links", block = 2 }
expect = { kinds = ["text"], text_contains = "Resource 2: This is a plaintext resource" }
"""
    )

    done = person.blobstore("test", str(script), "--", *EVERYTHING)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "3 steps: 3 passed, 0 failed"
    assert sorted(p.name for p in person.work.iterdir() if p.suffix != ".toml") == [
        "get-resource-links_1.txt",
        "get-resource-links_2.txt",
        "get-tiny-image_1.png",
    ]


def test_a_script_against_the_stores_mcp_endpoint(person: Person, store: Server) -> None:
    script = person.work / "store.toml"
    script.write_text(
        """\
[[steps]]
name = "upload"
call = "upload_begin"
arguments = { name = "notes.txt", mime_type = "text/plain" }
expect = { kinds = ["text"], text_contains = "upload_id" }

[[steps]]
name = "gone"
call = "read_artifact"
arguments = { uri = "blobstore://artifacts/a_0000000000000000000000" }
expect = { is_error = true, error_code = "not_found" }
"""
    )

    done = person.here("test", str(script), "--url", f"{store.url}/mcp")

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "2 steps: 2 passed, 0 failed"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            '[[steps]]\ncall = "t"\nexpect = { colour = "red" }\n',
            "steps[0].expect.colour: unknown key (known: count, error_code, is_error, kinds, max_height, "
            "max_width, mime_type, min_height, min_width, sha256, text_contains)",
        ),
        ('[[steps]]\ncall = "t"\nread = "x://y"\n', "steps[0]: a step has either call = TOOL or read = URI"),
        (
            '[[steps]]\ncall = "t"\nexpect = { count = true }\n',
            "steps[0].expect.count: must be a whole number",
        ),
        (
            '[[steps]]\nread = { step = "later", block = 1 }\n',
            "steps[0].read.step: no earlier step is named 'later'",
        ),
        (
            '[[steps]]\ncall = "t"\nexpect = { kinds = ["picture"] }\n',
            "steps[0].expect.kinds: unknown kind 'picture' "
            "(known: audio, blob, image, resource, resource_link, text)",
        ),
        (
            '[[steps]]\ncall = "t"\n[[steps]]\ncall = "u"\nname = "t"\n',
            "steps[1].name: two steps are named 't'",
        ),
        ("steps = [\n", "not valid TOML: "),
        ('[server]\ncommand = "true"\n', "steps: the script needs a list of steps ([[steps]] in TOML)"),
        (
            '[server]\nprotocol = "2024"\n[[steps]]\ncall = "t"\n',
            "server.protocol: must be one of auto, legacy",
        ),
    ],
)
def test_a_mistake_in_the_script_names_its_key(tmp_path: Path, text: str, line: str) -> None:
    script = tmp_path / "broken.toml"
    script.write_text(text)

    with pytest.raises(ScriptError) as refused:
        load_script(script)

    assert str(refused.value).startswith(f"{script}: {line}")
    assert "\n" not in str(refused.value)


def test_a_yaml_script_is_read_as_yaml(tmp_path: Path) -> None:
    script = tmp_path / "checks.yml"
    script.write_text("steps:\n  - call: t\n    expect: {kinds: [text], count: 1}\n  - call: t\n")

    loaded = load_script(script)

    assert [step.name for step in loaded.steps] == ["t", "t-2"]
    assert loaded.steps[0].expect.kinds == ("text",)


def test_a_mistake_in_the_script_is_one_line_and_nothing_runs(person: Person) -> None:
    script = person.work / "broken.yaml"
    script.write_text("steps:\n  - call: t\n    expect: {kinds: text: image}\n")

    done = person.blobstore("test", str(script), "--", sys.executable, "-c", "raise SystemExit('started')")

    assert one_line_failure(done, 2).startswith(f"blobstore: {script}: not valid YAML: ")
    assert "started" not in done.stderr


def test_a_script_without_a_server_says_how_to_name_one(person: Person) -> None:
    (person.work / "bare.toml").write_text('[[steps]]\ncall = "render_heatmap"\n')

    done = person.here("test", "bare.toml")

    assert one_line_failure(done, 2) == (
        "blobstore: bare.toml: server: the script names no server; give one after -- or --url"
    )
