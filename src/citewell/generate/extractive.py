"""The extractive generator: answers with evidence sentences verbatim, each citing itself.

The answer is made of the sentences that best answer the question, copied exactly, so each
answer sentence cites exactly its own range and citation precision is a matter of choosing well.

Where the trained reader read the evidence (``Evidence.reading``, ``citewell.rerank``), it
decides which parts of the question are answered (when it found none, the engine declined before
asking), and each answered part gets its answer, in the question's order: the lexical choice
below for that part, the reader's likeliest or both, as the reader's card chooses for the
language, and the reader's likeliest where the lexical choice would decline: a part the reader
answered is never declined here (``choose_read``, ``model.SentenceChoice``). A part it found
unanswered is said to be so after the others' answers (``cite.writer.part_refusal``), as an
answer to the other parts alone reads as if it were the whole answer.
Otherwise (the word-overlap fallback) that lexical choice answers the whole question.

The lexical choice: a sentence's score is a weighted sum of the signals in ``Features`` (weights
in ``Weights``, tuned on the development data: docs/benchmarks.md, "Extractive answers").

The best sentence comes first; others follow (up to ``Weights.max_sentences``, and never an
exact copy of a sentence already chosen, nor a source past the agent's ``max_sources``) only when
they hold question words the best one lacks. Headings are never chosen: they name a topic and
answer nothing. The generator declines when even the best sentence holds too little of the
question (less still when it lacks the kind of answer asked for), or when another sentence,
saying something else, scores nearly as well: a guess between them would cite the wrong one
about as often as the right one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import anyio.to_thread

from citewell.cite.evidence import build_evidence, is_heading
from citewell.cite.writer import part_refusal
from citewell.config import IngestSettings
from citewell.documents import RequestSearchResult, given_documents
from citewell.events import CitedSentence, Declined, Draft, Remark
from citewell.generate.answer_types import carries, expected_type
from citewell.generate.lists import LEAD_IN_ENDINGS, list_items
from citewell.generate.overlap import QuestionTerms, sentence_overlaps
from citewell.generate.tables import tables
from citewell.ingest.tables import row_headers
from citewell.language import detect_language, is_cjk
from citewell.model import Agent, Conflict, Evidence, PartReading, Source, WordAnswer

__all__ = ["ExtractiveGenerator", "Features", "Weights", "sentence_features"]


@dataclass(frozen=True, slots=True)
class Features:
    """What is known about one evidence sentence as an answer to the question."""

    overlap: float
    """Weighted share of the question's terms the sentence holds, in [0, 1]."""
    context: float
    """How much that share grows with the neighbouring sentences of its passage added: a
    sentence often names its subject only as "it" or "he"."""
    answer_type: float
    """+1 if it holds the kind of answer asked for (a date for "when"), -1 if not, 0 if the
    question asks for no particular kind."""
    retrieval: float
    """Fused retrieval score of its passage, in [0, 1]."""
    rank: float
    """Rank of its passage among the evidence, 0 (first) to 1 (last)."""
    matched: frozenset[str]
    """The question terms it holds."""
    heading: bool = False
    """Whether it is a heading of its passage or the title of its source: it names a topic and
    answers nothing, so it is never chosen."""


@dataclass(frozen=True, slots=True)
class Weights:
    """How the signals combine, and when to add a sentence or decline."""

    overlap: float = 1.0
    context: float = 0.2
    answer_type: float = 0.15
    retrieval: float = 0.2
    rank: float = 0.05
    decline_below: float = 0.2
    """Decline when the best sentence holds less than this share of the question's weight."""
    decline_untyped: float = 0.3
    """Decline, too, when the best sentence lacks the kind of answer asked for (no date for
    "when") and holds less than this share."""
    decline_margin: float = 0.06
    """Decline, too, when the runner-up (another sentence) scores within this of the best: the
    question's words are spread over sentences that say different things, and a lexical choice
    between them is a guess."""
    extra_gain: float = 0.5
    """Add a sentence only if this share of its question terms is missing from the answer."""
    max_sentences: int = 1
    max_rows: int = 8
    """The most rows of one table an answer says (``ExtractiveGenerator._table_answer``)."""
    second_hop: float = 1.01
    """Where a reader read the evidence: a sentence of another passage that it finds at least
    this likely to answer the same part follows the best one (the reader's probabilities are
    calibrated: 0.5 is where "answers" becomes the likelier reading)."""

    def score(self, f: Features) -> float:
        return (
            self.overlap * f.overlap
            + self.context * f.context
            + self.answer_type * f.answer_type
            + self.retrieval * f.retrieval
            - self.rank * f.rank
        )


def sentence_features(evidence: Evidence) -> list[Features]:
    """The ``Features`` of every evidence sentence, in evidence order."""
    overlaps = sentence_overlaps(QuestionTerms.of(evidence.question), evidence)
    kind = expected_type(evidence.question)
    last = max(1, len(evidence.passages) - 1)
    features = []
    for sentence, overlap in zip(evidence.sentences, overlaps, strict=True):
        typed = 0.0
        if kind is not None:
            typed = 1.0 if carries(sentence.text, kind, evidence.question) else -1.0
        features.append(
            Features(
                overlap=overlap.share,
                context=overlap.context_gain,
                answer_type=typed,
                retrieval=evidence.passages[sentence.passage_index].scores.fused,
                rank=sentence.passage_index / last,
                matched=overlap.matched,
                heading=is_heading(evidence, sentence),
            )
        )
    return features


class ExtractiveGenerator:
    """Selects evidence sentences; deterministic, and a few milliseconds for 50 sentences."""

    name = "extractive"
    judges_answerability = False  # it copies sentences: which ones answer is the reader's call

    def __init__(self, weights: Weights | None = None) -> None:
        self.weights = weights or Weights()

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        # In a worker thread: scoring every sentence of a large request document takes seconds,
        # which the event loop (and every other request) must not wait for.
        for draft in await anyio.to_thread.run_sync(lambda: self.drafts(evidence, agent=agent)):
            yield draft

    def drafts(self, evidence: Evidence, *, agent: Agent) -> list[Draft]:
        """What ``generate`` yields, computed at once (there is nothing to wait for)."""
        if evidence.reading:
            chosen = self.choose_read(evidence, max_sources=agent.max_sources)
        else:
            features = sentence_features(evidence)
            chosen = self.choose(evidence, features, max_sources=agent.max_sources)
        if not chosen:
            return [Declined()]
        chosen = list(dict.fromkeys(_current_copy(evidence, i) for i in chosen))
        conflicts = {
            part.conflict.preferred - 1: part.conflict
            for part in evidence.reading
            if part.answered and part.conflict is not None
        }
        drafts: list[Draft] = []
        previous = ""
        said: set[int] = set()

        def add(draft: Draft, text: str) -> None:
            nonlocal previous
            drafts.append(draft)
            previous = text

        for index in chosen:
            if index in said:
                continue
            conflict = conflicts.get(index)
            if conflict is not None:
                sides = (conflict.preferred - 1, conflict.other - 1)
                for side, remark in zip(sides, disagreement(evidence, conflict), strict=True):
                    add(Remark(_separator(previous, remark) + remark), remark)
                    text = _flowing(evidence.sentences[side].text)
                    spaced = " " + text if _spaced(remark) else text
                    add(CitedSentence(text=spaced, evidence=(side + 1,)), text)
                said.update(sides)
                continue
            text = _flowing(evidence.sentences[index].text)
            # The engine joins drafts as they come: separate sentences as the language does.
            add(
                CitedSentence(
                    text=_separator(previous, text) + text,
                    evidence=(evidence.sentences[index].number,),
                ),
                text,
            )
            said.add(index)
        for part in evidence.reading:  # an answer to the others is not the whole answer
            if not part.answered:
                refusal = part_refusal(part.text, evidence.language)
                add(Remark(_separator(previous, refusal) + refusal), refusal)
        return drafts

    def choose(
        self, evidence: Evidence, features: Sequence[Features], *, max_sources: int
    ) -> list[int]:
        """Indices of the sentences to answer with, in answer order; empty to decline."""
        return list(self._word_answer(evidence, features, max_sources).sentences)

    def _word_answer(
        self, evidence: Evidence, features: Sequence[Features], max_sources: int
    ) -> WordAnswer:
        """Word overlap's answer: a table's rows where they answer (``_table_answer``), else
        the best prose sentence and those that complete it, a list's lead-in followed by its
        items (``generate.lists``)."""
        score = [self.weights.score(f) for f in features]
        ranked = sorted(
            (i for i, f in enumerate(features) if not f.heading), key=lambda i: (-score[i], i)
        )
        rows = self._table_answer(evidence, features, score, ranked) if ranked else None
        if rows is not None:
            chosen, listed = rows, len(rows) > 1
        else:
            prose = self._prose_answer(evidence, features, score, ranked, max_sources)
            chosen = self._with_items(evidence, prose)
            listed = len(chosen) > len(prose)
        typed = not chosen or features[chosen[0]].answer_type >= 0
        return WordAnswer(tuple(chosen), typed=typed, listed=listed)

    def _with_items(self, evidence: Evidence, chosen: Sequence[int]) -> list[int]:
        """``chosen`` with the items of each list's lead-in right after it."""
        said: list[int] = []
        for index in chosen:
            if index in said:
                continue
            said.append(index)
            items = list_items(evidence, index, self.weights.max_rows)
            said.extend(item for item in items if item not in said)
        return said

    def _prose_answer(
        self,
        evidence: Evidence,
        features: Sequence[Features],
        score: Sequence[float],
        ranked: Sequence[int],
        max_sources: int,
    ) -> list[int]:
        """The best sentence and those that complete it, or it and its neighbour where the two
        say one thing; empty to decline."""
        w = self.weights
        if not ranked or not self._answers(features[ranked[0]]):
            return []
        best = ranked[0]
        chosen, covered = [best], set(features[best].matched)
        texts = {_normalised(evidence.sentences[best].text)}
        sources = {_source_id(evidence, best)}
        for i in ranked[1:]:
            if len(chosen) >= w.max_sentences:
                break
            text, source = _normalised(evidence.sentences[i].text), _source_id(evidence, i)
            if text in texts or (source not in sources and len(sources) >= max_sources):
                continue  # a copy adds nothing; a new source past the limit may not be cited
            if not self._complements(features[i], covered):
                continue
            chosen.append(i)
            covered |= features[i].matched
            texts.add(text)
            sources.add(source)
        # A sentence saying something else that scores nearly as well as the best, left out of
        # the answer: choosing between them would be a guess. Unless it is the best one's
        # neighbour in its passage, and the only one so close: then the two say one thing
        # (a section's rule and its exception), and the answer is both, in document order.
        close = [
            i
            for i in ranked
            if _normalised(evidence.sentences[i].text) not in texts
            and score[best] - score[i] < w.decline_margin
        ]
        if close:
            neighbour = close[0]
            if len(close) > 1 or len(chosen) > 1 or not _adjacent(evidence, best, neighbour):
                return []
            return sorted([best, neighbour])
        # Supporting sentences after the best one, by passage rank, then in document order.
        first, rest = chosen[0], chosen[1:]
        return [first, *sorted(rest, key=lambda i: (evidence.sentences[i].passage_index, i))]

    def _table_answer(
        self,
        evidence: Evidence,
        features: Sequence[Features],
        score: Sequence[float],
        ranked: Sequence[int],
    ) -> list[int] | None:
        """Where the rows of a table answer, they do, in document order; None where the answer
        is not a table's (the choice goes on as for prose); empty to decline.

        The rows that answer are the best-scoring row and those of its table that score nearly
        as well: every row where the question names none of them ("When is the workshop
        open?"), the one it names otherwise ("... on Saturday?"). A table answers when its best
        row is the best sentence, or when the best sentence lacks the kind of answer asked for
        (no time for "when") and the question names a column of a table whose row holds one:
        the column's header says what its values are, where prose repeating the question's words
        says nothing of them. More than ``Weights.max_rows`` rows answering alike is a question
        that names too little of a long table: it is declined, not answered with all of it."""
        in_table = tables(evidence)
        best = ranked[0]
        if best in in_table:
            first = best
        elif features[best].answer_type < 0:
            typed_rows = (
                i
                for i in ranked
                if i in in_table
                and features[i].answer_type > 0
                and self._answers(features[i])
                and in_table[i].named_by(features[i].matched, _language(evidence, i))
            )
            first = next(typed_rows, -1)
            if first < 0:
                return None
        else:
            return None
        table = in_table[first]
        near = [i for i in table.rows if score[first] - score[i] < self.weights.decline_margin]
        if first == best and len(near) < 2:
            return None  # one row answers, as one sentence of prose would
        if not self._answers(features[first]) or len(near) > self.weights.max_rows:
            return []
        return near

    def choose_read(self, evidence: Evidence, *, max_sources: int) -> list[int]:
        """Indices of the sentences to answer with, where a reader read the evidence: for each
        part of the question it found answered, in the question's order, its answer — word
        overlap's pick, the reader's likeliest or both, as the reader's card chooses for the
        language (``Evidence.choice``) — then at most one sentence of another passage the
        reader finds likely too (``Weights.second_hop``: an answer spanning two documents). One
        sentence answering two parts is said once. Empty (to decline) when no part is answered."""
        chosen: list[int] = []
        texts: set[str] = set()
        sources: set[str] = set()

        def admitted(index: int) -> bool:
            text, source = _normalised(evidence.sentences[index].text), _source_id(evidence, index)
            if text in texts or (source not in sources and len(sources) >= max_sources):
                return False  # a copy adds nothing; a new source past the limit may not be cited
            chosen.append(index)
            texts.add(text)
            sources.add(source)
            return True

        for part in evidence.reading:
            if not part.answered:
                continue
            answer = [i for i in self._part_answer(evidence, part) if i not in chosen]
            if not answer or not admitted(answer[0]):
                continue
            best = answer[0]
            for also in answer[1:]:
                admitted(also)
            hop = next(
                (
                    number - 1
                    for number, score in part.answers
                    if score >= self.weights.second_hop
                    and _passage(evidence, number - 1) != _passage(evidence, best)
                    and number - 1 not in chosen
                ),
                None,
            )
            if hop is not None:
                admitted(hop)
        return chosen

    def _part_answer(self, evidence: Evidence, part: PartReading) -> list[int]:
        """The sentences that answer a part, best first: where sources disagree on it, the
        preferred side's (the answer then states both); else word overlap's pick, the reader's
        likeliest or both, by ``evidence.choice``; empty for none."""
        if part.conflict is not None:
            return [part.conflict.preferred - 1]
        read = (part.answers[0][0] - 1, part.answers[0][1]) if part.answers else None
        answer = evidence.choice.answer(self.word_choice(evidence, part.text), read)
        return self._with_items(evidence, answer)

    def word_choice(self, evidence: Evidence, question: str) -> WordAnswer:
        """What word overlap would answer ``question`` with, from this evidence."""
        asked = dataclasses.replace(evidence, question=question, reading=())
        return self._word_answer(asked, sentence_features(asked), len(asked.passages))

    def _answers(self, f: Features) -> bool:
        """Whether the best sentence answers well enough not to decline."""
        if f.answer_type < 0:
            return f.overlap >= max(self.weights.decline_below, self.weights.decline_untyped)
        return f.overlap >= self.weights.decline_below

    def _complements(self, f: Features, covered: set[str]) -> bool:
        """Whether a sentence is a confident answer holding question terms not yet covered."""
        if f.overlap < self.weights.decline_below or not f.matched:
            return False
        return len(f.matched - covered) / len(f.matched) >= self.weights.extra_gain


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()


def _current_copy(evidence: Evidence, index: int) -> int:
    """The sentence ``index`` as the source dated latest states it word for word: of two dated
    sources that agree (a new edition repeating the old one), the current one is cited."""
    said = _normalised(evidence.sentences[index].text)
    best, latest = index, _source(evidence, index).effective_date
    for other in range(len(evidence.sentences)):
        dated = _source(evidence, other).effective_date
        if latest is None or dated is None or dated <= latest:
            continue
        if _normalised(evidence.sentences[other].text) == said:
            best, latest = other, dated
    return best


def word_pick(question: str, sentences: Sequence[str], *, title: str | None) -> WordAnswer:
    """What word overlap would answer ``question`` with from ``sentences`` (one passage's, in
    order, under ``title``; ``WordAnswer.sentences`` index them): the extractive generator's own
    choice, for fitting a reader's decline rule and sentence choice beside it
    (``citewell.read.training``)."""
    result = RequestSearchResult(index=0, source="sentences", title=title, blocks=tuple(sentences))
    passages = given_documents([result], limits=IngestSettings()).given.passages
    language = detect_language(question) or passages[0].source.language
    return ExtractiveGenerator().word_choice(build_evidence(question, language, passages), question)


def _adjacent(evidence: Evidence, one: int, other: int) -> bool:
    """Whether two evidence sentences follow one another in one passage."""
    return abs(one - other) == 1 and _passage(evidence, one) == _passage(evidence, other)


def _language(evidence: Evidence, index: int) -> str | None:
    return evidence.passages[_passage(evidence, index)].chunk.language


def _passage(evidence: Evidence, index: int) -> int:
    return evidence.sentences[index].passage_index


def _source_id(evidence: Evidence, index: int) -> str:
    return _source(evidence, index).id


_CJK_CLOSERS = "。！？；：…」』）》”"


_BREAK = re.compile(r"\s*\n\s*")


def _flowing(text: str) -> str:
    """The sentence without the line breaks of its source (hard-wrapped text, PDF lines): a
    space where they stood, or nothing between Chinese characters. The citation still points at
    the source's exact range; only the answer's own text flows."""

    def joined(match: re.Match[str]) -> str:
        before, after = text[match.start() - 1 : match.start()], text[match.end() : match.end() + 1]
        return "" if before and after and is_cjk(before) and is_cjk(after) else " "

    return _BREAK.sub(joined, text.strip())


def _separator(previous: str, text: str) -> str:
    """What goes between two answer sentences: nothing before the first; a line break before a
    table's row, after a list's lead-in and after a sentence that ends with no closing
    punctuation (a row, a list item: run on, they would read as one); nothing else around
    Chinese (written without spaces); else one space."""
    before = previous.rstrip()
    if not before:
        return ""
    if before.endswith(LEAD_IN_ENDINGS) or before[-1].isalnum() or row_headers(text) is not None:
        return "\n"
    if before[-1] in _CJK_CLOSERS or (text and is_cjk(text[0])):
        return ""
    return " "


_DISAGREE = {
    "en": ("The sources disagree.", "The sources disagree, and neither is dated after the other."),
    "es": (
        "Las fuentes no coinciden.",
        "Las fuentes no coinciden, y ninguna tiene fecha posterior a la otra.",
    ),
    "zh": ("资料之间存在分歧。", "资料之间存在分歧，且没有哪一份的日期更晚。"),
}
_ACCORDING = {"en": "According to {name}:", "es": "Según {name}:", "zh": "据{name}："}


def disagreement(evidence: Evidence, conflict: Conflict) -> tuple[str, str]:
    """What introduces each side of a conflict, in the question's language: the first says the
    sources disagree (and, when neither is dated after the other, that it cannot tell which is
    current), then names its source; the second names its own."""
    language = evidence.language if evidence.language in _DISAGREE else "en"
    decided, undecided = _DISAGREE[language]
    first, second = (
        _ACCORDING[language].format(name=_named(_source(evidence, n - 1), language))
        for n in (conflict.preferred, conflict.other)
    )
    lead = decided if conflict.decided else undecided
    return f"{lead}{'' if language == 'zh' else ' '}{first}", second


def _named(source: Source, language: str) -> str:
    """A source as the answer names it: its title or file name, and its date where it has one."""
    name = source.title or source.filename
    if source.effective_date is None:
        return name
    date = source.effective_date.isoformat()
    return f"{name}（{date}）" if language == "zh" else f"{name} ({date})"


def _source(evidence: Evidence, index: int) -> Source:
    return evidence.passages[evidence.sentences[index].passage_index].source


def _spaced(remark: str) -> bool:
    """Whether the sentence after a remark is set off by a space (not after Chinese)."""
    return not is_cjk(remark[-1]) and remark[-1] not in _CJK_CLOSERS
