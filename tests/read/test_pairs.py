"""A pair as the reader reads it: the question, then the sentence in its context, if the model
was trained to read one."""

from __future__ import annotations

from citewell.encoder import Tokenizer
from citewell.read.pairs import PairLimits, pair_ids

QUESTION = "When did it open?"
SENTENCE = "It opened in 1902."


def ids_of(tokenizer: Tokenizer, first: str, second: str) -> list[int]:
    vocabulary = tokenizer.vocabulary
    asked, read = tokenizer.encode(f"query: {first}"), tokenizer.encode(f"passage: {second}")
    return [vocabulary.bos, *asked, vocabulary.eos, vocabulary.eos, *read, vocabulary.eos]


def test_a_model_trained_without_context_reads_the_sentence_alone(tokenizer: Tokenizer) -> None:
    alone = pair_ids(tokenizer, QUESTION, SENTENCE)

    assert alone == ids_of(tokenizer, QUESTION, SENTENCE)
    assert pair_ids(tokenizer, QUESTION, SENTENCE, PairLimits(), "Natural History Museum") == alone


def test_a_model_trained_with_context_reads_the_title_before_the_sentence(
    tokenizer: Tokenizer,
) -> None:
    limits = PairLimits(context_chars=80)

    titled = pair_ids(tokenizer, QUESTION, SENTENCE, limits, "Natural  History\nMuseum")

    assert titled == ids_of(tokenizer, QUESTION, f"Natural History Museum: {SENTENCE}")
    assert pair_ids(tokenizer, QUESTION, SENTENCE, limits, "") == ids_of(
        tokenizer, QUESTION, SENTENCE
    )


def test_a_long_context_is_cut_to_its_budget_of_characters(tokenizer: Tokenizer) -> None:
    limits = PairLimits(context_chars=12)

    cut = pair_ids(tokenizer, QUESTION, SENTENCE, limits, "Natural History Museum of London")

    assert cut == ids_of(tokenizer, QUESTION, f"Natural Hist: {SENTENCE}")
