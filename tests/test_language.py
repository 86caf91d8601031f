"""Language guesses and word counts across scripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from citewell.language import count_words, detect_language, is_cjk


@pytest.mark.parametrize("language", ["en", "es", "zh"])
def test_every_xquad_paragraph_is_recognised(evaldata: Path, language: str) -> None:
    data = json.loads((evaldata / "xquad_r" / f"{language}.json").read_text(encoding="utf-8"))
    contexts = [p["context"] for article in data["data"] for p in article["paragraphs"]]
    assert [detect_language(c) for c in contexts] == [language] * len(contexts)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("The refund is paid within thirty days of the request.", "en"),
        ("El reembolso se paga en los treinta días siguientes a la solicitud.", "es"),
        ("退款在申请后三十天内支付。", "zh"),
        ("Internet2 宣布与 Level 3 Communications 合作推出全新的全国网络。", "zh"),
        ("", None),
        ("12345 67.89", None),
        ("Zxcv qwerty asdf.", None),
    ],
)
def test_detect_language(text: str, language: str | None) -> None:
    assert detect_language(text) == language


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Hello, world!", 2),
        ("It cost $3.50, e.g. at 9 a.m.", 7),  # tokens between spaces, not pieces of them
        ("  — · …  ", 0),  # punctuation alone is no word
        ("北京是首都。", 2.5),  # five Han characters count as half a word each
        ("从 1870 年到 1939 年", 4),  # two numbers and four characters
        ("𠀀𠀁", 1),  # Han characters beyond the BMP count too
    ],
)
def test_count_words(text: str, words: float) -> None:
    assert count_words(text) == words


def test_is_cjk_knows_han_characters_in_and_beyond_the_bmp() -> None:
    assert is_cjk("中") and is_cjk("𠀀") and is_cjk("\u3400")
    assert not is_cjk("a") and not is_cjk("。") and not is_cjk("あ")
