"""The answer engine: ``ask(question, agent, principal) -> Answer``, and its streaming twin.

    retrieve (hybrid, permission-filtered) → drop copies → pack numbered evidence sentences
    → read them (the reader: which answer each part of the question, and whether any does)
    → generate, or decline → attribute each claim → verify each citation → Answer

Who declines: the reader, where the generator cannot judge (the extractive one copies sentences);
else the generator, which gets the evidence best-read first and says itself when it does not
answer (a model's judgement of a question beats the reader's). An agent may name either.

Every API surface renders what this module produces; none re-runs retrieval or re-derives a
citation. ``stream`` yields, in order: ``Retrieved`` once, then ``TextDelta`` and ``ClaimDone``
events as the answer grows (a claim's citations right after its last character), then
``Completed`` with the final ``Answer``, whose text is exactly the concatenated deltas.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import nullcontext
from fnmatch import fnmatchcase
from typing import Any

import anyio.to_thread
from pydantic import ValidationError

from citewell.cite.attribute import Attribution
from citewell.cite.evidence import build_evidence, distinct_passages
from citewell.cite.pages import PageCache
from citewell.cite.verify import Verifier
from citewell.cite.writer import AnswerWriter
from citewell.errors import Conflict, InvalidRequest, NotFound
from citewell.events import AnswerEvent, Completed, Declined, Draft, Question, Retrieved
from citewell.generate.base import Generator, Queued
from citewell.language import detect_language
from citewell.library import LOCAL, Library
from citewell.model import (
    Agent,
    Answer,
    Bucket,
    CompoundFilter,
    Evidence,
    Filter,
    PartConflict,
    Passage,
    Principal,
    SearchRequest,
    StoredAnswer,
    Tenant,
    Turn,
)
from citewell.read import Reader
from citewell.redact import redact_passage
from citewell.rerank import read_evidence
from citewell.store.base import StoredTrace

__all__ = [
    "Engine",
]


class Engine:
    """Answers questions from a library with registered generators and a verifier.

    ``verifier`` scores the citations of every agent whose ``verifier`` is 'calibrated'. An agent
    that names 'openai-compatible' is judged by a ``ChatJudge`` of its model instead, with
    ``verifier`` standing in when the judge gives no verdict. A trained ``reader`` reads the
    evidence of every answer before its generator does (``citewell.rerank``); without one,
    generators judge the evidence themselves.
    """

    def __init__(
        self,
        library: Library,
        generators: Mapping[str, Generator],
        verifier: Verifier,
        agents: Sequence[Agent] = (Agent(),),
        *,
        reader: Reader | None = None,
        keep_traces: bool = False,
    ) -> None:
        self.library = library
        self.reader = reader if reader is not None and reader.trained else None
        self.keep_traces = keep_traces
        """Whether each answer's trace goes to the store (the API's answers; the store applies
        the retention)."""
        self.generators = dict(generators)
        self.verifier = verifier
        self._agents = {agent.name: agent for agent in agents}
        self._aliases = library.settings.model_aliases

    def agent(self, name: str | None, *, tenant_id: str = Tenant.DEFAULT_ID) -> Agent:
        """The agent of this name (the default agent for None): one the server was configured
        with, or one the tenant made; else the agent an alias maps the name to
        (``Settings.model_aliases``)."""
        wanted = name or Agent.DEFAULT_NAME
        agents = {a.name: a for a in reversed(self.agents(tenant_id=tenant_id))}
        aliased = next(
            (target for pattern, target in self._aliases.items() if fnmatchcase(wanted, pattern)),
            None,
        )
        agent = agents.get(wanted) or (agents.get(aliased) if aliased else None)
        if agent is None:
            raise NotFound(f"The model `{name}` does not exist.", param="model")
        return agent

    def agents(self, *, tenant_id: str = Tenant.DEFAULT_ID) -> list[Agent]:
        """The configured agents, then the tenant's own."""
        return [*self.configured_agents, *self.library.store.list_agents(tenant_id=tenant_id)]

    @property
    def configured_agents(self) -> list[Agent]:
        """The agents the server was started with: every tenant has them, none may change them."""
        return list(self._agents.values())

    def create_agent(self, agent: Agent, *, principal: Principal = LOCAL) -> Agent:
        """A new agent of the principal's tenant, as kept; ``Conflict`` if the name is taken."""
        if not _AGENT_NAME.fullmatch(agent.name):
            raise InvalidRequest(
                "An agent's name is 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                "or digit.",
                param="name",
            )
        if any(a.name == agent.name for a in self.agents(tenant_id=principal.tenant_id)):
            raise Conflict(f"An agent named '{agent.name}' exists already.", param="name")
        return self._keep_agent(agent, principal)

    def update_agent(
        self, name: str, changes: Mapping[str, Any], *, principal: Principal = LOCAL
    ) -> Agent:
        """The tenant's agent with ``changes`` applied (the other fields kept), as kept."""
        current = self._own_agent(name, principal)
        if changes.get("name", name) != name:
            raise InvalidRequest("An agent cannot be renamed; create another.", param="name")
        try:
            changed = Agent.model_validate({**current.model_dump(exclude_unset=True), **changes})
        except ValidationError as exc:
            first = exc.errors()[0]
            param = ".".join(str(part) for part in first["loc"]) or None
            raise InvalidRequest(f"Invalid '{param}': {first['msg']}.", param=param) from None
        return self._keep_agent(changed, principal)

    def delete_agent(self, name: str, *, principal: Principal = LOCAL) -> None:
        self._own_agent(name, principal)
        self.library.store.delete_agent(name, tenant_id=principal.tenant_id)

    def keep_answer(
        self,
        answer_id: str,
        answer: Answer,
        rendered: str,
        *,
        conversation: Sequence[Turn] = (),
        previous_id: str | None = None,
        principal: Principal = LOCAL,
    ) -> None:
        """Keep an answer as a dialect sent it (``rendered``), to be read again by its id."""
        self.library.store.put_answer(
            StoredAnswer(
                id=answer_id,
                tenant_id=principal.tenant_id,
                answer=answer,
                rendered=rendered,
                conversation=tuple((turn.role, turn.text) for turn in conversation),
                previous_id=previous_id,
                key_id=principal.key_id,
            )
        )

    def stored_answer(self, answer_id: str, *, principal: Principal = LOCAL) -> StoredAnswer:
        """A kept answer the caller may read again: its own, or any of the tenant's when it
        sees everything (an answer holds what the key that asked could see)."""
        stored = self.library.store.get_answer(answer_id, tenant_id=principal.tenant_id)
        if stored.key_id != principal.key_id and not principal.sees_everything:
            raise NotFound(f"No response found with id '{answer_id}'.", param="response_id")
        return stored

    def _own_agent(self, name: str, principal: Principal) -> Agent:
        """The tenant's agent of this name; ``Conflict`` for a configured one, ``NotFound``
        for none."""
        if name in self._agents:
            raise Conflict(f"The agent '{name}' is configured by the server: it cannot change.")
        own = self.library.store.list_agents(tenant_id=principal.tenant_id)
        agent = next((a for a in own if a.name == name), None)
        if agent is None:
            raise NotFound(f"No agent named '{name}'.", param="name")
        return agent

    def _keep_agent(self, agent: Agent, principal: Principal) -> Agent:
        """Check what the agent names, and keep it with its buckets as ids."""
        if agent.generator not in self.generators:
            known = ", ".join(sorted(self.generators))
            raise InvalidRequest(
                f"No generator named '{agent.generator}'; this server has: {known}.",
                param="generator",
            )
        bucket_ids = tuple(
            self.library.get_bucket(b, principal=principal).id for b in agent.bucket_ids
        )
        kept = agent.model_copy(update={"bucket_ids": bucket_ids})
        self.library.store.put_agent(kept, tenant_id=principal.tenant_id)
        return kept

    @classmethod
    def open(
        cls, library: Library, agents: Sequence[Agent] | None = None, *, keep_traces: bool = False
    ) -> Engine:
        """The engine of a library, with every registered generator and the configured reader
        (its support head verifies citations); by default one agent, ``citewell-agent``."""
        from citewell.cite.verify import CalibratedVerifier
        from citewell.generate import open_generators
        from citewell.read import open_reader
        from citewell.read.verifier import ReaderVerifier

        generators = open_generators(library.settings)
        reader = open_reader(library.settings, library.embedder)
        return cls(
            library,
            generators,
            ReaderVerifier(reader) if reader.trained else CalibratedVerifier(),
            agents or (Agent(),),
            reader=reader,
            keep_traces=keep_traces,
        )

    async def ask(self, question: Question, *, agent: Agent, principal: Principal) -> Answer:
        async for event in self.stream(question, agent=agent, principal=principal):
            if isinstance(event, Completed):
                return event.answer
        raise RuntimeError("the answer stream ended without an answer")

    async def stream(
        self, question: Question, *, agent: Agent, principal: Principal
    ) -> AsyncIterator[AnswerEvent]:
        generator = self.generators.get(agent.generator)
        if generator is None:
            raise InvalidRequest(
                f"agent {agent.name!r} names no known generator {agent.generator!r}"
            )
        with generator.place() if isinstance(generator, Queued) else nullcontext():
            async for event in self._answer(question, generator, agent, principal):
                yield event

    async def _answer(
        self, question: Question, generator: Generator, agent: Agent, principal: Principal
    ) -> AsyncIterator[AnswerEvent]:
        started = time.perf_counter()
        unread = await self.evidence(question, agent=agent, principal=principal)
        retrieved_at = time.perf_counter()
        # In a worker thread: reading is a network pass per candidate sentence.
        evidence = await anyio.to_thread.run_sync(self.read, unread, agent)
        read_at = time.perf_counter()
        conflicts = tuple(
            PartConflict.located(evidence, p.conflict) for p in evidence.reading if p.conflict
        )
        yield Retrieved(evidence.passages, question.text, conflicts)
        pages = self._pages(question, unread.passages)
        attribution = Attribution(evidence, agent, self._verifier(agent), pages)
        writer = AnswerWriter(evidence, agent, attribution)
        # Nothing to answer from: no generator is asked, so none can guess from memory.
        if _reader_declines(agent, generator):
            asked = _answerable(evidence)
        else:
            asked = bool(evidence.sentences)
        drafts = generator.generate(evidence, agent=agent) if asked else _declined()
        async for event in writer.write(drafts):
            yield event
        done = time.perf_counter()
        timings = {
            "retrieve": round((retrieved_at - started) * 1000, 2),
            "read": round((read_at - retrieved_at) * 1000, 2),
            "generate": round((done - read_at) * 1000, 2),
            "total": round((done - started) * 1000, 2),
        }
        answer = writer.answer(question, agent, timings, self.library.settings.fingerprint())
        if self.keep_traces:
            trace = StoredTrace(answer.id, answer.agent, answer.created_at, answer.trace)
            await anyio.to_thread.run_sync(self.library.store.put_trace, trace)
        yield Completed(answer)

    async def evidence(self, question: Question, *, agent: Agent, principal: Principal) -> Evidence:
        """What the engine answers ``question`` from, before its reader reads it: the passages
        retrieved for the agent (or given with the question), redacted as the agent asks, in
        numbered sentences. A reader's decline rule is calibrated on questions read this way
        (``citewell.served_reads``)."""
        passages = await self._passages(question, agent, principal)
        if agent.redact:
            # Before anything reads them: a stream cannot take back what it has sent.
            passages = tuple(redact_passage(p, agent.redact) for p in passages)
        # In a worker thread: the passages of a large request document are seconds of work.
        return await anyio.to_thread.run_sync(
            lambda: build_evidence(
                question.text,
                detect_language(question.text) or _main_language(passages),
                passages,
                history=question.history,
                instructions=question.instructions,
            )
        )

    async def _passages(
        self, question: Question, agent: Agent, principal: Principal
    ) -> tuple[Passage, ...]:
        if question.given is not None:
            return question.given.passages
        if not question.retrieve:
            return ()
        return await self._retrieve(question, agent, principal)

    async def _retrieve(
        self, question: Question, agent: Agent, principal: Principal
    ) -> tuple[Passage, ...]:
        buckets = _buckets(question, agent, principal, self.library)
        if not buckets:
            return ()
        limit = question.max_passages or agent.max_passages
        request = SearchRequest(
            query=question.text[:4000],
            bucket_ids=tuple(b.id for b in buckets),
            filters=_both(agent.filters, question.filters),
            max_results=min(100, 2 * limit),  # copies are dropped below
        )
        found = await anyio.to_thread.run_sync(
            lambda: self.library.search_buckets(request, buckets, principal=principal)
        )
        return distinct_passages(found, limit)

    def read(self, evidence: Evidence, agent: Agent) -> Evidence:
        """The evidence as the reader read it for this agent (as it is, without a reader): each
        part of the question judged answered or not by the agent's threshold, else the reader's
        decline rule."""
        if self.reader is None or not evidence.sentences:
            return evidence
        return read_evidence(
            evidence,
            self.reader,
            candidates=self.library.settings.read.candidates,
            read_first=self.library.settings.read.read_first,
            conflicts=self.library.settings.read.conflicts,
            threshold=agent.answerable_threshold,  # None: the reader's card decides
        )

    def _verifier(self, agent: Agent) -> Verifier:
        """The verifier the agent names; ``GeneratorUnavailable`` if its judge is unconfigured."""
        if agent.verifier == "calibrated":
            return self.verifier
        from citewell.generate.judge import ChatJudge  # the SDK loads only if an agent needs it

        # Made for each answer: a judge holds its settings and nothing else (no connection).
        return ChatJudge(self.library.settings, agent.model, fallback=self.verifier)

    def _pages(self, question: Question, passages: Sequence[Passage]) -> PageCache:
        given = question.given.pages if question.given is not None else {}
        retrieved = {p.source.id: p.pages for p in passages if p.pages}
        return PageCache(self.library.store, dict(given), retrieved)


_AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _buckets(
    question: Question, agent: Agent, principal: Principal, library: Library
) -> tuple[Bucket, ...]:
    """The buckets to search, each looked up once: the request's, else the agent's, else every
    visible one."""
    if question.bucket_ids is not None:
        requested = [library.get_bucket(b, principal=principal) for b in question.bucket_ids]
        if agent.bucket_ids:
            allowed = {library.get_bucket(b, principal=principal).id for b in agent.bucket_ids}
            requested = [b for b in requested if b.id in allowed]
        return tuple(requested)
    if agent.bucket_ids:
        return tuple(library.get_bucket(b, principal=principal) for b in agent.bucket_ids)
    return tuple(library.list_buckets(principal=principal))


def _reader_declines(agent: Agent, generator: Generator) -> bool:
    """Whether the reader's answerability decides that the sources do not answer, rather than
    the generator: where the agent says so, else where the generator cannot judge."""
    if agent.declined_by == "auto":
        return not generator.judges_answerability
    return agent.declined_by == "reader"


def _answerable(evidence: Evidence) -> bool:
    """Whether there is anything to answer from: some evidence, and where a reader read it, a
    part of the question it found answered."""
    if evidence.reading:
        return any(part.answered for part in evidence.reading)
    return bool(evidence.sentences)


async def _declined() -> AsyncIterator[Draft]:
    yield Declined()


def _both(first: Filter | None, second: Filter | None) -> Filter | None:
    if first is None or second is None:
        return first or second
    return CompoundFilter(type="and", filters=[first, second])


def _main_language(passages: Sequence[Passage]) -> str | None:
    languages = [p.chunk.language for p in passages if p.chunk.language]
    return max(set(languages), key=languages.count) if languages else None
