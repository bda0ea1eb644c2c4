"""OCR with positions and confidences, in this process: Tesseract (Debian's tesseract-ocr, with its eng and
chi_sim packs) reading text printed in real fonts (DejaVu, WenQuanYi Micro Hei), its TSV parsed, boxes in
the original's pixels, and the refusals: no engine, no language pack, a decompression bomb."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blobstore.errors import UnsupportedMedia, ViewTooLarge
from blobstore.views.engines import tesseract
from blobstore.views.kind import Decoded
from blobstore.views.kinds import ocr as jobs
from blobstore.views.ocr_text import count_line, join_words, ocr_text
from tests.views import media

LINES = ["Where text can say it, give text", "not pixels: 1,500 tokens against 100"]


def overlap(a: list[int], b: tuple[int, int, int, int]) -> float:
    """Intersection over union of two ``[x, y, w, h]`` boxes."""
    x = max(0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    y = max(0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    union = a[2] * a[3] + b[2] * b[3] - x * y
    return x * y / union


@pytest.fixture(scope="module")
def printed(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, list[tuple[str, media.Box]]]:
    data, boxes = media.printed_text(LINES)
    path = tmp_path_factory.mktemp("ocr") / "printed.png"
    path.write_bytes(data)
    return str(path), boxes


def document(decoded: Decoded) -> dict[str, Any]:
    ((_, data),) = decoded.parts
    found: dict[str, Any] = json.loads(data)
    return found


def test_printed_words_are_read_with_their_boxes_and_confidences(printed: Any) -> None:
    path, drawn = printed
    decoded = jobs.image_ocr(path, None, ["eng"])
    doc = document(decoded)
    assert doc["engine"].startswith("tesseract ")
    assert [line["words"][0]["text"] for line in doc["lines"]] == ["Where", "not"]
    words = [word for line in doc["lines"] for word in line["words"]]
    assert [word["text"] for word in words] == [text for text, _ in drawn]
    for word, (_, box) in zip(words, drawn, strict=True):
        assert overlap(word["box"], box) > 0.6, (word, box)
        assert 0.9 <= word["confidence"] <= 1.0
    for line in doc["lines"]:
        x, _, w, _ = line["box"]
        assert all(x <= wd["box"][0] and wd["box"][0] + wd["box"][2] <= x + w for wd in line["words"])
    text = ocr_text(doc, 0.9)
    assert text.text == "\n".join(LINES) or text.text == "\n\n".join(LINES)
    assert (text.words, text.flagged, text.lines) == (13, 0, 2)
    # Past a threshold above every confidence, each word is marked as one to confirm, and counted.
    strict = ocr_text(doc, 1.0)
    assert strict.flagged == 13
    assert strict.text.split()[0] == "[?Where]"
    assert count_line(strict, 1.0) == "13 words in 2 lines, 13 under 1 confidence marked [?word]"


def test_a_region_is_read_alone_with_boxes_in_the_originals_pixels(printed: Any) -> None:
    path, drawn = printed
    second_line = [box for text, box in drawn[7:]]
    top = min(box[1] for box in second_line) - 10
    decoded = jobs.image_ocr(path, [0, top, 2000, 60], ["eng"])
    doc = document(decoded)
    assert decoded.meta["region"][1] == top
    words = [word for line in doc["lines"] for word in line["words"]]
    assert [word["text"] for word in words] == LINES[1].split()
    for word, box in zip(words, second_line, strict=True):
        assert overlap(word["box"], box) > 0.6


def test_chinese_is_read_with_the_chi_sim_pack_without_spaces_between_characters(tmp_path: Path) -> None:
    data, _ = media.printed_text(["能给文本就不给像素"], size=40, font=media.WQY_MICROHEI)
    path = tmp_path / "zh.png"
    path.write_bytes(data)
    doc = document(jobs.image_ocr(str(path), None, ["chi_sim"]))
    assert ocr_text(doc, 0.0).text == "能给文本就不给像素"


def test_without_an_engine_or_a_language_pack_ocr_is_unsupported_saying_why(
    printed: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path, _ = printed
    with pytest.raises(
        UnsupportedMedia, match=r"language pack deu is not installed \(Debian: tesseract-ocr-deu\)"
    ):
        jobs.image_ocr(path, None, ["eng", "deu"])
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UnsupportedMedia, match="no OCR engine is installed"):
        jobs.image_ocr(path, None, ["eng"])


def test_a_30000_pixel_square_png_bomb_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "bomb.png"
    path.write_bytes(media.png_bomb(30_000))
    with pytest.raises(ViewTooLarge, match="more than 80000000 pixels"):
        jobs.image_ocr(str(path), None, ["eng"])
    with pytest.raises(ViewTooLarge):
        jobs.image_ocr(str(path), [0, 0, 100, 100], ["eng"])


def test_language_names_are_pack_names_never_paths_or_options() -> None:
    assert tesseract.parse_languages("eng+chi_sim") == ("eng", "chi_sim")
    for bad in ("", "eng+", "../eng", "-l", "eng chi"):
        with pytest.raises(ValueError, match="joined by"):
            tesseract.parse_languages(bad)


_word = st.text(st.characters(categories=["L", "N", "P"]), min_size=1, max_size=8)


@given(st.lists(st.lists(st.tuples(_word, st.integers(0, 100)), min_size=1, max_size=5), max_size=6))
def test_tsv_rows_parse_back_into_their_lines_and_words(lines: list[list[tuple[str, int]]]) -> None:
    rows = ["level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"]
    rows.append("1\t1\t0\t0\t0\t0\t0\t0\t640\t480\t-1\t")
    for number, words in enumerate(lines, start=1):
        rows.append(f"4\t1\t1\t1\t{number}\t0\t0\t{number * 20}\t600\t18\t-1\t")
        for index, (text, confidence) in enumerate(words, start=1):
            rows.append(
                f"5\t1\t1\t1\t{number}\t{index}\t{index * 50}\t{number * 20}\t40\t18\t{confidence}\t{text}"
            )
    parsed = tesseract.parse_tsv("\n".join(rows) + "\n")
    assert [[(word.text, round(word.confidence * 100)) for word in line.words] for line in parsed] == [
        [(text.strip(), confidence) for text, confidence in words if text.strip()] for words in lines
    ]


def test_words_of_scripts_without_spaces_are_joined_without_them() -> None:
    assert join_words(["能", "给", "text", "文本"]) == "能给 text 文本"
    assert join_words(["a", "b"]) == "a b"
