"""``blobstore call``, ``read``, ``tools`` and ``resources`` as a person runs them: subprocesses against the
example servers, this store's ``/mcp`` and ``blobstore mcp``, the proxy tests' Python upstream and the npm
server-everything; what they print, the files they save, and the one line of each failure."""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from PIL import Image

from blobstore.cli.tester.blocks import TIMES
from blobstore.tokens import estimate_image_tokens
from tests.cli.conftest import (
    EVERYTHING,
    FILE_SERVER,
    IMAGE_SERVER,
    PYTHON_UPSTREAM,
    RAW_UPSTREAM,
    Person,
    one_line_failure,
    sha256_of,
)
from tests.fixtures.ports import free_port
from tests.fixtures.server import BLOBSTORE, Server, serving
from tests.proxy.conftest import EVERYTHING_SERVER, HERE
from tests.proxy.upstream_server import photo_png

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from image_tool_server import draw_heatmap

ARTIFACT_TOOLS = [sys.executable, str(HERE / "artifact_tools_upstream.py")]


def image_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        return image.size


# -- the example image server ------------------------------------------------------------------------------


def test_an_inline_image_is_one_line_and_its_file_is_replaced_only_with_force(person: Person) -> None:
    first = person.call("render_heatmap", "--arg", "width=800", "--arg", "height=600", server=IMAGE_SERVER)

    assert first.returncode == 0, first.stderr
    png = draw_heatmap(800, 600, 40, 0)
    lines = first.stdout.splitlines()
    assert re.fullmatch(r"Content 0 \(Text\): \d+ chars", lines[0]), lines
    assert lines[1] == "Heatmap 800x600 px, 40 px cells, seed 0."
    at = lines.index(f"Content 1 (Image): image/png, {len(png):,} bytes, 800\u00d7600 px, ~638 tokens")
    assert lines[at + 1] == "  saved render_heatmap_1.png"
    saved = person.work / "render_heatmap_1.png"
    assert saved.read_bytes() == png

    again = person.call("render_heatmap", "--arg", "seed=1", server=IMAGE_SERVER)

    failure = one_line_failure(again, 1)
    assert failure == (
        "blobstore: Content 1 (Image): not saved: render_heatmap_1.png exists (--force replaces it)"
    )
    assert "  not saved: render_heatmap_1.png exists (--force replaces it)" in again.stdout.splitlines()
    assert saved.read_bytes() == png

    forced = person.call("render_heatmap", "--arg", "seed=1", "--force", server=IMAGE_SERVER)

    assert forced.returncode == 0, forced.stderr
    assert saved.read_bytes() == draw_heatmap(640, 360, 40, 1)
    assert sorted(p.name for p in person.work.iterdir()) == ["render_heatmap_1.png"]


def test_follow_links_reads_a_large_image_in_windows_checked_by_its_sha256(person: Person) -> None:
    done = person.call_here(
        "render_heatmap",
        *("--arg", "width=1200", "--arg", "height=1200", "--arg", "cell=1", "--arg", "seed=4"),
        *("--follow-links", "--save-dir", "out", "--output", "json"),
        server=IMAGE_SERVER,
    )

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    png = draw_heatmap(1200, 1200, 1, 4)
    assert [block["type"] for block in report["content"]] == ["text", "resource_link"]
    link = report["content"][1]
    assert link["mimeType"] == "image/png"
    assert link["size"] == len(png)
    followed = link["followed"]
    assert followed["verified"] is True
    assert followed["sha256"] == link["sha256"] == sha256_of(person.work / "out" / "render_heatmap_1.png")
    assert followed["reads"] == -(-len(png) // (1024 * 1024))  # one 1 MiB window at a time
    assert (person.work / "out" / "render_heatmap_1.png").read_bytes() == png


# -- this store: /mcp over streamable HTTP in both eras, blobstore mcp on stdio ---------------------------


@pytest.fixture(scope="module")
def photo(store: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    """A 1000x800 photo in the store (over the inline limit, so it is read in windows): its URI and bytes."""
    folder = tmp_path_factory.mktemp("photo")
    data = photo_png(1000, 800)
    assert len(data) > 512 * 1024
    (folder / "photo.png").write_bytes(data)
    uploaded = Person(folder, pytest.MonkeyPatch()).blobstore(
        "upload", str(folder / "photo.png"), "--json", "--url", store.url, cwd=folder
    )
    assert uploaded.returncode == 0, uploaded.stderr
    return f"blobstore://artifacts/{json.loads(uploaded.stdout)[0]['artifact']['id']}", data


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
def test_the_stores_mcp_endpoint_reads_calls_and_lists_in_either_era(
    person: Person, store: Server, photo: tuple[str, bytes], protocol: str
) -> None:
    uri, data = photo
    endpoint = ["--url", f"{store.url}/mcp", "--protocol", protocol]
    artifact_id = uri.rsplit("/", 1)[1]

    read = person.here("read", uri, *endpoint)

    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == [
        f"Contents 0 (Blob): {uri}, image/png, {len(data):,} bytes, 1000\u00d7800 px, ~1,044 tokens",
        f"  read {len(data):,} bytes in 2 reads, saved {artifact_id}_0.png; sha256 verified",
    ]
    assert (person.work / f"{artifact_id}_0.png").read_bytes() == data

    called = person.here("call", "read_artifact", "--arg", f"uri={uri}", "--arg", "length=65536", *endpoint)

    assert called.returncode == 0, called.stderr
    window = f"{uri}?offset=0&length=65536"
    assert f"Content 1 (Resource): {window}, image/png, 65,536 bytes, 1000\u00d7800 px, ~1,044 tokens" in (
        called.stdout.splitlines()
    )
    assert (person.work / "read_artifact_1.png").read_bytes() == data[:65536]


def test_a_tool_error_of_the_store_and_its_resources(
    person: Person, store: Server, photo: tuple[str, bytes]
) -> None:
    endpoint = ["--url", f"{store.url}/mcp"]

    missing = person.blobstore(
        "call", "read_artifact", "--arg", "uri=blobstore://artifacts/a_missing0000000000000000", *endpoint
    )

    assert one_line_failure(missing, 1) == "blobstore: read_artifact answered isError (not_found)"
    assert missing.stdout.splitlines()[-1].startswith("isError: true, the tool failed (code not_found): ")

    listed = person.blobstore("resources", *endpoint)

    assert listed.returncode == 0, listed.stderr
    assert f"{photo[0]}  photo.png  image/png  " in listed.stdout
    assert "blobstore://artifacts/{artifact_id}{?offset,length}" in listed.stdout


def test_blobstore_mcp_on_stdio_lists_its_tools_and_reads_a_window(
    person: Person, store: Server, photo: tuple[str, bytes]
) -> None:
    uri, data = photo
    mcp = [BLOBSTORE, "mcp", "--data-dir", str(store.data_dir)]

    tools = person.blobstore("tools", "--", *mcp)

    assert tools.returncode == 0, tools.stderr
    names = [line.split("(", 1)[0] for line in tools.stdout.splitlines() if not line.startswith(" ")]
    assert names == [
        "upload_begin",
        "upload_chunk",
        "upload_status",
        "upload_commit",
        "upload_abort",
        "read_artifact",
    ]
    assert "read_artifact(uri: string, offset?: " in tools.stdout

    read = person.blobstore("read", f"{uri}?offset=1000&length=5000", "--save-dir", "w", "--", *mcp)

    assert read.returncode == 0, read.stderr
    assert (
        read.stdout.splitlines()[0]
        == f"Contents 0 (Blob): {uri}?offset=1000&length=5000, image/png, 5,000 bytes"
    )
    saved = next((person.work / "w").iterdir())
    assert saved.read_bytes() == data[1000:6000]


def test_a_bearer_token_goes_in_a_header(person: Person, tmp_path: Path) -> None:
    data_dir = tmp_path / "secured"
    made = person.here("token", "create", "--namespace", "default", "--data-dir", str(data_dir), "--json")
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)["token"]
    (tmp_path / "server").mkdir()
    with serving(tmp_path / "server", data_dir=data_dir) as secured:
        refused = person.here("tools", "--url", f"{secured.url}/mcp")
        allowed = person.here(
            "tools", "--url", f"{secured.url}/mcp", "--header", f"Authorization: Bearer {token}"
        )

    assert one_line_failure(refused, 1) == f"blobstore: {secured.url}/mcp answered HTTP 401 Unauthorized"
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.startswith("upload_begin(")


# -- files as arguments ------------------------------------------------------------------------------------


def test_a_file_parameter_of_a_store_gets_the_file_uploaded_first(person: Person) -> None:
    photo_file = person.work / "photo.png"
    photo_file.write_bytes(photo_png(300, 200))

    done = person.call_here(
        "checksum_image", "--file", "image=photo.png", "--output", "json", server=FILE_SERVER
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"] == {
        "sha256": sha256_of(photo_file),
        "size": photo_file.stat().st_size,
        "width": 300,
        "height": 200,
        "mime_type": "image/png",
    }
    listed = person.here("resources", "--", BLOBSTORE, "mcp")  # the store the example server uses
    assert listed.returncode == 0, listed.stderr
    assert "  photo.png  image/png  " in listed.stdout


def test_a_base64_parameter_gets_the_file_inline(person: Person) -> None:
    photo_file = person.work / "photo.png"
    photo_file.write_bytes(photo_png(120, 80))
    record = person.home / "calls.jsonl"

    done = person.call_here(
        "checksum_image", "--file", f"image={photo_file}", server=[*ARTIFACT_TOOLS, str(record)]
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == sha256_of(photo_file)
    (seen,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert seen["arguments"]["image"]["length"] == len(base64.b64encode(photo_file.read_bytes()))


# -- the host's view ---------------------------------------------------------------------------------------


async def through_the_proxy(data_dir: Path, tool: str, arguments: dict[str, object]) -> dict[str, object]:
    params = StdioServerParameters(
        command=BLOBSTORE,
        args=["proxy", "--data-dir", str(data_dir), "--host-profile", "claude-code", "--", *PYTHON_UPSTREAM],
    )
    async with Client(params) as client:
        result = await client.call_tool(tool, arguments)
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    dumped.pop("resultType", None)
    return dumped


def test_as_host_shows_what_the_hosts_model_receives_through_the_proxy(person: Person) -> None:
    arguments: dict[str, object] = {"width": 1600, "height": 1200}

    text = person.call_here(
        "photo", "--json", json.dumps(arguments), "--as-host", "claude-code", server=PYTHON_UPSTREAM
    )
    shown = person.call_here(
        "photo",
        "--json",
        json.dumps(arguments),
        "--as-host",
        "claude-code",
        "--output",
        "json",
        "--no-save",
        server=PYTHON_UPSTREAM,
    )

    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    png = photo_png(1600, 1200)
    tokens = estimate_image_tokens(1600, 1200)
    assert (
        lines[0] == f"Content 0 (Image): image/png, {len(png):,} bytes, 1600\u00d71200 px, ~{tokens:,} tokens"
    )
    assert (person.work / "photo_0.png").read_bytes() == png
    assert lines[-1] == (
        "Server block 0 (Image): stored; the host sees it downscaled to 1024\u00d7768 px "
        "and a link to the original"
    )
    assert any(
        line.startswith("As claude-code receives it through blobstore proxy: 3 blocks, ") for line in lines
    )
    downscaled = next(line for line in lines if line.startswith("Content 1 (Image): image/jpeg, "))
    assert "1024\u00d7768 px" in downscaled
    assert "server block 0 downscaled" in downscaled
    assert image_size(person.work / "photo.claude-code_1.jpg") == (1024, 768)
    host = json.loads(shown.stdout)["host"]
    assert [block["how"] for block in host["content"]] == ["line", "downscaled", "link"]
    assert host["tokens"] <= host["caps"]["tokens"]
    # What a real `blobstore proxy --host-profile claude-code` in front of the same server hands its host.
    assert host["result"] == anyio.run(through_the_proxy, person.data_dir, "photo", arguments)


def test_audio_is_described_by_its_duration_rate_and_channels(person: Person) -> None:
    done = person.call_here("audio", "--arg", "seconds=3.2", server=PYTHON_UPSTREAM)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "Content 0 (Audio): audio/wav, 3.2 s, 16 kHz mono",
        "  saved audio_0.wav",
    ]


# -- a third-party server ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("npm_servers")
def test_server_everythings_image_and_links(person: Person) -> None:
    image = person.call("get-tiny-image", server=EVERYTHING)

    assert image.returncode == 0, image.stderr
    source = (EVERYTHING_SERVER.parent / "tools" / "get-tiny-image.js").read_text()
    png = base64.b64decode(re.search(r'MCP_TINY_IMAGE = "([^"]+)"', source).group(1))  # type: ignore[union-attr]
    # Its PNG has an iCCP chunk with a bad checksum, which Pillow alone refuses: read as browsers read it.
    assert image.stdout.splitlines() == [
        "Content 0 (Text): 31 chars",
        "Here's the image you requested:",
        f"Content 1 (Image): image/png, {len(png):,} bytes, 20{TIMES}20 px, ~1 token",
        "  saved get-tiny-image_1.png",
        "Content 2 (Text): 32 chars",
        "The image above is the MCP logo.",
    ]
    assert (person.work / "get-tiny-image_1.png").read_bytes() == png

    links = person.call("get-resource-links", "--arg", "count=2", "--follow-links", server=EVERYTHING)

    assert links.returncode == 0, links.stderr
    assert "(the server stated none to check it against)" in links.stdout
    # Both links say text/plain: the first names a base64 blob of text, the second a text resource.
    assert re.fullmatch(
        rb"Resource 1: This is a base64 blob created at .+",
        (person.work / "get-resource-links_1.txt").read_bytes(),
    )
    assert re.fullmatch(
        rb"Resource 2: This is a plaintext resource created at .+",
        (person.work / "get-resource-links_2.txt").read_bytes(),
    )


# -- failures: one line, a non-zero status, nothing sent where the command was wrong -----------------------


def test_a_server_command_that_does_not_start(person: Person) -> None:
    done = person.call("anything", server=["/nonexistent/mcp-server"])

    assert one_line_failure(done, 1) == (
        "blobstore: cannot start the server '/nonexistent/mcp-server': No such file or directory"
    )


def test_a_server_command_that_exits_at_once(person: Person) -> None:
    done = person.call_here("anything", server=[sys.executable, "-c", "raise SystemExit(3)"])

    assert one_line_failure(done, 1) == (
        f"blobstore: the server {Path(sys.executable).name} closed the connection before answering "
        "(see its output above)"
    )


def test_a_url_that_refuses(person: Person) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"

    done = person.here("call", "anything", "--url", url)

    assert one_line_failure(done, 1) == f"blobstore: cannot connect to {url}: All connection attempts failed"


def test_a_server_that_does_not_answer_in_time(person: Person) -> None:
    done = person.call_here("never", "--timeout", "1", server=RAW_UPSTREAM)

    assert one_line_failure(done, 1) == (
        f"blobstore: the server {Path(sys.executable).name} did not answer within 1 s "
        "(Request 'tools/call' timed out)"
    )


def test_a_tool_the_server_does_not_offer(person: Person) -> None:
    record = person.home / "calls.jsonl"

    done = person.call_here("annotat", server=[*ARTIFACT_TOOLS, str(record)])
    listed = person.here("tools", "--output", "json", "--", *ARTIFACT_TOOLS, str(record))

    assert listed.returncode == 0, listed.stderr
    tools = json.loads(listed.stdout)
    assert [tool["name"] for tool in tools] == ["make_screenshot", "checksum_image", "annotate"]  # two pages

    assert one_line_failure(done, 2) == (
        f"blobstore: {Path(sys.executable).name} has no tool 'annotat' "
        "(it offers: annotate, checksum_image, make_screenshot)"
    )
    assert not record.exists()


def test_arguments_the_schema_refuses_are_not_sent(person: Person) -> None:
    record = person.home / "calls.jsonl"

    (person.work / "arguments.json").write_text('{"image": 5}')

    done = person.call_here(
        "checksum_image", "--json-file", "arguments.json", server=[*ARTIFACT_TOOLS, str(record)]
    )

    assert one_line_failure(done, 2) == (
        "blobstore: the tool's inputSchema refuses the arguments at image: 5 is not of type 'string'"
    )
    assert not record.exists()


def test_a_block_with_invalid_base64(person: Person) -> None:
    done = person.call("media", "--arg", "data=iVBOR*not/base64", server=RAW_UPSTREAM)

    problem = "its 16 characters of data are not valid base64 (from character 5 on)"
    assert one_line_failure(done, 1) == f"blobstore: Content 0 (Image): {problem}"
    assert done.stdout.splitlines() == [f"Content 0 (Image): image/png, {problem}"]
    assert list(person.work.iterdir()) == []
