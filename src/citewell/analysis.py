"""Text analysis for lexical matching: the terms BM25 indexes and sentence ranking compares.

One analyzer per language: English and Spanish fold accents, drop stopwords and stem; Chinese
drops function words; any other language is only folded. Chinese has no spaces: before any
analyzer sees text, runs of Han characters are segmented by jieba and the words joined with
spaces, so the tokenizer splits them.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

import jieba
import tantivy

__all__ = [
    "analyzers",
    "field_name",
    "only_function_words",
    "prepare",
    "query_terms",
    "terms",
]

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_MAX_TOKEN_CHARS = 64
_MAX_QUERY_TERMS = 256
"""Distinct terms taken from a query per field: a pasted page stays a bounded query."""
"""Longer "words" (base64, hashes, URLs run together) are dropped; they never match a query."""

_ZH_STOPWORDS = (
    "的 了 是 在 和 与 及 或 也 都 就 而 之 其 把 被 让 给 对 从 向 这 那 个 些 吗 呢 吧 啊 着 过"
).split()
"""Chinese function words (jieba splits them off as single characters); tantivy has no list."""


@dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    filters: Callable[[], list[tantivy.Filter]]
    """The filters after the simple tokenizer, remove_long and lowercase."""


def _folded_without_stopwords(language: str) -> list[tantivy.Filter]:
    """Accents folded away, and the language's stopwords removed in both spellings.

    tantivy's lists spell words with their accents ("más", "está"): removing them before folding
    catches those, removing again after folding catches the unaccented forms people type.
    """
    return [
        tantivy.Filter.stopword(language),
        tantivy.Filter.ascii_fold(),
        tantivy.Filter.stopword(language),
    ]


_FIELDS: dict[str | None, _FieldSpec] = {
    "en": _FieldSpec(
        "text_en",
        lambda: [*_folded_without_stopwords("english"), tantivy.Filter.stemmer("english")],
    ),
    # Snowball stems folded Spanish the same as accented Spanish ("devolución", "devolucion"
    # and "devoluciones" all become "devolu"), so folding before stemming loses nothing.
    "es": _FieldSpec(
        "text_es",
        lambda: [*_folded_without_stopwords("spanish"), tantivy.Filter.stemmer("spanish")],
    ),
    "zh": _FieldSpec(
        "text_zh",
        lambda: [tantivy.Filter.ascii_fold(), tantivy.Filter.custom_stopword(_ZH_STOPWORDS)],
    ),
    None: _FieldSpec("text_other", lambda: [tantivy.Filter.ascii_fold()]),
}


def _field_spec(language: str | None) -> _FieldSpec:
    return _FIELDS.get(language, _FIELDS[None])


def _analyzer(filters: list[tantivy.Filter]) -> tantivy.TextAnalyzer:
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    for step in [
        tantivy.Filter.remove_long(_MAX_TOKEN_CHARS),
        tantivy.Filter.lowercase(),
        *filters,
    ]:
        builder = builder.filter(step)
    return builder.build()


_jieba_lock = threading.Lock()
_jieba_ready = False


def _segment_han(text: str) -> str:
    """The text with each run of Han characters split into words by jieba, space-separated.

    Search mode also emits the shorter words inside long ones (中华人民共和国 → 中华, 人民, ...),
    so a query for a part finds the whole.
    """
    if not _HAN_RUN.search(text):
        return text
    _ensure_jieba()
    return _HAN_RUN.sub(lambda run: f" {' '.join(jieba.cut_for_search(run.group()))} ", text)


def _ensure_jieba() -> None:
    # Loading the dictionary takes about a second and logs; do it once, quietly, first caller only.
    global _jieba_ready
    with _jieba_lock:
        if not _jieba_ready:
            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba_ready = True


class _Analysis:
    """Every field's analyzer, plus the stopword lists used to spot a query of function words."""

    def __init__(self) -> None:
        self.fields = {spec.name: _analyzer(spec.filters()) for spec in _FIELDS.values()}
        self._function_words = [
            _analyzer(_folded_without_stopwords(language)) for language in ("english", "spanish")
        ] + [_analyzer([tantivy.Filter.custom_stopword(_ZH_STOPWORDS)])]
        self._words = _analyzer([tantivy.Filter.ascii_fold()])

    def register(self, index: tantivy.Index) -> None:
        for name, analyzer in self.fields.items():
            index.register_tokenizer(name, analyzer)

    def terms(self, prepared: str, field: str) -> list[str]:
        return self.fields[field].analyze(prepared)

    def only_function_words(self, prepared: str) -> bool:
        """Whether every word is a stopword of one of the tuned languages (or there is none)."""
        return all(
            any(not checker.analyze(word) for checker in self._function_words)
            for word in self._words.analyze(prepared)
        )


_ANALYSIS = _Analysis()


def field_name(language: str | None) -> str:
    """The name of the analyzer (and index field) for text in ``language``."""
    return _field_spec(language).name


def analyzers() -> dict[str, tantivy.TextAnalyzer]:
    """Every analyzer by name, to register on an index."""
    return dict(_ANALYSIS.fields)


def prepare(text: str) -> str:
    """The text as analyzers expect it: Han runs split into space-separated words."""
    return _segment_han(text)


def terms(text: str, language: str | None, *, segment_han: bool = True) -> list[str]:
    """The terms of ``text`` exactly as a document in ``language`` is indexed, in order.

    With ``segment_han=False`` each run of Han characters stays one term, unsegmented.
    """
    prepared = _segment_han(text) if segment_han else text
    return _ANALYSIS.terms(prepared, field_name(language))


def only_function_words(prepared: str) -> bool:
    """Whether every word of a prepared text is a stopword of a tuned language (or none is)."""
    return _ANALYSIS.only_function_words(prepared)


def query_terms(query: str) -> dict[str, list[str]]:
    """What a lexical search looks for: per analyzer (field), the query's distinct terms in
    order of first appearance, at most ``_MAX_QUERY_TERMS``; fields with none are left out.

    The query's language is not trusted: it is analysed for every field. A query of only
    function words (or of no words) looks for nothing.
    """
    prepared = prepare(query)
    if only_function_words(prepared):
        return {}
    found = {
        field: list(dict.fromkeys(analyzer.analyze(prepared)))[:_MAX_QUERY_TERMS]
        for field, analyzer in _ANALYSIS.fields.items()
    }
    return {field: terms for field, terms in found.items() if terms}
