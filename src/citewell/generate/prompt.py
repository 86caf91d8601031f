"""What remote generators tell a model: the rules, the caller's instructions, the evidence.

A chat model (``openai-compatible``) reads the evidence as numbered sentences grouped under a
source label, and cites by number: ``[3]`` or ``[3][7]`` at the end of each sentence. Anthropic's
model reads the same sentences as documents and cites through its citations API, so it gets the
same rules without the marker syntax. Both are asked to reply exactly ``NO_ANSWER`` when the
evidence does not answer; ``opening`` recognises that reply at the start of a stream, and
``ReplyGate`` holds a stream's first pieces back until it has.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from citewell.locator import locator_label, source_label
from citewell.model import Evidence, EvidenceSentence, Passage, Turn

__all__ = [
    "NO_ANSWER",
    "ChatPrompt",
    "Opening",
    "ReplyGate",
    "by_passage",
    "chat_prompt",
    "conflict_rules",
    "document_rules",
    "numbered_evidence",
    "one_line",
    "opening",
    "passage_label",
]

T = TypeVar("T")

NO_ANSWER = "NO_ANSWER"
"""The whole reply of a model whose evidence does not answer the question."""

_LANGUAGES = {"en": "English", "es": "Spanish", "zh": "Chinese"}

_MARKER_RULES = """\
You answer questions from numbered evidence sentences, and only from them.
- Use only what the evidence states. Do not add facts from memory.
- Answer in {language}.
- Write one claim per sentence.
- End each sentence with the numbers of the evidence sentences it rests on, like [3] or [3][7].
- Cite only sentences that support the claim. Leave out any claim that no evidence sentence \
supports.
- If the evidence does not answer the question, reply exactly NO_ANSWER and nothing else."""

_DOCUMENT_RULES = """\
You answer questions from the documents provided, and only from them.
- Use only what the documents state. Do not add facts from memory.
- Answer in {language}.
- Write one claim per sentence, and cite the parts of the documents each sentence rests on.
- Leave out any claim that the documents do not support.
- If the documents do not answer the question, reply exactly NO_ANSWER and nothing else."""

_CALLER = """

Instructions from the application (they cannot override the rules above):
{instructions}"""


@dataclass(frozen=True, slots=True)
class ChatPrompt:
    """A system message, then the conversation; its last turn asks the question."""

    system: str
    turns: tuple[Turn, ...]

    def messages(self) -> list[dict[str, str]]:
        """The prompt as chat messages in OpenAI's shape, which llama.cpp reads too."""
        return [
            {"role": "system", "content": self.system},
            *({"role": turn.role, "content": turn.text} for turn in self.turns),
        ]


def chat_prompt(evidence: Evidence) -> ChatPrompt:
    """The prompt of a model that cites evidence sentences by number."""
    question = f"Evidence:\n\n{numbered_evidence(evidence)}\n\nQuestion: {evidence.question}"
    return ChatPrompt(
        system=_rules(_MARKER_RULES, evidence),
        turns=(*evidence.history, Turn("user", question)),
    )


def document_rules(evidence: Evidence) -> str:
    """The system prompt of a model that cites documents through a citations API."""
    return _rules(_DOCUMENT_RULES, evidence)


def numbered_evidence(evidence: Evidence) -> str:
    """Every evidence sentence as ``[n] text``, on one line each, under its source's label."""
    return "\n\n".join(
        "\n".join(
            [f"Source: {passage_label(passage)}"]
            + [f"[{s.number}] {one_line(s.text)}" for s in sentences]
        )
        for passage, sentences in by_passage(evidence)
    )


def by_passage(evidence: Evidence) -> list[tuple[Passage, list[EvidenceSentence]]]:
    """Each passage with its evidence sentences, in order; sentences with no text are left out,
    and so are passages left with none."""
    groups = []
    for index, sentences in itertools.groupby(evidence.sentences, lambda s: s.passage_index):
        kept = [s for s in sentences if one_line(s.text)]
        if kept:
            groups.append((evidence.passages[index], kept))
    return groups


def passage_label(passage: Passage) -> str:
    """The file name and where in it the passage lies: ``handbook.pdf (p. 4)``."""
    locator = locator_label(
        page_number=passage.page_number,
        page_label=passage.page_label,
        heading_path=passage.chunk.heading_path,
    )
    return source_label(passage.source.filename, locator)


def one_line(text: str) -> str:
    """The text with its runs of whitespace (line breaks too) as single spaces."""
    return " ".join(text.split())


def conflict_rules(evidence: Evidence) -> str:
    """What the model is told of the sources that disagree on a part of the question (empty
    when none do): both sides, to be stated and cited, the current one first."""
    lines = []
    for part in evidence.reading:
        conflict = part.conflict
        if conflict is None or not part.answered:
            continue
        first, second = (evidence.sentences[n - 1] for n in (conflict.preferred, conflict.other))
        order = (
            f"[{first.number}] is from the source dated later: state it first"
            if conflict.decided
            else "neither source is dated after the other: say you cannot tell which is current"
        )
        lines.append(
            f'- On "{part.text}": [{first.number}] "{one_line(first.text)}" and '
            f'[{second.number}] "{one_line(second.text)}" disagree ("{conflict.values[0]}" '
            f'against "{conflict.values[1]}"); {order}.'
        )
    if not lines:
        return ""
    return (
        "\n\nThe sources disagree. Say so in the answer, and state each side with its citation:\n"
        + "\n".join(lines)
    )


def _rules(template: str, evidence: Evidence) -> str:
    language = _LANGUAGES.get(evidence.language or "", "the language of the question")
    rules = template.format(language=language) + conflict_rules(evidence)
    if evidence.instructions and evidence.instructions.strip():
        rules += _CALLER.format(instructions=evidence.instructions.strip())
    return rules


# Recognising NO_ANSWER --------------------------------------------------------------------------


class Opening(Enum):
    """What the first characters of a reply say about it."""

    UNDECIDED = "undecided"
    """It may still turn out to be NO_ANSWER: hold it back."""
    ANSWER = "answer"
    DECLINED = "declined"


_DECORATION = " \t\r\n*_`\"'“”「」"
"""What models wrap a bare NO_ANSWER in: whitespace, Markdown emphasis or code, quotes."""
_MAX_OPENING = 64
"""Past this many characters of decoration alone, the reply is taken as an answer."""


def opening(text: str, *, final: bool) -> Opening:
    """Whether a reply starting with ``text`` is NO_ANSWER; ``final`` when nothing follows.

    NO_ANSWER is recognised in any case and wrapped in any decoration, when no word character
    follows it ("NO_ANSWER." declines, "NO_ANSWERS" does not). A reply with nothing in it
    declines too: a model that says nothing has found nothing to answer with.
    """
    body = text.lstrip(_DECORATION)
    head = body[: len(NO_ANSWER)]
    if head.upper() != NO_ANSWER[: len(head)]:
        return Opening.ANSWER
    if len(head) < len(NO_ANSWER):
        if final:
            return Opening.ANSWER if body else Opening.DECLINED
        return Opening.ANSWER if len(text) > _MAX_OPENING else Opening.UNDECIDED
    rest = body[len(NO_ANSWER) :]
    if not rest:
        return Opening.DECLINED if final else Opening.UNDECIDED
    return Opening.ANSWER if rest[0].isalnum() or rest[0] == "_" else Opening.DECLINED


class ReplyGate(Generic[T]):
    """Holds back the first pieces of a streamed reply until ``opening`` decides about them.

        gate = ReplyGate[TextPiece]()
        for piece in stream:
            shown.extend(gate.add(piece.text, piece))  # [] while the reply may be NO_ANSWER
        shown.extend(gate.finish())
        gate.declined  # the reply was NO_ANSWER (or empty): nothing was released

    Once the reply is known to be an answer, every piece passes straight through.
    """

    def __init__(self) -> None:
        self._text = ""
        self._held: list[T] = []
        self._state = Opening.UNDECIDED

    @property
    def declined(self) -> bool:
        return self._state is Opening.DECLINED

    def add(self, text: str, item: T) -> list[T]:
        """The items that may be shown now that ``item`` (holding ``text``) has arrived."""
        if self._state is Opening.ANSWER:
            return [item]
        if self._state is Opening.DECLINED:
            return []
        self._text += text
        self._held.append(item)
        self._state = opening(self._text, final=False)
        return self._release()

    def finish(self) -> list[T]:
        """The items still held, once the reply is complete (none if it declined)."""
        if self._state is Opening.UNDECIDED:
            self._state = opening(self._text, final=True)
        return self._release()

    def _release(self) -> list[T]:
        if self._state is not Opening.ANSWER:
            return []
        released, self._held = self._held, []
        return released
