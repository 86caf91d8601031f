"""What kind of answer a question asks for, and whether a sentence holds one.

A "when" question is answered by a sentence with a date in it, a "how many" question by one with
a number; a sentence that repeats the question's words without the expected kind of answer is a
weaker answer. Both checks are cheap patterns over the raw text, in English, Spanish and Chinese.
They are evidence, not proof: the extractive generator weighs them against its other signals.
"""

from __future__ import annotations

import re
from enum import Enum

from citewell.language import is_cjk

__all__ = ["AnswerType", "carries", "expected_type", "without_type_phrase"]


class AnswerType(Enum):
    PERSON = "person"
    DATE = "date"
    NUMBER = "number"
    PLACE = "place"


# Questions -----------------------------------------------------------------------------------
# Order matters: the first pattern that matches decides ("how many years" is a number, "what
# year" a date, "who" a person even in "who was born where").
_QUESTION_PATTERNS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    (
        AnswerType.DATE,
        re.compile(
            r"^\W*(?:since |until |by )?when\b|\bwhen (?:did|was|were|is|does|do|had|has|will)\b"
            r"|\b(?:what|which) (?:year|years|date|day|month|century|decade|era|time period)\b"
            r"|¿?\s*cu[aá]ndo\b|\bqu[eé] (?:a[nñ]o|fecha|d[ií]a|mes|siglo|d[eé]cada|[eé]poca)\b"
            r"|什么时候|何时|哪一?年|哪个?世纪|哪个?年代|哪一?天|什么时间|哪个月|几月|几号|什么日子",
            re.IGNORECASE,
        ),
    ),
    (
        AnswerType.NUMBER,
        re.compile(
            r"\bhow (?:many|much|long|old|far|large|big|tall|high|often|fast|wide|deep)\b"
            r"|\bwhat (?:percentage|percent|proportion|number|amount|fraction)\b"
            r"|\bcu[aá]nt[oa]s?\b|\bqu[eé] (?:porcentaje|cantidad|n[uú]mero|proporci[oó]n)\b"
            r"|多少|多大|多长|多久|多高|多远|几",
            re.IGNORECASE,
        ),
    ),
    (
        AnswerType.PERSON,
        re.compile(
            r"^\W*who(?:m|se)?\b|^\W*by whom\b|¿?\s*(?:de |a |por |con )?qui[eé]n(?:es)?\b|谁",
            re.IGNORECASE,
        ),
    ),
    (
        AnswerType.PLACE,
        re.compile(
            r"^\W*(?:from |to )?where\b|\bwhere (?:did|was|were|is|does|do|are)\b"
            r"|\b(?:what|which) (?:city|country|state|region|continent|town|river|island|county)\b"
            r"|¿?\s*(?:de |a |en |por )?(?:a)?d[oó]nde\b"
            r"|\bqu[eé] (?:ciudad|pa[ií]s|estado|regi[oó]n|continente|r[ií]o|isla)\b"
            r"|哪里|哪儿|在哪|什么地方|何处|哪个国家|哪个城市|哪座城市|哪个地区|哪个州",
            re.IGNORECASE,
        ),
    ),
)


def expected_type(question: str) -> AnswerType | None:
    """The kind of answer the question asks for, or None when it asks for something else."""
    for kind, pattern in _QUESTION_PATTERNS:
        if pattern.search(question):
            return kind
    return None


_TYPE_PHRASE = re.compile(
    r"\bhow (?:many|much|long|old|far|large|big|tall|high|often|fast|wide|deep|soon|early|late)\b"
    r"|\bcu[aá]nt[oa]s? tiempo\b|\bqu[eé] tan (?:lejos|grande|alto|alta|largo|larga|viejo|vieja)\b"
    r"|\bqu[eé] edad\b"
    r"|多长时间|多少时间|多久|多大|多高|多远|多长|多少|多深|多重|多宽",
    re.IGNORECASE,
)
"""The words of a question that name the kind of answer, not its subject: "long" in "how long"
is no more to be found in the answer ("within thirty days") than "how" is."""


def without_type_phrase(question: str) -> str:
    """The question without its answer-type phrase ("How long do refunds take?" → "do refunds
    take?")."""
    return " ".join(_TYPE_PHRASE.sub(" ", question).split())


# Sentences -----------------------------------------------------------------------------------
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre"
    "|noviembre|diciembre"
)
_DATE = re.compile(
    rf"\b(?:1\d{{3}}|20\d{{2}})s?\b|\b(?:{_MONTHS})\b|\b\d+(?:st|nd|rd|th) century\b|\bsiglo\b"
    r"|\bcentury\b|\d+\s*(?:年|月|日|世纪)|[一二三四五六七八九十]+(?:世纪|月)"
    r"|\b(?:[01]?\d|2[0-3]):[0-5]\d\b|\b(?:1[0-2]|0?[1-9])\s?[ap]\.?m\b"
    r"|(?:上午|下午|晚上|早上|凌晨|中午)\s*\d{1,2}\s*[点时]|\d{1,2}\s*[点时]\s*\d{1,2}\s*分|\d{1,2}\s*点钟",
    re.IGNORECASE,
)
"""A date, or a time of day: "When is the workshop open?" is answered by "Open: 17:00"."""
_NUMBER_WORDS = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty"
    r"|hundred|hundreds|thousand|thousands|million|millions|billion|dozen|half|percent"
    r"|dos|tres|cuatro|cinco|seis|siete|ocho|nueve|diez|once|doce|veinte|treinta|cuarenta"
    r"|cincuenta|cien|cientos|mil|miles|mill[oó]n|millones|mitad|por ciento)\b"
    r"|[两二三四五六七八九十百千万亿]+(?:个|名|人|次|种|座|所|项|位|条|家|倍|年|岁|公里|米|%)"
    r"|[零〇一二两三四五六七八九]*[十百千万亿][零〇一二两三四五六七八九十百千万亿]*",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"(?<![\w'])[A-ZÁÉÍÓÚÑÜ][\w'-]+")
_PLACE_ZH = re.compile(r"[\u4e00-\u9fff]{1,6}(?:省|市|县|州|国|城|镇|区|河|江|山|岛|湖|洲|港)")
_FOREIGN_NAME_ZH = re.compile(r"[\u4e00-\u9fff]+·[\u4e00-\u9fff]+")


def carries(sentence: str, kind: AnswerType, question: str) -> bool:
    """Whether the sentence holds an answer of this kind that the question does not already hold.

    A year the question names does not answer it ("What happened in 1905?"), nor does a name it
    names.
    """
    if kind is AnswerType.DATE:
        return _new_match(_DATE, sentence, question)
    if kind is AnswerType.NUMBER:
        return _new_match(_DIGITS, sentence, question) or _new_match(
            _NUMBER_WORDS, sentence, question
        )
    if _is_chinese(sentence):
        pattern = _FOREIGN_NAME_ZH if kind is AnswerType.PERSON else _PLACE_ZH
        return _new_match(pattern, sentence, question)
    return _new_name(sentence, question)


def _new_match(pattern: re.Pattern[str], sentence: str, question: str) -> bool:
    asked = {m.group().lower() for m in pattern.finditer(question)}
    return any(m.group().lower() not in asked for m in pattern.finditer(sentence))


def _new_name(sentence: str, question: str) -> bool:
    """A capitalised word, not opening the sentence and absent from the question.

    Names of people and places look alike in running text; the question's own names are not
    the answer, and the first word of a sentence is capitalised anyway.
    """
    asked = {m.group().lower() for m in _CAPITALISED.finditer(question)}
    body = sentence.lstrip("\"'“‘¿¡([ ")
    return any(
        m.start() > 0 and m.group().lower() not in asked for m in _CAPITALISED.finditer(body)
    )


def _is_chinese(text: str) -> bool:
    han = sum(1 for ch in text[:200] if is_cjk(ch))
    return han * 2 > len(text[:200])
