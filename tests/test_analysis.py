"""The terms lexical search indexes, per language."""

from __future__ import annotations

from citewell.analysis import only_function_words, prepare, terms


def test_spanish_is_folded_stemmed_and_rid_of_stopwords() -> None:
    assert terms("Los reembolsos están permitidos", "es") == ["reembols", "permit"]


def test_english_is_lowercased_and_stemmed() -> None:
    assert terms("The refunds are REFUNDED", "en") == ["refund", "refund"]


def test_chinese_is_segmented_into_words_without_function_words() -> None:
    assert terms("退款期限是多少", "zh") == ["退款", "期限", "多少"]


def test_other_languages_are_only_folded() -> None:
    assert terms("Straße und Café", None) == ["strasse", "und", "cafe"]


def test_a_query_of_stopwords_is_recognised_in_every_tuned_language() -> None:
    assert only_function_words(prepare("the of and"))
    assert only_function_words(prepare("de la los"))
    assert only_function_words(prepare("的 了"))
    assert not only_function_words(prepare("the refund"))
