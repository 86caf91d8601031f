"""The grammar a local model writes under: free text, and markers that cite only real evidence.

A model asked to cite by number may still write ``[12]`` when there are 9 evidence sentences, or
``[source]``. Under this grammar (llama.cpp's GBNF, applied token by token as the model samples)
a square bracket can only open a marker naming one of the numbers given, so every marker the
engine parses names an evidence sentence of this request. Full-width brackets (``【3】``), which
the marker parser also reads, are not allowed at all: one form is enough.

    citation_grammar([1, 2, 5])
    root ::= (text | cite)*
    text ::= [^\\[\\]【】]
    cite ::= "[" id "]"
    id ::= "1" | "2" | "5"

The rest of the text is free: the grammar checks the form of citations, not what they support
(that is verification's job).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["citation_grammar"]


def citation_grammar(numbers: Iterable[int]) -> str:
    """A GBNF grammar of answers that cite, as ``[n]``, only the evidence ``numbers`` given.

    With no numbers there is nothing to cite: the grammar is free text without brackets.
    """
    ids = sorted(set(numbers))
    if any(n < 1 for n in ids):
        raise ValueError(f"evidence numbers start at 1: {ids}")
    rules = ["text ::= [^\\[\\]【】]"]
    if ids:
        rules.insert(0, "root ::= (text | cite)*")
        rules += ['cite ::= "[" id "]"', "id ::= " + " | ".join(f'"{n}"' for n in ids)]
    else:
        rules.insert(0, "root ::= text*")
    return "\n".join(rules) + "\n"
