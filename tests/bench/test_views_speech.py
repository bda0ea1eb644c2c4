"""``bench/views.py --speech-only`` runs as documented and reports each speech row (no speed is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_speech_rows_report_word_error_rate_speed_and_the_tokens_of_the_question() -> None:
    result = subprocess.run(
        [sys.executable, "bench/views.py", "--speech-only", "--hours", "0.02"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    speech = json.loads(result.stdout)["speech"]
    assert speech["reference"].split()[:4] == ["front", "center", "front", "left"]
    assert len(speech["heard"].split()) >= 12  # eight voices of two words each, a few misheard
    assert 0 <= speech["word_error_rate"] < 1
    assert speech["engine"].startswith("pocketsphinx ")
    assert speech["real_time_factor"] > 0
    assert speech["vad_seconds_per_hour"] > 0
    asked = speech["at_0_12"]
    assert asked["audio_segment_tokens"] == 960  # 30 s at 32 tokens a second
    assert 0 < asked["transcript_answer_tokens"] < asked["audio_segment_tokens"]
    assert asked["transcript"].startswith("voices.wav, transcript of 12.0-42.0 s of ")
