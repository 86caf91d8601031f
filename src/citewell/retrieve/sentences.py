"""Which sentences of a retrieved passage match the query best.

A sentence scores the share of the query's weighted terms it contains. Terms are weighted by how
rare they are among the candidate sentences, so a sentence holding the one distinctive word of
the query beats one holding only common ones. Query and sentences are analysed alike, with the
passage's language, so that stems meet.
"""

from __future__ import annotations

import math
from collections import Counter

from citewell.analysis import terms
from citewell.language import is_cjk
from citewell.model import Chunk, Span

__all__ = ["rank_sentences"]


def rank_sentences(query: str, chunk: Chunk) -> list[tuple[Span, float]]:
    """The chunk's sentences (source coordinates) with a score in [0, 1], best first.

    Among equal scores the longer sentence comes first: a heading that names the topic ties
    with the sentence that says something about it, and the sentence is the one worth showing.
    Equal lengths keep text order.
    """
    sentences = chunk.sentences
    query_terms = set(terms(query, chunk.language))
    if not query_terms or not sentences:
        return [(span, 0.0) for span in sentences]
    offset = chunk.span.start
    bags = [
        _matched(query_terms, chunk.text[s.start - offset : s.end - offset], chunk.language)
        for s in sentences
    ]
    document_frequency = Counter(t for bag in bags for t in bag)
    weights = {
        t: math.log(1 + (1 + len(sentences)) / (1 + document_frequency[t])) for t in query_terms
    }
    total = sum(weights.values())
    scored = [
        (span, sum(weights[t] for t in bag) / total)
        for span, bag in zip(sentences, bags, strict=True)
    ]
    return sorted(scored, key=lambda pair: (-pair[1], -len(pair[0])))


def _matched(query_terms: set[str], sentence: str, language: str | None) -> set[str]:
    """The query terms the sentence holds.

    Chinese words are found by substring, which spares segmenting every sentence with jieba
    (the dominant cost of a search otherwise); other terms by analysing the sentence.
    """
    han = {t for t in query_terms if is_cjk(t[0]) and t in sentence}
    return han | (query_terms & set(terms(sentence, language, segment_han=False)))
