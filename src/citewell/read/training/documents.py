"""Reader groups from the document domain: contracts (CUAD) and service pages (MTRAG).

Wikipedia paragraphs are all the SQuAD-format sets show the reader; a person's own documents are
policies, contracts and product pages, where a question is asked in the document's own words and
most sentences are boilerplate. These groups are read the way the engine reads a document: the
candidates are the sentences word overlap ranks highest for the question (the engine's own
candidate rule, ``CITEWELL_READ__CANDIDATES``), each in the context of the document's title.

- CUAD (CC BY 4.0): 510 contracts × 41 clause categories. The question is the category's
  description ("Which state/country's law governs the interpretation of the contract?"); the
  sentences of the clauses the annotators marked answer it; a contract whose cell is empty does
  not answer it at all — real unanswerable questions about a real document.
- MTRAG (Apache-2.0): the last turn of conversations about government and IBM Cloud pages, with
  the passages a person judged relevant; a sentence answers when most of its words are in the
  reference answer. Questions the collection does not answer are read against the same
  collection's passages that share the most words with them.

Both are kept apart by document (a contract's file name, a conversation's id) with the rule every
set follows (``data.article_part``): half validates, and is reported beside the Wikipedia sets.
"""

from __future__ import annotations

import ast
import csv
import json
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from citewell.config import ReadSettings
from citewell.read.training.group import (
    MAX_CANDIDATES,
    Group,
    Part,
    article_part,
    sentences,
    words,
)

__all__ = ["ENGINE_CANDIDATES", "cuad_groups", "mtrag_groups", "overlap_ranked"]

ENGINE_CANDIDATES: int = ReadSettings.model_fields["candidates"].default
"""Candidates per question outside training: the engine's default ``read.candidates``."""
CUAD_PER_CONTRACT = {"training": (4, 3), "calibration": (4, 3), "validation": (6, 6)}
"""Answered and unanswered categories drawn per contract, by part (a contract asks 41)."""


def overlap_ranked(question: str, texts: Sequence[str]) -> list[int]:
    """Indices of ``texts`` by the words they share with ``question``, most first (stable)."""
    asked = words(question)
    return sorted(range(len(texts)), key=lambda i: -len(asked & words(texts[i])))


def _engine_view(
    group_first: str, texts: Sequence[str], labels: Sequence[int], count: int
) -> tuple[list[str], list[int]]:
    """The ``count`` candidates word overlap puts first; when none of them answers, the best
    answering sentence takes the last place, so the pick among them can still be measured."""
    order = overlap_ranked(group_first, texts)
    chosen = order[:count]
    if any(labels) and not any(labels[i] for i in chosen):
        chosen[-1] = next(i for i in order if labels[i])
    return [texts[i] for i in chosen], [labels[i] for i in chosen]


# --- CUAD -------------------------------------------------------------------------------------


def _cuad_questions(folder: Path) -> dict[str, str]:
    """Category → a question made from its description."""
    questions = {}
    with (folder / "category_descriptions.csv").open(encoding="utf-8-sig", newline="") as file:
        for row in csv.reader(file):
            if len(row) < 2 or not row[0].startswith("Category: "):
                continue
            category = row[0].removeprefix("Category: ").strip()
            description = row[1].removeprefix("Description: ").strip()
            if description.startswith("This category"):
                continue  # describes the label, asks nothing
            if not description.endswith("?"):
                description = description.rstrip(".")
                if description.startswith("The "):
                    description = "What is t" + description[1:]
                description += "?"
            questions[category] = description
    return questions


def _contract_sentences(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The contract with its whitespace normalised, and its sentences' spans in it (citewell's
    splitter, paragraph by paragraph, as ingestion reads a plain-text file)."""
    parts, spans, offset = [], [], 0
    for paragraph in re.split(r"\n\s*\n", text):
        flat = " ".join(paragraph.split())
        if not flat:
            continue
        for span in sentences(flat):
            spans.append((offset + span.start, offset + span.end))
        parts.append(flat)
        offset += len(flat) + 1
    return " ".join(parts), spans


def cuad_groups(folder: Path, part: Part, rng: random.Random) -> Iterator[Group]:
    """CUAD's groups in ``part``: a few answered and unanswered categories of each contract."""
    csv.field_size_limit(1 << 30)
    questions = _cuad_questions(folder)
    texts_by_name = {p.stem.casefold(): p for p in (folder / "full_contract_txt").glob("*.txt")}
    with (folder / "master_clauses.csv").open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        name = row["Filename"]
        if article_part(f"cuad:{name}") != part:
            continue
        path = texts_by_name.get(Path(name).stem.casefold())
        if path is None:
            continue  # 13 file names in the table differ from the text files'
        document, spans = _contract_sentences(path.read_text(encoding="utf-8", errors="replace"))
        texts = [document[start:end] for start, end in spans]
        title = " ".join(row.get("Document Name-Answer", "").split())[:80] or path.stem
        answered: list[tuple[str, list[int]]] = []
        unanswered: list[tuple[str, list[int]]] = []
        for category, question in questions.items():
            clauses = [c for c in ast.literal_eval(row.get(category) or "[]") if c.strip()]
            if not clauses:
                unanswered.append((question, []))
                continue
            labels = [0] * len(texts)
            for clause in clauses:
                flat = " ".join(clause.split())
                at = document.find(flat)
                if at < 0:
                    continue
                for index, (start, end) in enumerate(spans):
                    inside = min(end, at + len(flat)) - max(start, at)
                    if inside > 0 and inside >= 0.5 * min(end - start, len(flat)):
                        labels[index] = 1
            if any(labels):
                answered.append((question, labels))
        most_answered, most_unanswered = CUAD_PER_CONTRACT[part]
        answered = rng.sample(answered, min(len(answered), most_answered))
        unanswered = rng.sample(unanswered, min(len(unanswered), most_unanswered))
        count = MAX_CANDIDATES if part == "training" else ENGINE_CANDIDATES
        for question, labels in [*answered, *unanswered]:
            labels = labels or [0] * len(texts)
            candidates, chosen = _engine_view(question, texts, labels, count)
            yield Group("answers", "cuad", "en", question, candidates, chosen, any(chosen)).titled(
                title
            )


# --- MTRAG ------------------------------------------------------------------------------------


def _last_question(record: dict[str, Any]) -> str:
    turns = [t["text"] for t in record["input"] if t.get("speaker") == "user"]
    return str(turns[-1]).strip() if turns else ""


def mtrag_groups(folder: Path, part: Part) -> Iterator[Group]:
    """MTRAG's answerable and unanswerable questions in ``part`` (partial and underspecified ones
    are left out: their label is about the conversation, not the passages)."""
    records = [
        json.loads(line)
        for line in (folder / "mtragun_govt_ibmcloud.jsonl").read_text().splitlines()
        if line.strip()
    ]
    pool: dict[str, list[str]] = {}
    for record in records:
        for context in record["contexts"]:
            text = " ".join(context["text"].replace("<br>", " ").split())
            found = pool.setdefault(record["Collection"], [])
            found.extend(text[s.start : s.end] for s in sentences(text))
    for record in records:
        if article_part(f"mtrag:{record['conversation_id']}") != part:
            continue
        kind = record["answerability"][0]
        question = _last_question(record)
        if kind not in ("ANSWERABLE", "UNANSWERABLE") or not question:
            continue
        if kind == "UNANSWERABLE":
            texts = list(dict.fromkeys(pool[record["Collection"]]))
            labels = [0] * len(texts)
        else:
            target = words(" ".join(t["text"] for t in record["targets"]))
            texts, labels = [], []
            for context in record["contexts"]:
                text = " ".join(context["text"].replace("<br>", " ").split())
                for span in sentences(text):
                    sentence = text[span.start : span.end]
                    said = words(sentence)
                    texts.append(sentence)
                    labels.append(int(len(said) >= 4 and len(said & target) >= 0.6 * len(said)))
            if not any(labels):
                continue
        count = MAX_CANDIDATES if part == "training" else ENGINE_CANDIDATES
        candidates, chosen = _engine_view(question, texts, labels, count)
        yield Group("answers", "mtrag", "en", question, candidates, chosen, any(chosen))
