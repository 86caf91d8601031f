"""The default verifier: a cited range supports a claim when it holds the claim's content."""

from __future__ import annotations

import pytest

from citewell.cite.verify import LexicalVerifier

SOURCE = "Refunds are paid within thirty days of the request."


@pytest.mark.parametrize(
    ("claim", "support"),
    [
        (SOURCE, 1.0),
        ("Refunds are paid within 30 days of the request.", 1.0),
        ("Refunds are paid within ninety days of the request.", 0.0),
        ("Refunds are paid within 60 days.", 0.0),
        ("Refunds take thirty days.", 0.75),  # 'take' is not in the source
        ("Dragons guard the storeroom.", 0.0),
    ],
)
def test_support_is_the_share_of_the_claims_content_in_the_cited_text(
    claim: str, support: float
) -> None:
    assert LexicalVerifier().support(claim, [SOURCE], language="en") == support


def test_several_cited_ranges_support_a_claim_together() -> None:
    cited = ["The shop opens at nine.", "It closes at six."]
    verifier = LexicalVerifier()
    assert verifier.support("The shop opens at nine and closes at six.", cited, language="en") == 1
    assert verifier.support("The shop closes at six.", [], language="en") == 0


def test_chinese_claims_are_matched_by_segmented_words() -> None:
    verifier = LexicalVerifier()
    source = "退款在申请后三十天内支付。"
    assert verifier.support("退款在三十天内支付。", [source], language="zh") == 1.0
    assert verifier.support("恐龙守护着仓库。", [source], language="zh") == 0.0
