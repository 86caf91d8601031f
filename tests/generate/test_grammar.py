"""The citation grammar: free text, and brackets only as markers of the given evidence numbers."""

from __future__ import annotations

import pytest

from citewell.generate.grammar import citation_grammar


def test_a_bracket_can_only_open_a_marker_of_a_given_number() -> None:
    assert citation_grammar([5, 1, 2, 2]) == (
        "root ::= (text | cite)*\n"
        "text ::= [^\\[\\]【】]\n"
        'cite ::= "[" id "]"\n'
        'id ::= "1" | "2" | "5"\n'
    )


def test_with_nothing_to_cite_no_bracket_is_allowed() -> None:
    assert citation_grammar([]) == "root ::= text*\ntext ::= [^\\[\\]【】]\n"


def test_evidence_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        citation_grammar([0, 1])
