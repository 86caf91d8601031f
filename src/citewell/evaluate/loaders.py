"""Evaluation data sets as one vocabulary: ``Case`` (a question with its gold answers and gold
evidence) and ``Document`` (a text to ingest), read from each data set's own files.

Every gold evidence range indexes the canonical text of a document as citewell stores it: the
loaders strip each text the way the text parser does, so an ``Evidence`` range names the same
characters in the document and in the ingested source (code points, ``end`` exclusive). Where
the parser changes more (line ends, a byte-order mark, NUL characters), ``restated`` moves every
range through the same change once the server has said what it stored.

A loader takes the data set's folder (the files keep their source format, so the same loader reads
other splits of the same data set) and a split name, which picks the files of that folder.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from citewell.evaluate.holdout import article_key, english_titles, held_out

__all__ = [
    "LOADERS",
    "Case",
    "load_conflicts",
    "DataSet",
    "Document",
    "Evidence",
    "load",
    "restated",
    "squad_format",
    "uploadable",
]

Articles = Literal["all", "held-out", "tune"]
"""Which of a set's articles to ask about: all, the held-out half, or the other half."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """A gold range of one document: what a citation should point at."""

    filename: str
    start: int
    """Code points into the document's text."""
    end: int
    """Exclusive."""
    text: str
    """``document.text[start:end]``."""


@dataclass(frozen=True, slots=True)
class Case:
    """One question of a data set, with what a right answer says and cites."""

    id: str
    language: str
    """``en``, ``es`` or ``zh``."""
    question: str
    answers: tuple[str, ...]
    """Gold answers (any one is right); empty where the set has none (SciFact claims, and the
    unanswerable questions)."""
    evidence: tuple[Evidence, ...]
    """Gold evidence ranges; empty for an unanswerable question."""
    answerable: bool
    bucket: str
    """Slug of the bucket the question is asked against."""
    documents: tuple[str, ...]
    """File names (in ``bucket``) the case comes with: what a limited run ingests."""
    article: str = ""
    """The title of the article the question was written on (SQuAD-format sets; "" in the
    others), a translation's its English original's: what a split by article keys on."""
    parts: tuple[tuple[Evidence, ...], ...] = ()
    """For a question asked in several parts, each part's gold evidence: a complete answer cites
    some of each. Empty for a question of one part."""
    conflict: tuple[str, str] | None = None
    """(current, older) file names of two documents that answer it differently, the current
    dated later; None where its sources agree (a disagreement claimed there is a false one)."""

    @property
    def held_out(self) -> bool:
        """Whether the case is on the held-out half (``evaluate.holdout``): by its article, or
        in a set of records (ClapNQ), by its own id."""
        return held_out(self.article or f"id:{self.id}")


_DROPPED = frozenset("\x00\ufeff")
"""Characters the text parser drops or refuses (NUL: the file would look binary)."""


def uploadable(text: str) -> str:
    """A document's text as the runner sends it: without what the text parser refuses."""
    return text.replace("\x00", "")


def restated(data: DataSet, stored: dict[tuple[str, str], str]) -> DataSet:
    """``data`` over its documents' texts as the server stored them ((bucket, filename) → text),
    each gold range moved to the same characters. Raises ``ValueError`` naming a document whose
    stored text is not its own normalised (line ends, a byte-order mark, NUL characters,
    whitespace at either end)."""
    offsets: dict[tuple[str, str], list[int]] = {}
    documents: dict[tuple[str, str], Document] = {}
    for key, document in data.documents.items():
        mapping = _offsets(document.text, stored[key])
        if mapping is None:
            raise ValueError(f"the server's text of {key[0]}/{key[1]} differs from the file")
        offsets[key] = mapping
        documents[key] = replace(document, text=stored[key])

    def moved(case: Case, evidence: Evidence) -> Evidence:
        key = (case.bucket, evidence.filename)
        if key not in offsets:
            return evidence
        start, end = offsets[key][evidence.start], offsets[key][evidence.end]
        return replace(evidence, start=start, end=end, text=stored[key][start:end])

    cases = [replace(c, evidence=tuple(moved(c, e) for e in c.evidence)) for c in data.cases]
    return DataSet(data.name, cases, documents)


def _offsets(original: str, stored: str) -> list[int] | None:
    """For each offset of ``original`` (its length included), the same place in ``stored``, when
    ``stored`` is ``original`` with line ends turned into ``\\n`` and characters dropped (NUL, a
    byte-order mark, whitespace at either end); else None. One pass, no search."""
    mapping = [0] * (len(original) + 1)
    i = j = 0
    while i < len(original):
        mapping[i] = j
        char = original[i]
        if j < len(stored) and char == stored[j]:
            i, j = i + 1, j + 1
        elif char == "\r" and j < len(stored) and stored[j] == "\n":
            if original.startswith("\n", i + 1):  # CRLF: both become the one \n
                mapping[i + 1] = j
                i += 1
            i, j = i + 1, j + 1
        elif char in _DROPPED or char.isspace():
            i += 1
        else:
            return None
    mapping[len(original)] = j
    return mapping if j == len(stored) else None


@dataclass(frozen=True, slots=True)
class Document:
    filename: str
    text: str
    bucket: str
    effective_date: str | None = None
    """``YYYY-MM-DD``, sent with the upload: from when the document applies."""


@dataclass
class DataSet:
    name: str
    cases: list[Case] = field(default_factory=list)
    documents: dict[tuple[str, str], Document] = field(default_factory=dict)
    """(bucket, filename) → document."""

    def add(self, document: Document) -> None:
        self.documents.setdefault((document.bucket, document.filename), document)

    def text(self, bucket: str, filename: str) -> str:
        return self.documents[(bucket, filename)].text

    def select(
        self, *, limit: int = 0, language: str | None = None, articles: Articles = "all"
    ) -> DataSet:
        """The first ``limit`` cases of each language (all if 0), only ``language``'s if given,
        only those of the held-out half's articles (``evaluate.holdout``) or of the other half
        (``"tune"``) if asked, with only the documents those cases come with when limited."""
        cases = [
            c
            for c in self.cases
            if (language is None or c.language == language)
            and (articles == "all" or c.held_out == (articles == "held-out"))
        ]
        if limit:
            counts: dict[str, int] = {}
            kept = []
            for case in cases:
                counts[case.language] = counts.get(case.language, 0) + 1
                if counts[case.language] <= limit:
                    kept.append(case)
            cases = kept
        if not limit and language is None and articles == "all":
            return self
        wanted = {(c.bucket, f) for c in cases for f in c.documents}
        if not limit:
            wanted = {k for k in self.documents if k[0] in {c.bucket for c in cases}}
        documents = {k: d for k, d in self.documents.items() if k in wanted}
        return replace(self, cases=cases, documents=documents)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _hashed(prefix: str, text: str) -> str:
    """A file name for a snippet: the same text always gets the same name, once per bucket."""
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.txt"


def _slug(title: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-")


def _evidence(filename: str, text: str, snippet: str) -> Evidence | None:
    """The first occurrence of ``snippet`` in ``text``, as evidence; None if absent."""
    snippet = snippet.strip()
    start = text.find(snippet) if snippet else -1
    if start < 0:
        return None
    return Evidence(filename, start, start + len(snippet), snippet)


# SQuAD format: XQuAD, SQuAD 2.0 (en, es), CMRC 2018, DRCD ---------------------------------------
def squad_format(
    path: Path,
    language: str,
    *,
    bucket: str,
    prefix: str = "",
    data: DataSet | None = None,
    originals: dict[str, str] | None = None,
) -> DataSet:
    """One document per article, its paragraphs joined by blank lines; each gold answer becomes
    an exact range of the article's text. Answers whose ``answer_start`` does not point at their
    text (CMRC 2018 has a few, and ``-1``) are kept as answers but not as evidence. For a
    translation, ``originals`` maps a question id to its original article's title, which the
    case's article is then (``holdout.english_titles``)."""
    data = data if data is not None else DataSet(path.stem)
    for number, article in enumerate(_read_json(path)["data"]):
        title = article.get("title") or article["paragraphs"][0].get("id", str(number))
        key = article_key(article, originals or {}, title)
        filename = f"{prefix}{number:02d}-{_slug(title) or 'article'}.txt"
        contexts = [p["context"] for p in article["paragraphs"]]
        joined = "\n\n".join(contexts)
        # What the text parser keeps: the file without its byte-order mark, stripped.
        unmarked = joined.removeprefix("\ufeff")
        text = unmarked.strip()
        offset = -(len(joined) - len(unmarked.lstrip()))
        data.add(Document(filename, text, bucket))
        for paragraph, context in zip(article["paragraphs"], contexts, strict=True):
            for qa in paragraph["qas"]:
                answerable = not qa.get("is_impossible", False)
                answers = [a for a in qa["answers"] if a["text"]] if answerable else []
                evidence = _squad_evidence(filename, text, offset, answers)
                data.cases.append(
                    Case(
                        id=str(qa["id"]),
                        language=language,
                        question=qa["question"],
                        answers=tuple(dict.fromkeys(a["text"] for a in answers)),
                        evidence=tuple(evidence),
                        answerable=answerable,
                        bucket=bucket,
                        documents=(filename,),
                        article=key,
                    )
                )
            offset += len(context) + 2
    return data


def _squad_evidence(
    filename: str, text: str, offset: int, answers: Iterable[dict[str, Any]]
) -> Iterator[Evidence]:
    seen = set()
    for answer in answers:
        start = offset + answer["answer_start"]
        end = start + len(answer["text"])
        if answer["answer_start"] < 0 or (start, end) in seen or text[start:end] != answer["text"]:
            continue
        seen.add((start, end))
        yield Evidence(filename, start, end, answer["text"])


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    if not found:
        raise FileNotFoundError(f"no file matching {pattern} in {folder}")
    return found[0]


def load_xquad(folder: Path, split: str) -> DataSet:
    """XQuAD: ``xquad.<language>.json``, each language in a bucket of its own (the articles are
    parallel: a question must not be answered from its translation)."""
    data = DataSet("xquad")
    for language in ("en", "es", "zh"):
        path = folder / f"xquad.{language}.json"
        if path.exists():
            squad_format(path, language, bucket=f"xquad-{language}", data=data)
    return data


def load_multipart(folder: Path, split: str) -> DataSet:
    """XQuAD's questions two at a time, asked as one ("When was it built? And who paid for
    it?"), in English, Spanish and Chinese: in each article, its i-th question joined with the
    one half the article's questions after it (so, most often, about another paragraph), where
    both have gold evidence in different places."""
    single = load_xquad(folder, split)
    data = DataSet("multipart", documents=single.documents)
    by_article: dict[tuple[str, str], list[Case]] = {}
    for case in single.cases:
        if case.evidence:
            by_article.setdefault((case.bucket, case.article), []).append(case)
    for cases in by_article.values():
        half = len(cases) // 2
        for first, second in zip(cases[:half], cases[half : 2 * half], strict=True):
            if _same_place(first, second):
                continue
            data.cases.append(
                replace(
                    first,
                    id=f"{first.id}+{second.id}",
                    question=_asked_together(first.question, second.question, first.language),
                    answers=(),
                    evidence=first.evidence + second.evidence,
                    parts=(first.evidence, second.evidence),
                )
            )
    return data


def _same_place(first: Case, second: Case) -> bool:
    return any(
        a.filename == b.filename and a.start < b.end and b.start < a.end
        for a in first.evidence
        for b in second.evidence
    )


def _asked_together(first: str, second: str, language: str) -> str:
    """Two questions as one message, joined as a person would write them."""
    second = second.strip()
    if language == "zh":
        return f"{first.strip()}另外，{second}"
    if language == "es":
        rest = second.removeprefix("¿")
        return f"{first.strip()} ¿Y {rest[:1].lower()}{rest[1:]}"
    return f"{first.strip()} And {second[:1].lower()}{second[1:]}"


def load_squad2(folder: Path, split: str) -> DataSet:
    """SQuAD 2.0 (English): ``dev-v2.0*.json`` for ``dev``, else ``<split>-v2.0*.json``."""
    path = _one(folder, f"{split}-v2.0*.json")
    return squad_format(path, "en", bucket="squad2", data=DataSet("squad2"))


def load_squad2_es(folder: Path, split: str) -> DataSet:
    """SQuAD-es 2.0 (Spanish, machine-translated): ``<split>-v2.0-es*.json``; each article split
    by its English original's title (its questions keep SQuAD's ids)."""
    path = _one(folder, f"{split}-v2.0-es*.json")
    originals = english_titles(folder.parent)
    return squad_format(
        path, "es", bucket="squad2-es", data=DataSet("squad2-es"), originals=originals
    )


def load_cmrc2018(folder: Path, split: str) -> DataSet:
    """CMRC 2018: ``cmrc2018_<split>.json``; the development split is the official trial set."""
    path = _one(folder, f"cmrc2018_{'trial' if split == 'dev' else split}.json")
    return squad_format(path, "zh", bucket="cmrc2018", data=DataSet("cmrc2018"))


def load_drcd(folder: Path, split: str) -> DataSet:
    """DRCD (Traditional Chinese): ``DRCD_<split>.json``."""
    path = _one(folder, f"DRCD_{split}.json")
    return squad_format(path, "zh", bucket="drcd", data=DataSet("drcd"))


# ClapNQ --------------------------------------------------------------------------------------
def load_clapnq(folder: Path, split: str) -> DataSet:
    """ClapNQ: one document per passage; gold evidence is each annotator's selected sentences,
    gold answers the written answers; the unanswerable file's passages are on topic but do not
    answer."""
    data = DataSet("clapnq")
    for kind in ("answerable", "unanswerable"):
        for record in _read_jsonl(_one(folder, f"clapnq_{split}_{kind}.jsonl")):
            passage = record["passages"][0]
            text = passage["text"].strip()
            filename = _hashed(_slug(passage["title"])[:40] or "passage", text)
            data.add(Document(filename, text, "clapnq"))
            answers = tuple(dict.fromkeys(o["answer"] for o in record["output"] if o["answer"]))
            found = (
                _evidence(filename, text, s)
                for o in record["output"]
                for s in o.get("selected_sentences") or []
            )
            evidence = tuple(dict.fromkeys(e for e in found if e is not None))
            data.cases.append(
                Case(
                    id=str(record["id"]),
                    language="en",
                    question=record["input"],
                    answers=answers,
                    evidence=evidence,
                    answerable=bool(answers),
                    bucket="clapnq",
                    documents=(filename,),
                )
            )
    return data


# HotpotQA ------------------------------------------------------------------------------------
def load_hotpotqa(folder: Path, split: str) -> DataSet:
    """HotpotQA (distractor setting): one document per paragraph. Gold evidence is the two
    supporting paragraphs, narrowed to the supporting sentences for the questions the
    distractor-format file labels (``hotpot_<split>_distractor*.json``)."""
    data = DataSet("hotpotqa")
    sentences: dict[str, dict[str, list[str]]] = {}
    for path in sorted(folder.glob(f"hotpot_{split}_distractor*.json")):
        for record in _read_json(path):
            paragraphs = dict((t, s) for t, s in record["context"])
            chosen: dict[str, list[str]] = {}
            for title, index in record["supporting_facts"]:
                if title in paragraphs and index < len(paragraphs[title]):
                    chosen.setdefault(title, []).append(paragraphs[title][index])
            sentences[record["_id"]] = chosen
    for record in _read_jsonl(_one(folder, f"hotpotqa_{split}_*.jsonl")):
        names: list[str] = []
        evidence: list[Evidence] = []
        labelled = sentences.get(record["question_id"], {})
        for context in record["contexts"]:
            text = context["paragraph_text"].strip()
            filename = _hashed(_slug(context["title"])[:40] or "paragraph", text)
            data.add(Document(filename, text, "hotpotqa"))
            names.append(filename)
            if not context["is_supporting"]:
                continue
            narrowed = [_evidence(filename, text, s) for s in labelled.get(context["title"], [])]
            if narrowed and all(narrowed):
                evidence.extend(e for e in narrowed if e is not None)
            else:
                evidence.append(Evidence(filename, 0, len(text), text))
        answers = tuple(s for o in record["answers_objects"] for s in o["spans"] if s)
        data.cases.append(
            Case(
                id=record["question_id"],
                language="en",
                question=record["question_text"],
                answers=answers,
                evidence=tuple(evidence),
                answerable=True,
                bucket="hotpotqa",
                documents=tuple(names),
            )
        )
    return data


# SciFact -------------------------------------------------------------------------------------
def load_scifact(folder: Path, split: str) -> DataSet:
    """SciFact: the corpus (one document per abstract: its title, a blank line, its sentences
    joined by spaces) and the claims as questions. Gold evidence is the rationale sentences;
    a claim without any (NOT ENOUGH INFO) counts as unanswerable. Claims have no gold answer
    text. The development split's claims are ``claims_train.jsonl``."""
    data = DataSet("scifact")
    ranges: dict[str, list[tuple[int, int]]] = {}
    for record in _read_jsonl(folder / "corpus.jsonl"):
        filename = f"{record['doc_id']}.txt"
        text, spans = record["title"].strip(), []
        for number, sentence in enumerate(s.strip() for s in record["sentences"]):
            text += ("\n\n" if number == 0 else " ") + sentence
            spans.append((len(text) - len(sentence), len(text)))
        data.add(Document(filename, text, "scifact"))
        ranges[filename] = spans
    claims = _one(folder, f"claims_{'train' if split == 'dev' else split}.jsonl")
    for record in _read_jsonl(claims):
        evidence = []
        for doc_id, rationales in record["evidence"].items():
            filename = f"{doc_id}.txt"
            text = data.text("scifact", filename)
            for rationale in rationales:
                for index in rationale["sentences"]:
                    start, end = ranges[filename][index]
                    evidence.append(Evidence(filename, start, end, text[start:end]))
        cited = [f"{d}.txt" for d in record["cited_doc_ids"]]
        data.cases.append(
            Case(
                id=str(record["id"]),
                language="en",
                question=record["claim"],
                answers=(),
                evidence=tuple(dict.fromkeys(evidence)),
                answerable=bool(evidence),
                bucket="scifact",
                documents=tuple(f for f in cited if ("scifact", f) in data.documents),
            )
        )
    return data


# RGB -----------------------------------------------------------------------------------------
def load_rgb(folder: Path, split: str) -> DataSet:
    """RGB (Chinese): noise robustness and refusal from ``zh_refine.json``, information
    integration from ``zh_int.json``.

    Bucket ``rgb``: every query's positive and negative snippets (one document each); each query
    is answerable, its positives the gold evidence. Bucket ``rgb-negative``: the negative snippets
    only ("noise rate 1.0"); each ``zh_refine`` query is asked again there, as unanswerable. The
    counterfactual files (``*_fact.json``) are not loaded: they test detecting false evidence,
    which these figures do not measure."""
    data = DataSet("rgb")
    for stem in ("zh_refine", "zh_int"):
        path = folder / f"{stem}.json"
        if not path.exists():
            continue
        for record in _read_jsonl(path):
            positives = _flatten(record["positive"])
            negatives = [s.strip() for s in record["negative"] if s.strip()]
            names: list[str] = []
            evidence: list[Evidence] = []
            for snippet in positives:
                filename = _hashed("rgb", snippet)
                data.add(Document(filename, snippet, "rgb"))
                names.append(filename)
                evidence.append(Evidence(filename, 0, len(snippet), snippet))
            negative_names = []
            for snippet in negatives:
                filename = _hashed("rgb", snippet)
                data.add(Document(filename, snippet, "rgb"))
                names.append(filename)
                negative_names.append(filename)
            answers = tuple(dict.fromkeys(_flatten(record["answer"])))
            common = {"language": "zh", "question": record["query"], "answers": answers}
            data.cases.append(
                Case(
                    id=f"{stem}-{record['id']}",
                    evidence=tuple(evidence),
                    answerable=True,
                    bucket="rgb",
                    documents=tuple(dict.fromkeys(names)),
                    **common,
                )
            )
            if stem != "zh_refine" or not negative_names:
                continue
            for snippet, filename in zip(negatives, negative_names, strict=True):
                data.add(Document(filename, snippet, "rgb-negative"))
            data.cases.append(
                Case(
                    id=f"{stem}-{record['id']}-negative",
                    language="zh",
                    question=record["query"],
                    answers=(),
                    evidence=(),
                    answerable=False,
                    bucket="rgb-negative",
                    documents=tuple(dict.fromkeys(negative_names)),
                )
            )
    return data


def _flatten(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    return [s for item in value for s in _flatten(item)]


# Sources that disagree --------------------------------------------------------------------------
CURRENT, OLDER = "2024-01-01", "2021-01-01"
"""The effective dates of the current and the older side of a planted disagreement."""


def load_conflicts(folder: Path, split: str) -> DataSet:
    """Questions whose sources disagree, and ordinary ones, from the evaluation data's folder.

    - XQuAD (en/es/zh) and SQuAD 2.0: each article dated ``CURRENT``, and beside it, for the
      first answerable questions of the article whose answer is a value (``_value``: a short
      number, date or name), an older copy of its paragraph (dated ``OLDER``) in which the
      answer is another value of the same kind from the article (another question's answer,
      asking for the same kind: a date for a date, a name for a name, digits for digits).
    - RGB's counterfactual sets (``en_fact``, ``zh_fact``; measurement only): each query's
      ``positive`` snippets as the current document, its ``positive_wrong`` (the same snippets
      with a wrong answer) as the older one.
    - Ordinary XQuAD questions, over the articles alone: a disagreement claimed there is false.

    The cases of each language are interleaved (planted, ordinary, ...), so a limited run has
    some of each."""
    data = DataSet("conflicts")
    queues: dict[str, list[list[Case]]] = {}
    for language in ("en", "es", "zh"):
        path = folder / "xquad" / f"xquad.{language}.json"
        if path.exists():
            queues.setdefault(language, []).append(
                _planted(path, language, f"conflicts-xquad-{language}", data)
            )
            ordinary = squad_format(path, language, bucket=f"xquad-{language}", data=data)
            queues[language].append([c for c in ordinary.cases if c.bucket == f"xquad-{language}"])
    squad = sorted((folder / "squad_v2_dev_half").glob(f"{split}-v2.0*.json"))
    if squad:
        queues.setdefault("en", []).append(_planted(squad[0], "en", "conflicts-squad2", data))
    for language in ("en", "zh"):
        path = folder / "rgb" / f"{language}_fact.json"
        if path.exists():
            queues.setdefault(language, []).append(_counterfactual(path, language, data))
    data.cases = [c for cases in queues.values() for c in _interleaved(cases)]
    return data


def _planted(path: Path, language: str, bucket: str, data: DataSet) -> list[Case]:
    """The articles of a SQuAD-format file, dated ``CURRENT``, each with an older copy of one
    paragraph that holds another answer, in ``ROUNDS`` buckets (``bucket-1``…): round k plants
    the k-th question of each article that can be planted, so that each question's disagreement
    is the only one its article has in its bucket."""
    # Here, not at the top: the loaders read data files and import nothing of citewell's
    # answering code (citewell.generate loads the extractive generator) unless a set needs it.
    from citewell.generate.answer_types import expected_type

    articles = squad_format(path, language, bucket=bucket)
    by_id = {c.id: c for c in articles.cases}
    rounds: list[list[Case]] = [[] for _ in range(ROUNDS)]
    for number, article in enumerate(_read_json(path)["data"]):
        asked = [
            (qa, paragraph["context"])
            for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]
            if not qa.get("is_impossible", False) and qa["answers"]
        ]
        values = [(expected_type(qa["question"]), qa["answers"][0]["text"]) for qa, _ in asked]
        planted = 0
        for index, (qa, context) in enumerate(asked):
            answer = qa["answers"][0]
            case = by_id.get(str(qa["id"]))
            if planted == ROUNDS or case is None or not case.evidence:
                continue
            if not _value(answer["text"]):
                continue  # not a value (a number, a date, a name): a clause, not a conflict
            if context[answer["answer_start"] :].find(answer["text"]) != 0:
                continue
            kind = values[index][0]
            other = next(
                (
                    value
                    for k, value in values[index + 1 :] + values[:index]
                    if k == kind
                    and _value(value)
                    and _shape(value) == _shape(answer["text"])
                    and value.casefold() != answer["text"].casefold()
                    and value not in context
                ),
                None,
            )
            if other is None:
                continue
            planted += 1
            round_bucket = f"{bucket}-{planted}"
            start = answer["answer_start"]
            copy = context[:start] + other + context[start + len(answer["text"]) :]
            copy = copy.removeprefix("\ufeff").strip()  # as the text parser keeps it
            older = f"older-{number:02d}-{qa['id']}.txt"
            data.add(Document(older, copy, round_bucket, effective_date=OLDER))
            current = articles.documents[(bucket, case.documents[0])]
            data.add(replace(current, bucket=round_bucket, effective_date=CURRENT))
            at = copy.find(other)
            rounds[planted - 1].append(
                replace(
                    case,
                    id=f"{round_bucket}-{qa['id']}",
                    bucket=round_bucket,
                    evidence=(*case.evidence, Evidence(older, at, at + len(other), other)),
                    documents=(*case.documents, older),
                    conflict=(case.documents[0], older),
                )
            )
    return [case for cases in rounds for case in cases]


ROUNDS = 3
"""Planted questions per article (each round a bucket of its own, holding every article)."""


def _value(text: str) -> bool:
    """Whether an answer is a value: short (at most 5 words, or 10 Chinese characters) and a
    number, a date or a name (digits, a capital, or Chinese)."""
    short = len(text) <= 10 if _shape(text)[2] else len(text.split()) <= 5
    return short and any(_shape(text))


def _shape(value: str) -> tuple[bool, bool, bool]:
    """What makes two values of a kind: digits or none, a capital or none, Chinese or none."""
    return (
        any(c.isdigit() for c in value),
        value[:1].isupper(),
        any("\u3400" <= c <= "\u9fff" for c in value),
    )


def _counterfactual(path: Path, language: str, data: DataSet) -> list[Case]:
    """RGB's counterfactual queries: the true snippets dated ``CURRENT``, the altered ones
    ``OLDER``, each set one document."""
    bucket = f"conflicts-rgb-{language}"
    cases = []
    for record in _read_jsonl(path):
        current = "\n\n".join(_flatten(record["positive"]))
        older = "\n\n".join(_flatten(record["positive_wrong"]))
        names = (f"rgb-{record['id']}-current.txt", f"rgb-{record['id']}-older.txt")
        data.add(Document(names[0], current, bucket, effective_date=CURRENT))
        data.add(Document(names[1], older, bucket, effective_date=OLDER))
        answers = tuple(_flatten(record["answer"]))
        fakes = _flatten(record.get("fakeanswer", ""))
        evidence = [
            e
            for name, text, value in (
                (names[0], current, answers[0] if answers else ""),
                (names[1], older, fakes[0] if fakes else ""),
            )
            if (e := _evidence(name, text, value)) is not None
        ]
        cases.append(
            Case(
                id=f"rgb-{language}-fact-{record['id']}",
                language=language,
                question=record["query"],
                answers=answers,
                evidence=tuple(evidence),
                answerable=True,
                bucket=bucket,
                documents=names,
                conflict=names,
            )
        )
    return cases


def _interleaved(lists: list[list[Case]]) -> list[Case]:
    """One of each list in turn, until all are spent."""
    out: list[Case] = []
    for row in itertools.zip_longest(*lists):
        out.extend(c for c in row if c is not None)
    return out


LOADERS: dict[str, tuple[str, Callable[[Path, str], DataSet]]] = {
    "clapnq": ("clapnq", load_clapnq),
    "conflicts": ("", load_conflicts),
    "cmrc2018": ("cmrc2018", load_cmrc2018),
    "drcd": ("drcd", load_drcd),
    "hotpotqa": ("hotpotqa", load_hotpotqa),
    "multipart": ("xquad", load_multipart),
    "rgb": ("rgb", load_rgb),
    "scifact": ("scifact", load_scifact),
    "squad2": ("squad_v2_dev_half", load_squad2),
    "squad2-es": ("squad_es_v2", load_squad2_es),
    "xquad": ("xquad", load_xquad),
}
"""Data set name → (its folder in the evaluation data, its loader)."""


def load(name: str, folder: Path, split: str = "dev") -> DataSet:
    """The data set ``name`` read from ``folder`` (its own folder, not the evaluation data's)."""
    return LOADERS[name][1](folder, split)
