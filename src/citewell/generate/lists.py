"""Lists in the evidence: the items a sentence introduces.

Ingest writes each item of a list as a block of its own, a paragraph of the canonical text
without its bullet or number (``citewell.ingest``). A question answered by a list's lead-in
("Before your first visit, please bring the following:") is answered by its items: the lead-in
holds the question's words and none of what it asks for, and the items hold that without its
words ("your membership card"). So where the lead-in answers, its items follow it.

What a stored passage no longer says is which blocks were items: they are read back as the
single-sentence blocks after a sentence ending with a colon, alike in ending with closing
punctuation or not (a paragraph after a list usually ends otherwise than its items).
"""

from __future__ import annotations

from citewell.model import Evidence

__all__ = ["LEAD_IN_ENDINGS", "list_items"]

LEAD_IN_ENDINGS = (":", "：")
"""How a sentence that introduces a list ends."""
_CLOSING = frozenset(".!?…。！？")


def list_items(evidence: Evidence, index: int, most: int) -> tuple[int, ...]:
    """The evidence indices of the items that sentence ``index`` introduces, in order: the
    blocks of one sentence that follow it in its passage, while they end alike (with closing
    punctuation or without). Empty where it introduces no list (it does not end with a colon,
    or no such block follows it), or a list of more than ``most`` items, too long to say."""
    if not evidence.sentences[index].text.rstrip().endswith(LEAD_IN_ENDINGS):
        return ()
    items: list[int] = []
    closed: bool | None = None
    for after in range(index + 1, len(evidence.sentences)):
        if not _a_block(evidence, after):
            break
        text = evidence.sentences[after].text.rstrip()
        if text.endswith(LEAD_IN_ENDINGS):
            break  # the next list's lead-in
        ends = text[-1:] in _CLOSING
        if closed is not None and ends != closed:
            break
        closed = ends
        items.append(after)
    return tuple(items) if len(items) <= most else ()


def _a_block(evidence: Evidence, index: int) -> bool:
    """Whether the sentence is a block of its own in the same passage as the one before it:
    a blank line (or its passage's edge) on either side."""
    sentence = evidence.sentences[index]
    if evidence.sentences[index - 1].passage_index != sentence.passage_index:
        return False
    chunk = evidence.passages[sentence.passage_index].chunk
    start = sentence.span.start - chunk.span.start
    end = sentence.span.end - chunk.span.start
    before, after = chunk.text[:start], chunk.text[end:]
    return before.endswith("\n\n") and (not after.strip() or after.startswith("\n\n"))
