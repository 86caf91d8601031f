"""The extractive generator: which evidence sentence answers, how answers are joined, and when
it declines."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import anyio
import pytest

from citewell.events import CitedSentence, Declined, Draft, Remark
from citewell.generate.answer_types import AnswerType, carries, expected_type, without_type_phrase
from citewell.generate.extractive import ExtractiveGenerator, Weights
from citewell.model import Agent, Conflict, Evidence, PartReading, SentenceChoice, WordAnswer
from tests.generate.samples import REFUNDS, SHIPPING, Doc, evidence, split_sentences

WARSAW = 0
"""Index of the article "Warsaw" in XQuAD's development split."""
RELIGION, DIVISION = 2, 3
"""Its paragraphs on religion in 1901 and on Poland's territorial division."""

AGENT = Agent()
SEVERAL = ExtractiveGenerator(Weights(max_sentences=3))
"""A generator that may answer with more than one sentence."""


def drafts(
    found: Evidence, generator: ExtractiveGenerator | None = None, **agent: int
) -> list[Draft]:
    return (generator or ExtractiveGenerator()).drafts(found, agent=Agent(**agent))  # type: ignore[arg-type]


def xquad(evaldata: Path, language: str, question: int) -> tuple[Evidence, str]:
    """A real XQuAD question on the religion paragraph, with the paragraph on territorial
    division as a second source; and its gold answer."""
    path = evaldata / "xquad" / f"xquad.{language}.json"
    article = json.loads(path.read_text(encoding="utf-8"))["data"][WARSAW]
    religion, division = article["paragraphs"][RELIGION], article["paragraphs"][DIVISION]
    qa = religion["qas"][question]
    docs = [
        Doc(split_sentences(religion["context"]), filename="warsaw-religion.txt"),
        Doc(split_sentences(division["context"]), filename="warsaw-division.txt"),
    ]
    return evidence(qa["question"], docs, language=language), qa["answers"][0]["text"]


# choosing ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("language", "question", "number", "sentence"),
    [
        (
            "en",
            3,  # What percentage of Warsaw's population was Protestant in 1901?
            2,
            "According to the 1901 census, out of 711,988 inhabitants 56.2% were Catholics, 35.7% "
            "Jews, 5% Greek orthodox Christians and 2.8% Protestants.",
        ),
        (
            "es",
            3,  # ¿Qué porcentaje de la población de Varsovia era protestante en 1901?
            2,
            "Según el censo del año 1901, de sus 711 988 habitantes, el 56,2 % eran católicos, el "
            "35,7 % judíos, el 5 % cristianos ortodoxos y el 2,8 % protestantes.",
        ),
        (
            "zh",
            3,  # 1901 年华沙人口中新教徒的比例是多少？
            2,
            "根据 1901 年的人口普查，711,988 名居民中，天主教徒占 56.2%，犹太人占 35.7%，"
            "希腊东正教徒占 5%，新教徒占 2.8%。",
        ),
        (
            "en",
            4,  # When were most of the places of religious worship destroyed in Warsaw?
            5,
            "Most of them were destroyed in the aftermath of the Warsaw Uprising of 1944.",
        ),
        (
            "es",
            4,  # ¿Cuándo fueron destruidos la mayoría de los lugares de culto religioso...?
            4,
            "Esto llevó a la construcción, por toda la ciudad, de cientos de lugares de culto "
            "religioso; la mayoría de los cuales fueron destruidos tras el Alzamiento de Varsovia "
            "en 1944.",
        ),
        (
            "zh",
            4,  # 华沙的大部分宗教场所是什么时候被摧毁的？
            4,
            "这导致该镇各地修建了数百个宗教礼拜场所，其中大部分在 1944 年华沙起义后被摧毁。",
        ),
    ],
)
def test_a_real_question_is_answered_by_the_sentence_holding_its_answer(
    evaldata: Path, language: str, question: int, number: int, sentence: str
) -> None:
    found, gold = xquad(evaldata, language, question)
    assert gold in sentence
    assert drafts(found) == [CitedSentence(text=sentence, evidence=(number,))]


def test_the_year_asked_about_picks_between_two_censuses(evaldata: Path) -> None:
    # "Protestants" is in both the 1901 and the 1909 sentence; only one is about 1901.
    found, _ = xquad(evaldata, "en", 3)
    assert "Protestants" in found.sentences[2].text and "1909" in found.sentences[2].text
    assert [d.evidence for d in drafts(found) if isinstance(d, CitedSentence)] == [(2,)]


def test_the_words_of_how_long_are_not_looked_for_in_the_answer() -> None:
    found = evidence(
        "How long do refunds take?",
        [
            Doc(
                [
                    "Refunds are paid within thirty days of the request.",
                    "A receipt is required for every refund.",
                ]
            )
        ],
    )
    assert without_type_phrase("How long do refunds take?") == "do refunds take?"
    assert expected_type("How long do refunds take?") is AnswerType.NUMBER
    assert drafts(found) == [
        CitedSentence(text="Refunds are paid within thirty days of the request.", evidence=(1,))
    ]


@pytest.mark.parametrize(
    ("sentence", "holds_a_time"),
    [
        ("Day: Tuesday; Open: 17:00; Close: 21:00; Mechanic on duty: yes", True),
        ("De lunes a viernes abrimos de 9:30 a 20:00.", True),
        ("The desk opens at 9 am.", True),
        ("图书馆下午5点关门。", True),
        ("On Saturdays the workshop is open for self-service only.", False),
        ("The ratio rose from 1.25 to 3.5.", False),
        ("两者有3点不同。", False),  # points of difference, not three o'clock
    ],
)
def test_a_time_of_day_answers_a_when_question(sentence: str, holds_a_time: bool) -> None:
    assert carries(sentence, AnswerType.DATE, "When is the workshop open?") is holds_a_time


def test_a_heading_is_never_the_answer() -> None:
    found = evidence(
        "What about refunds?",
        [
            Doc(
                ["Refunds", "Refunds are paid within thirty days of the request."],
                headings=("Refunds",),
            )
        ],
    )
    assert drafts(found) == [
        CitedSentence(text="Refunds are paid within thirty days of the request.", evidence=(2,))
    ]


# joining -------------------------------------------------------------------------------------
def test_sentences_after_the_first_carry_a_space() -> None:
    found = evidence(
        "Where is the warehouse, and what does delivery cost?",
        [
            Doc(["Our warehouse is in Leeds.", "Gift cards cannot be refunded."]),
            Doc(["Delivery costs five pounds."], filename="delivery.md"),
        ],
    )
    assert drafts(found, SEVERAL) == [
        CitedSentence(text="Our warehouse is in Leeds.", evidence=(1,)),
        CitedSentence(text=" Delivery costs five pounds.", evidence=(3,)),
    ]


def test_chinese_sentences_are_joined_without_a_space() -> None:
    found = evidence(
        "华沙的人口和面积分别是多少？",
        [
            Doc(["华沙的人口约为一百七十万。", "华沙是波兰的首都。"]),
            Doc(["华沙的面积为五百一十七平方公里。"], filename="area.md"),
        ],
        language="zh",
    )
    assert drafts(found, SEVERAL) == [
        CitedSentence(text="华沙的人口约为一百七十万。", evidence=(1,)),
        CitedSentence(text="华沙的面积为五百一十七平方公里。", evidence=(3,)),
    ]


def test_an_exact_copy_in_a_second_source_is_not_cited_twice() -> None:
    sentence = "Orders ship from our warehouse in Leeds within two business days."
    found = evidence(
        "Where do orders ship from?",
        [
            Doc([sentence, "Shipping is free for orders over $50."]),
            Doc([sentence], filename="copy-of-faq.md"),
        ],
    )
    assert drafts(found, SEVERAL) == [CitedSentence(text=sentence, evidence=(1,))]


def test_no_more_sources_are_cited_than_the_agent_allows() -> None:
    found = evidence(
        "Where is the main warehouse, what does express delivery cost, and which neighbour "
        "signs for parcels?",
        [
            Doc(["The main warehouse is in Leeds."], filename="warehouse.md"),
            Doc(["Express delivery costs five pounds."], filename="delivery.md"),
            Doc(["The next-door neighbour signs for parcels."], filename="parcels.md"),
        ],
    )
    three = drafts(found, SEVERAL, max_sources=3)
    two = drafts(found, SEVERAL, max_sources=2)
    assert [d.evidence for d in three if isinstance(d, CitedSentence)] == [(1,), (2,), (3,)]
    cited = {
        found.sentences[d.evidence[0] - 1].passage_index
        for d in two
        if isinstance(d, CitedSentence)
    }
    assert len(cited) == 2


# declining -----------------------------------------------------------------------------------
def test_a_question_the_evidence_does_not_answer_is_declined() -> None:
    assert drafts(evidence("Who founded the shop?", [REFUNDS, SHIPPING])) == [Declined()]


def test_no_evidence_at_all_is_declined() -> None:
    assert drafts(evidence("How long do refunds take?", [])) == [Declined()]


def test_two_sentences_of_two_sources_answering_equally_well_are_a_guess_and_declined() -> None:
    found = evidence(
        "When did the bridge open?",
        [Doc(["The old bridge opened in 1901."]), Doc(["The new bridge opened in 1950."])],
    )
    assert drafts(found) == [Declined()]


def test_two_neighbouring_sentences_answering_equally_well_are_said_together() -> None:
    section = Doc(
        [
            "A membership can be refunded in full within 14 days of payment.",
            "After that, fees are not refunded.",
            "Members may bring one guest per visit.",
        ],
        headings=("Refunds",),
    )
    assert drafts(evidence("What is our refund policy?", [section])) == [
        CitedSentence("A membership can be refunded in full within 14 days of payment.", (1,)),
        CitedSentence(" After that, fees are not refunded.", (2,)),
    ]


def test_three_sentences_answering_equally_well_are_a_guess_even_in_one_passage() -> None:
    found = evidence(
        "When did the bridge open?",
        [
            Doc(
                [
                    "The old bridge opened in 1901.",
                    "The new bridge opened in 1950.",
                    "The rail bridge opened in 1962.",
                ]
            )
        ],
    )
    assert drafts(found) == [Declined()]


def test_word_overlaps_answer_says_whether_it_holds_the_kind_of_answer_asked_for() -> None:
    found = evidence(
        "When does the shop open? Who runs the shop?", [Doc(["The shop opens at 9:00."])]
    )
    timed = ExtractiveGenerator().word_choice(found, "When does the shop open?")
    assert timed == WordAnswer((0,), typed=True) and timed.sure
    unnamed = ExtractiveGenerator().word_choice(found, "Who runs the shop?")  # no one's name
    assert unnamed == WordAnswer((0,), typed=False) and not unnamed.sure


# tables ----------------------------------------------------------------------------------------
HOURS = Doc(
    [
        "Opening hours",
        "Day: Tuesday; Open: 17:00; Close: 21:00; Mechanic on duty: yes",
        "Day: Thursday; Open: 17:00; Close: 21:00; Mechanic on duty: yes",
        "Day: Saturday; Open: 10:00; Close: 16:00; Mechanic on duty: no",
    ],
    headings=("Opening hours",),
)
SATURDAYS = Doc(["On Saturdays the workshop is open for self-service only."], filename="note.md")


def test_a_question_naming_a_tables_column_is_answered_by_its_rows_a_line_each() -> None:
    # The note holds every word of the question but no time; the column "Open" holds times.
    found = evidence("When is the workshop open?", [HOURS, SATURDAYS])
    assert drafts(found) == [
        CitedSentence("Day: Tuesday; Open: 17:00; Close: 21:00; Mechanic on duty: yes", (2,)),
        CitedSentence("\nDay: Thursday; Open: 17:00; Close: 21:00; Mechanic on duty: yes", (3,)),
        CitedSentence("\nDay: Saturday; Open: 10:00; Close: 16:00; Mechanic on duty: no", (4,)),
    ]


def test_the_row_a_question_names_answers_it_alone() -> None:
    found = evidence("Is a mechanic on duty on Saturday?", [HOURS, SATURDAYS])
    assert drafts(found) == [
        CitedSentence("Day: Saturday; Open: 10:00; Close: 16:00; Mechanic on duty: no", (4,))
    ]


def test_a_long_table_whose_rows_all_answer_alike_is_declined_not_recited() -> None:
    days = [f"Day: {n}; Open: 09:00; Close: 17:00" for n in range(1, 11)]
    found = evidence("When is the library open?", [Doc(days, headings=("Hours",))])
    assert drafts(found) == [Declined()]


def test_where_a_reader_read_the_part_the_rows_are_said_whatever_it_reads() -> None:
    # The reader reads one sentence at a time and never trained on a table's rows: sure of the
    # Saturday note, it still does not replace the rows or add to them.
    question = "When is the workshop open?"
    found = read(evidence(question, [HOURS, SATURDAYS]), (question, True, {5: 0.9, 2: 0.12}))
    assert ExtractiveGenerator().word_choice(found, question) == WordAnswer(
        (1, 2, 3), typed=True, listed=True
    )
    said = drafts(dataclasses.replace(found, choice=SentenceChoice(reader_first=0.05, both=0.05)))
    assert [d.evidence for d in said if isinstance(d, CitedSentence)] == [(2,), (3,), (4,)]


# lists -----------------------------------------------------------------------------------------
BRING = Doc(
    [
        "Before your first visit, please bring the following:",
        "your membership card",
        "closed shoes",
    ],
    headings=("What to bring",),
    separator="\n\n",
)
LOST = Doc(["A lost membership card is replaced for five euros."], filename="cards.md")


def test_a_lists_lead_in_is_said_with_its_items_a_line_each() -> None:
    # The lead-in holds the question's words, the items what it asks for.
    found = evidence("What should I bring on my first visit?", [BRING, LOST])
    assert drafts(found) == [
        CitedSentence("Before your first visit, please bring the following:", (1,)),
        CitedSentence("\nyour membership card", (2,)),
        CitedSentence("\nclosed shoes", (3,)),
    ]
    word = ExtractiveGenerator().word_choice(found, "What should I bring on my first visit?")
    assert word.sentences == (0, 1, 2) and word.listed


def test_an_item_that_answers_alone_is_said_alone() -> None:
    found = evidence("Do I need closed shoes?", [BRING, LOST])
    assert drafts(found) == [CitedSentence("closed shoes", (3,))]


def test_where_the_reader_picks_a_lists_lead_in_its_items_follow() -> None:
    question = "What should I bring on my first visit?"
    found = read(evidence(question, [BRING, LOST]), (question, True, {1: 0.9, 4: 0.2}))
    said = drafts(dataclasses.replace(found, choice=SentenceChoice(reader_first=0.05)))
    assert [d.evidence for d in said if isinstance(d, CitedSentence)] == [(1,), (2,), (3,)]


# determinism ---------------------------------------------------------------------------------
def test_the_same_evidence_gives_the_same_drafts_streamed_or_not(evaldata: Path) -> None:
    found, _ = xquad(evaldata, "zh", 4)

    async def streamed() -> list[Draft]:
        return [d async for d in ExtractiveGenerator().generate(found, agent=AGENT)]

    first = drafts(found)
    assert all(drafts(found) == first for _ in range(3))
    assert anyio.run(streamed) == first


def test_the_answer_flows_where_its_source_was_hard_wrapped() -> None:
    found = evidence(
        "How long may members borrow the pump?",
        [Doc(["Members may borrow the pump for up\nto three days.", "Tools stay inside."])],
    )
    drafts = ExtractiveGenerator().drafts(found, agent=Agent())
    assert drafts == [CitedSentence("Members may borrow the pump for up to three days.", (1,))]


def test_a_chinese_sentence_wrapped_across_lines_is_joined_without_a_space() -> None:
    found = evidence(
        "茶园每天几点开门？",
        [Doc(["茶园每天上午八点\n开门，下午五点停止入园。", "请穿防滑鞋。"])],
        language="zh",
    )
    drafts = ExtractiveGenerator().drafts(found, agent=Agent())
    assert drafts == [CitedSentence("茶园每天上午八点开门，下午五点停止入园。", (1,))]


# where a reader read the evidence --------------------------------------------------------------
HOURS_AND_PRICE = [
    Doc(["The shop opens at nine.", "It closes at six."], filename="hours.md"),
    Doc(["Membership costs forty euros a year.", "Students pay fifteen."], filename="price.md"),
]


def read(found: Evidence, *parts: tuple[str, bool, dict[int, float]]) -> Evidence:
    """The evidence as a reader left it: for each part, whether it is answered and the scores
    of the sentences read (by evidence number)."""
    reading = tuple(
        PartReading(
            text,
            max(scores.values(), default=0.0),
            answered,
            tuple(sorted(scores.items(), key=lambda pair: -pair[1])),
        )
        for text, answered, scores in parts
    )
    return dataclasses.replace(found, reading=reading)


def test_each_answered_part_gets_its_likeliest_sentence_in_the_questions_order() -> None:
    asked = evidence("How much is membership, and when do you open?", HOURS_AND_PRICE)
    found = read(
        asked,
        ("How much is membership?", True, {3: 0.91, 4: 0.40, 1: 0.02}),
        ("When do you open?", True, {1: 0.83, 2: 0.55}),
    )
    assert drafts(found) == [
        CitedSentence("Membership costs forty euros a year.", (3,)),
        CitedSentence(" The shop opens at nine.", (1,)),
    ]


def test_a_part_the_reader_found_unanswered_gets_no_sentence_and_is_said_unanswered() -> None:
    asked = evidence("Who founded the shop, and how much is membership?", HOURS_AND_PRICE)
    found = read(
        asked,
        ("Who founded the shop?", False, {1: 0.12, 3: 0.05}),
        ("How much is membership?", True, {3: 0.91}),
    )
    assert drafts(found) == [
        CitedSentence("Membership costs forty euros a year.", (3,)),
        Remark(" The available sources do not answer “Who founded the shop?”"),
    ]


def test_in_chinese_an_unanswered_part_is_said_so_in_chinese_with_no_space() -> None:
    asked = evidence(
        "茶园几点开门？另外，谁创办了茶园？",
        [Doc(["茶园每天上午八点开门。", "门票二十元。"], filename="茶园.txt")],
        language="zh",
    )
    found = read(
        asked,
        ("茶园几点开门？", True, {1: 0.9}),
        ("谁创办了茶园？", False, {2: 0.1}),
    )
    assert drafts(found) == [
        CitedSentence("茶园每天上午八点开门。", (1,)),
        Remark("现有资料无法回答“谁创办了茶园？”"),
    ]


def test_one_sentence_answering_two_parts_is_said_once() -> None:
    asked = evidence("What does membership cost and how much is membership?", HOURS_AND_PRICE)
    found = read(
        asked,
        ("What does membership cost?", True, {3: 0.9}),
        ("How much is membership?", True, {3: 0.7, 4: 0.6}),
    )
    assert drafts(found) == [CitedSentence("Membership costs forty euros a year.", (3,))]


def test_no_part_answered_is_declined_whatever_word_overlap_says() -> None:
    asked = evidence("When does the shop open?", HOURS_AND_PRICE)
    assert drafts(read(asked, ("When does the shop open?", False, {1: 0.45}))) == [Declined()]


def test_the_reader_cannot_take_an_answer_past_the_agents_sources() -> None:
    asked = evidence("How much is membership, and when do you open?", HOURS_AND_PRICE)
    found = read(
        asked,
        ("How much is membership?", True, {3: 0.91}),
        ("When do you open?", True, {1: 0.83}),
    )
    assert drafts(found, max_sources=1) == [
        CitedSentence("Membership costs forty euros a year.", (3,))
    ]


def test_a_second_passage_the_reader_finds_likely_too_may_follow_as_a_second_hop() -> None:
    hops = ExtractiveGenerator(Weights(second_hop=0.5))  # off by default: see Weights
    asked = evidence("What does membership cost after the workshop opens?", HOURS_AND_PRICE)
    found = read(
        asked,
        (
            "What does membership cost after the workshop opens?",
            True,
            {3: 0.9, 4: 0.8, 1: 0.6, 2: 0.55},
        ),
    )
    # Students pay fifteen (0.8) is of the best one's passage: the hop is the other passage's.
    assert drafts(found, hops) == [
        CitedSentence("Membership costs forty euros a year.", (3,)),
        CitedSentence(" The shop opens at nine.", (1,)),
    ]
    assert drafts(found) == [CitedSentence("Membership costs forty euros a year.", (3,))]
    unlikely = read(
        asked, ("What does membership cost after the workshop opens?", True, {3: 0.9, 1: 0.45})
    )
    assert drafts(unlikely, hops) == [CitedSentence("Membership costs forty euros a year.", (3,))]


def test_word_overlaps_choice_answers_a_part_and_else_the_readers_likeliest() -> None:
    asked = evidence("When does the shop open?", HOURS_AND_PRICE)
    overruled = read(asked, ("When does the shop open?", True, {3: 0.9, 1: 0.2}))
    assert drafts(overruled) == [CitedSentence("The shop opens at nine.", (1,))]
    unworded = evidence("Who runs it?", HOURS_AND_PRICE)  # no word of it in the evidence
    sure = read(unworded, ("Who runs it?", True, {3: 0.6, 1: 0.2}))
    assert drafts(sure) == [CitedSentence("Membership costs forty euros a year.", (3,))]
    # However unsure of its likeliest, the reader found the part answered: declining it was
    # the decline rule's to do, not the choice's.
    doubted = read(unworded, ("Who runs it?", True, {3: 0.3, 1: 0.2}))
    assert drafts(doubted) == [CitedSentence("Membership costs forty euros a year.", (3,))]
    declined = read(unworded, ("Who runs it?", False, {3: 0.3, 1: 0.2}))
    assert drafts(declined) == [Declined()]


def test_the_readers_card_may_choose_its_likeliest_over_word_overlaps_or_both() -> None:
    asked = evidence("When does the shop open?", HOURS_AND_PRICE)
    found = read(asked, ("When does the shop open?", True, {2: 0.7, 1: 0.2}))
    assert drafts(found) == [CitedSentence("The shop opens at nine.", (1,))]  # word overlap's
    first = dataclasses.replace(found, choice=SentenceChoice(reader_first=0.65))
    assert drafts(first) == [CitedSentence("It closes at six.", (2,))]
    both = dataclasses.replace(found, choice=SentenceChoice(both=0.65))
    assert drafts(both) == [
        CitedSentence("The shop opens at nine.", (1,)),
        CitedSentence(" It closes at six.", (2,)),
    ]
    unsure = dataclasses.replace(found, choice=SentenceChoice(reader_first=0.75, both=0.75))
    assert drafts(unsure) == [CitedSentence("The shop opens at nine.", (1,))]


def disagreeing(
    question: str, first: Doc, second: Doc, *, language: str, decided: bool
) -> Evidence:
    """Evidence of two one-sentence sources, read as one part that they answer differently."""
    found = evidence(question, [first, second], language=language)
    conflict = Conflict(preferred=2, other=1, values=("", ""), decided=decided)
    part = PartReading(question, 0.9, True, ((1, 0.6), (2, 0.5)), conflict)
    return dataclasses.replace(found, reading=(part,))


def test_sources_that_disagree_are_both_stated_the_preferred_first_each_cited() -> None:
    found = disagreeing(
        "How long do refunds take?",
        Doc(["Refunds take 14 days."], filename="leaflet.md", effective_date=dt.date(2023, 3, 1)),
        Doc(["Refunds take 30 days."], filename="handbook.md", title="Staff handbook"),
        language="en",
        decided=True,
    )
    assert drafts(found) == [
        Remark("The sources disagree. According to Staff handbook:"),
        CitedSentence(" Refunds take 30 days.", (2,)),
        Remark(" According to leaflet.md (2023-03-01):"),
        CitedSentence(" Refunds take 14 days.", (1,)),
    ]


def test_in_chinese_with_no_date_to_choose_by_the_answer_says_it_cannot_tell() -> None:
    found = disagreeing(
        "退款需要多久？",
        Doc(["退款需要14天。"], filename="传单.txt"),
        Doc(["退款需要30天。"], filename="手册.txt"),
        language="zh",
        decided=False,
    )
    assert "".join(d.text for d in drafts(found) if not isinstance(d, Declined)) == (
        "资料之间存在分歧，且没有哪一份的日期更晚。据手册.txt：退款需要30天。据传单.txt：退款需要14天。"
    )


@pytest.mark.parametrize("read", [True, False], ids=["read", "word overlap"])
def test_of_two_dated_sources_saying_the_same_sentence_the_current_one_is_cited(
    read: bool,
) -> None:
    said = "Gift cards never expire."
    older = Doc([said], filename="leaflet-2023.md", effective_date=dt.date(2023, 3, 1))
    current = Doc([said], filename="handbook-2025.md", effective_date=dt.date(2025, 1, 1))
    undated = Doc([said], filename="notes.md")
    question = "Do gift cards expire?"
    found = evidence(question, [older, current, undated])
    if read:  # the reader likes the older copy best
        found = dataclasses.replace(
            found, reading=(PartReading(question, 0.9, True, ((1, 0.7), (2, 0.6))),)
        )
    assert drafts(found) == [CitedSentence(said, (2,))]
