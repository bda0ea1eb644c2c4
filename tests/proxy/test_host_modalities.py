"""Hosts that cannot see or hear: each profile says which modalities its model takes, the profile is picked
from the client's ``clientInfo`` when ``--host-profile`` names none (said on the log and in the handshake's
instructions), and a block the host cannot take comes as its text view (a screenshot's OCR text) with the
link to the original."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import AudioContent, Implementation, ResourceLink, TextContent

from blobstore.views.text_views import TEXT_VIEWS
from mcp_resources.proxy.rules import CLIENT_NAMES, HOST_PROFILES, load_rules, profile_for_client
from tests.proxy.conftest import PYTHON_UPSTREAM, proxy_command, proxy_params, raw_peer
from tests.proxy.offload_fixtures import b64, links, open_rig, text_of, wav_bytes
from tests.views import media

SCREENSHOT_LINES = ["Where text can say it, give text", "not pixels: 1,500 tokens against 100"]


def test_every_profile_says_which_modalities_its_model_takes() -> None:
    takes = {name: (profile.image, profile.audio) for name, profile in HOST_PROFILES.items()}
    assert takes == {
        "claude-desktop": ("yes", "no"),
        "claude-code": ("yes", "no"),
        "vscode-copilot": ("yes", "not known"),
        "cursor": ("yes", "not known"),
        "gemini-cli": ("yes", "yes"),
        "generic": ("not known", "not known"),
    }
    # Where it is not known, the block passes as it came: MCP lets a host take it.
    assert HOST_PROFILES["generic"].takes("audio")
    assert not HOST_PROFILES["claude-code"].takes("audio")
    assert set(CLIENT_NAMES.values()) == set(HOST_PROFILES) - {"generic"}


def test_the_client_name_picks_the_profile_and_says_why() -> None:
    assert profile_for_client({"name": "claude-ai", "version": "0.1.0"}) == (
        "claude-desktop",
        "the client's clientInfo.name is 'claude-ai'",
    )
    assert profile_for_client({"name": "Visual Studio Code"})[0] == "vscode-copilot"
    assert profile_for_client({"name": "mcp"}) == (
        "generic",
        "the client's clientInfo.name 'mcp' is no host this proxy knows",
    )
    assert profile_for_client(None) == ("generic", "the client sent no clientInfo.name")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_without_a_profile_the_clients_name_picks_it_and_a_recording_comes_as_a_line_and_a_link(
    tmp_path: Path, mode: str
) -> None:
    client_info = Implementation(name="claude-code", version="2.1.0")
    params = proxy_params(tmp_path / "data", PYTHON_UPSTREAM)
    async with Client(params, client_info=client_info, mode=mode) as client:
        instructions = client.instructions or ""
        result = await client.call_tool("audio", {"seconds": 1})
    assert (
        "[blobstore proxy: host profile claude-code, because the client's clientInfo.name is 'claude-code'"
        in instructions
    )
    assert "images: yes, audio: no" in instructions
    assert not any(isinstance(block, AudioContent) for block in result.content)
    line = result.content[0]
    assert isinstance(line, TextContent)
    assert "the claude-code host's model takes no audio" in line.text
    # The upstream's recording is a 440 Hz tone: its transcript stands for it, and says no word was heard.
    assert "audio" in TEXT_VIEWS
    assert "so its transcript follows instead (transcript of 0.0-1.0 s of 1.0 s by pocketsphinx" in line.text
    (link,) = [block for block in result.content if isinstance(block, ResourceLink)]
    assert link.mime_type == "audio/wav"


async def test_the_log_says_which_profile_was_picked_and_a_named_profile_wins(tmp_path: Path) -> None:
    command = proxy_command(tmp_path / "data", PYTHON_UPSTREAM)
    async with raw_peer(command, stderr=asyncio.subprocess.PIPE) as peer:
        first = await peer.handshake()
        await peer.close()
        assert peer.process.stderr is not None
        log = (await peer.process.stderr.read()).decode()
    expected = (
        "host profile generic, because the client's clientInfo.name 'raw-peer' is no host this proxy knows"
    )
    assert expected in log
    assert expected in first["instructions"]
    named = proxy_command(tmp_path / "data", PYTHON_UPSTREAM, "--host-profile", "claude-desktop")
    async with raw_peer(named) as peer:
        first = await peer.handshake()
    assert "host profile claude-desktop, because --host-profile names it" in first["instructions"]


async def test_a_screenshot_for_a_host_that_cannot_see_comes_as_its_ocr_text(tmp_path: Path) -> None:
    png, _ = media.printed_text(SCREENSHOT_LINES)
    async with open_rig(tmp_path) as rig:
        rules = load_rules(rig.settings, profile="claude-code", config_path=None, read_tool_hint=True)
        blind = dataclasses.replace(
            rules, profile=dataclasses.replace(rules.profile, name="blind", image="no")
        )
        offloader = rig.offloader(rules=blind)
        block: dict[str, Any] = {"type": "image", "data": b64(png), "mimeType": "image/png"}
        result = await offloader.tool_result(
            tool="screenshot", arguments={}, output_schema=None, result={"content": [block]}
        )
        assert result is not None
        assert all(item["type"] != "image" for item in result["content"])
        line, text = (item["text"] for item in result["content"][:2])
        assert "the blind host's model takes no image, so its OCR text follows instead" in line
        assert "13 words in 2 lines, 0 under 0.9 confidence marked [?word]" in line
        assert text.split() == " ".join(SCREENSHOT_LINES).split()
        (link,) = links(result)
        assert await rig.bytes_of(link["uri"]) == png
        # The same screenshot for a host that sees passes as it came: it is small.
        seeing = rig.offloader(profile="claude-code")
        assert (
            await seeing.tool_result(
                tool="screenshot", arguments={}, output_schema=None, result={"content": [block]}
            )
            is None
        )
        # Audio for a host that does not hear is stored however small, and linked.
        audio = {"type": "audio", "data": b64(wav_bytes(0.2)), "mimeType": "audio/wav"}
        heard = await seeing.tool_result(
            tool="say", arguments={}, output_schema=None, result={"content": [audio]}
        )
        assert heard is not None
        assert "takes no audio" in text_of(heard)
        assert json.dumps(heard).count('"type": "audio"') == 0


async def test_a_recording_for_a_host_that_cannot_hear_comes_as_its_transcript(tmp_path: Path) -> None:
    # Two of Debian's ALSA voices with 10 s of silence between them: the host gets what was said, when.
    wav = media.spoken_wav(["Front_Center", "Rear_Right"], gap=10.0)
    async with open_rig(tmp_path) as rig:
        rules = load_rules(rig.settings, profile="claude-code", config_path=None, read_tool_hint=True)
        offloader = rig.offloader(rules=rules)
        block: dict[str, Any] = {"type": "audio", "data": b64(wav), "mimeType": "audio/wav"}
        result = await offloader.tool_result(
            tool="say", arguments={}, output_schema=None, result={"content": [block]}
        )
        assert result is not None
        assert json.dumps(result).count('"type": "audio"') == 0
        line, text = (item["text"] for item in result["content"][:2])
        assert "the claude-code host's model takes no audio, so its transcript follows instead" in line
        assert "by pocketsphinx 5." in line
        assert "(en-us): 2 segments" in line
        # The link's description carries the speech map the voice-activity detector found.
        assert "speech 0:00-0:02, 0:11-0:13 of 0:13" in line
        first, second, tail = text.splitlines()
        assert (first[:4], first.split()[-1]) == ("[0.0", "center"), first
        assert (second[:4], second.split()[-1]) == ("[11.", "right"), second
        assert tail == "That transcript reaches the end of the recording."
        (link,) = links(result)
        assert await rig.bytes_of(link["uri"]) == wav
