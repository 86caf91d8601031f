"""Citations you can see on the page: boxes of cited characters, and pictures of pages.

A real answer over HTTP cites a sentence of multi_page.pdf printed on three lines of page 1; its
boxes are held against PDFium's own boxes of those characters, and its highlight picture against
the plain picture of the page.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from citewell.api import create_app
from citewell.config import RetrieveSettings, Settings
from citewell.imaging import CROP_MARGIN
from citewell.links import LinkSigner
from citewell.model import Box
from tests.api.conftest import ADMIN, assert_error, auth, make_key, search, upload
from tests.cite.pdf_glyphs import fit, page_glyphs, split_glyphs

QUESTION = "Who patented the typewriter in 1868?"
SENTENCE = (
    "Patented in 1868 by Christopher Latham Sholes, the typewriter \nrevolutionized written "
    "communication by enabling people to produce legible, professional \ndocuments more "
    "efficiently than handwriting."
)
NOTE = b"The workshop closes at six on Fridays."
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def pdf(evaldata: Path) -> bytes:
    return (evaldata / "documents" / "pdf_text" / "multi_page.pdf").read_bytes()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, pdf: bytes) -> Iterator[TestClient]:
    """An open server holding the PDF (bucket 'essays') and a note (bucket 'notes')."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("pages") / "data",
        retrieve=RetrieveSettings(embedder="use", threads=1),
    )
    with TestClient(create_app(settings)) as client:
        for bucket, filename, data in (("essays", "multi_page.pdf", pdf), ("notes", "n.txt", NOTE)):
            assert client.post("/v1/buckets", json={"slug": bucket}).status_code == 201
            assert upload(client, bucket, filename, data).status_code == 201
        yield client


def ask(client: TestClient, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = client.post(
        "/v1/responses",
        json={
            "input": QUESTION,
            "tools": [{"type": "file_search", "vector_store_ids": ["essays"]}],
            "include": ["file_search_call.results"],
        },
        headers=headers,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture(scope="module")
def answer(served: TestClient) -> dict[str, Any]:
    return ask(served)


@pytest.fixture(scope="module")
def citation(answer: dict[str, Any]) -> dict[str, Any]:
    """The file_citation of the sentence that answers."""
    annotations = answer["output"][-1]["content"][0]["annotations"]
    cited: dict[str, Any] = next(a for a in annotations if a["cited_text"] == SENTENCE)
    return cited


def picture(client: TestClient, url: str, **params: Any) -> Image.Image:
    response = client.get(url, params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert response.content.startswith(PNG)
    return Image.open(io.BytesIO(response.content)).convert("RGB")


def touched(
    boxes: list[dict[str, float]], scale: float, shape: tuple[int, ...], origin: tuple[int, int]
) -> np.ndarray:
    """The pixels the boxes touch on a picture of ``shape`` whose top left corner is pixel
    ``origin`` of the page laid out at ``scale`` pixels per point (pixel x covers [x, x + 1))."""
    mask = np.zeros(shape[:2], dtype=bool)
    for box in boxes:
        x0, x1 = (box[k] * scale - origin[0] for k in ("x0", "x1"))
        y0, y1 = (box[k] * scale - origin[1] for k in ("y0", "y1"))
        mask[math.floor(y0) : math.ceil(y1), math.floor(x0) : math.ceil(x1)] = True
    return mask


def yellowed(image: np.ndarray) -> np.ndarray:
    """Pixels tinted yellow: the page is black on white (and grey where anti-aliased)."""
    red, blue = image[:, :, 0].astype(int), image[:, :, 2].astype(int)
    return blue < red - 40


def test_every_box_of_a_cited_sentence_encloses_exactly_its_characters(
    citation: dict[str, Any], pdf: bytes
) -> None:
    assert citation["page_number"] == 1
    [region] = citation["regions"]
    assert (region["page_number"], region["page_label"]) == (1, None)
    assert (region["page_width"], region["page_height"]) == (595.2, 841.92)
    boxes = region["boxes"]
    assert len(boxes) == 3  # the sentence is printed on three lines: one box each
    cited, others = split_glyphs(page_glyphs(pdf, 1), SENTENCE)
    corners = tuple(Box(x0=b["x0"], y0=b["y0"], x1=b["x1"], y1=b["y1"]) for b in boxes)
    measured = fit(corners, cited, others)
    assert measured.glyphs == 172
    # Each edge is its glyphs' outermost edge, rounded outwards to 0.01 pt.
    assert measured.edge_error <= 0.0101
    # No glyph outside the sentence lies in a box, even in part.
    assert measured.overlap == 0.0
    for box in boxes:
        for edge, size in (("x0", 595.2), ("y0", 841.92), ("x1", 595.2), ("y1", 841.92)):
            assert box[f"n{edge}"] == pytest.approx(box[edge] / size, abs=5e-6)


def test_a_highlight_tints_exactly_the_pixels_of_the_cited_boxes(
    served: TestClient, citation: dict[str, Any]
) -> None:
    [region] = citation["regions"]
    plain = np.asarray(picture(served, region["image_url"], width=600))
    highlighted = np.asarray(picture(served, region["highlight_url"], width=600))
    # The width asked for, and the page's proportions.
    assert plain.shape == highlighted.shape == (round(600 * 841.92 / 595.2), 600, 3)
    tinted = (plain != highlighted).any(axis=2)
    inside = touched(region["boxes"], 600 / 595.2, plain.shape, (0, 0))
    assert inside.sum() > 10_000
    assert np.array_equal(tinted, inside)
    assert np.array_equal(yellowed(highlighted), inside)
    # Yellow: blue falls the most, on white and on black text alike.
    assert (highlighted[inside][:, 2] < plain[inside][:, 2]).mean() > 0.99


def test_a_cropped_highlight_shows_the_boxes_with_a_margin(
    served: TestClient, citation: dict[str, Any]
) -> None:
    [region] = citation["regions"]
    boxes = region["boxes"]
    cropped = np.asarray(picture(served, region["highlight_url"], width=500, crop="true"))
    margin = CROP_MARGIN * 595.2
    left, right = min(b["x0"] for b in boxes) - margin, max(b["x1"] for b in boxes) + margin
    top, bottom = min(b["y0"] for b in boxes) - margin, max(b["y1"] for b in boxes) + margin
    scale = 500 / (right - left)
    assert cropped.shape == (round(bottom * scale) - round(top * scale), 500, 3)
    origin = (round(left * scale), round(top * scale))
    assert np.array_equal(yellowed(cropped), touched(boxes, scale, cropped.shape, origin))


def test_a_page_picture_comes_as_png_or_webp_at_a_bounded_width(
    served: TestClient, citation: dict[str, Any]
) -> None:
    url = citation["regions"][0]["image_url"]
    assert picture(served, url).size == (1000, round(1000 * 841.92 / 595.2))
    webp = served.get(url, params={"format": "webp", "width": 320})
    assert webp.headers["content-type"] == "image/webp"
    assert (webp.content[:4], webp.content[8:12]) == (b"RIFF", b"WEBP")
    assert Image.open(io.BytesIO(webp.content)).size == (320, round(320 * 841.92 / 595.2))
    assert webp.headers["x-content-type-options"] == "nosniff"
    assert webp.headers["cache-control"].startswith("private, max-age=")
    for params in ({"width": 63}, {"width": 2001}, {"format": "gif"}):
        assert served.get(url, params=params).status_code == 400


def test_results_link_the_page_and_the_highlight_of_their_best_sentence(
    served: TestClient, answer: dict[str, Any]
) -> None:
    best = answer["output"][0]["results"][0]["attributes"]
    assert best["excerpt"] == SENTENCE
    assert picture(served, best["media_id"], width=200).size == (200, 283)
    plain = np.asarray(picture(served, best["media_id"]))
    highlighted = np.asarray(picture(served, best["preview"]))
    assert plain.shape == highlighted.shape and not np.array_equal(plain, highlighted)
    [found] = search(served, QUESTION, ["essays"], max_results=1)["data"]
    assert found["sentences"][0]["text"] == SENTENCE
    assert np.array_equal(np.asarray(picture(served, found["highlight_url"])), highlighted)
    assert np.array_equal(np.asarray(picture(served, found["image_url"])), plain)
    # A source without pages has no pictures.
    [note] = search(served, "When does the workshop close?", ["notes"])["data"]
    assert (note["image_url"], note["highlight_url"]) == (None, None)


def test_a_link_to_a_page_the_source_lacks_opens_nothing(
    served: TestClient, citation: dict[str, Any]
) -> None:
    signer: LinkSigner = served.app.state.links  # type: ignore[attr-defined]
    url = citation["regions"][0]["image_url"]
    link = signer.verify(url.rsplit("/", 1)[1])
    beyond = signer.sign(link.model_copy(update={"page": 6}))
    assert_error(served.get(f"/v1/links/{beyond}"), 404, code="not_found")


def test_a_revoked_keys_highlight_link_is_refused(keyed: TestClient, pdf: bytes) -> None:
    keyed.post("/v1/buckets", json={"slug": "essays"}, headers=auth(ADMIN))
    keyed.headers.update(auth(ADMIN))
    assert upload(keyed, "essays", "multi_page.pdf", pdf).status_code == 201
    keyed.headers.pop("authorization")
    key = make_key(keyed, permissions=["ask"])
    annotations = ask(keyed, auth(key["secret"]))["output"][-1]["content"][0]["annotations"]
    url = next(a for a in annotations if a["regions"])["regions"][0]["highlight_url"]
    assert keyed.get(url).status_code == 200  # without a key
    assert keyed.delete(f"/v1/keys/{key['id']}", headers=auth(ADMIN)).status_code == 200
    assert_error(keyed.get(url), 403, code="key_revoked")
