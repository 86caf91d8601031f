"""The form check reads a body in whatever chunks it arrives in: a character split between two
chunks is text, a file's bytes are never read as text, and the first bad part is the one named."""

from __future__ import annotations

import pytest

from citewell.api.form_text import BadFormText, FormTextCheck

BOUNDARY = "xyz"
CONTENT_TYPE = f"multipart/form-data; boundary={BOUNDARY}".encode()


def form(*parts: tuple[bytes, bytes]) -> bytes:
    head = f"--{BOUNDARY}\r\nContent-Disposition: form-data; ".encode()
    body = b"".join(
        head + disposition + b"\r\n\r\n" + data + b"\r\n" for disposition, data in parts
    )
    return body + f"--{BOUNDARY}--\r\n".encode()


def checked(body: bytes, size: int, content_type: bytes = CONTENT_TYPE) -> BadFormText | None:
    check = FormTextCheck(content_type)
    found = None
    for start in range(0, len(body), size):
        found = check.feed(body[start : start + size], last=start + size >= len(body))
    return found


VALID = form(
    (b'name="file"; filename="caf\xc3\xa9.bin"', bytes(range(256)) * 4),
    (b'name="metadata"', '{"部门": "客服", "note": "🙂"}'.encode()),
)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(VALID)])
def test_valid_text_in_any_chunking_passes_and_file_bytes_are_not_text(size: int) -> None:
    assert checked(VALID, size) is None


@pytest.mark.parametrize("size", [1, 5, 4096])
def test_the_first_bad_field_is_named_in_any_chunking(size: int) -> None:
    body = form(
        (b'name="acl"', b'["hr"]'),
        (b'name="metadata"', b'{"k": "\xed\xa0\x80"}'),
        (b'name="purpose"', b"\xff"),
    )
    assert checked(body, size) == BadFormText("metadata", "is not valid UTF-8")


def test_a_field_cut_inside_a_character_is_bad() -> None:
    found = checked(form((b'name="purpose"', b"assistants\xe4\xb8")), 3)
    assert found is not None and found.field == "purpose" and "ends inside" in found.problem


def test_a_declared_charset_other_than_utf8_is_refused() -> None:
    latin = b"multipart/form-data; boundary=xyz; charset=latin-1"
    assert checked(form((b'name="k"', b"v")), 64, latin) == BadFormText(
        "content-type", "declares the charset 'latin-1'"
    )
    utf8 = b"multipart/form-data; boundary=xyz; charset=UTF-8"
    assert checked(form((b'name="k"', b"v")), 64, utf8) is None


def test_urlencoded_pairs_split_across_chunks() -> None:
    urlencoded = b"application/x-www-form-urlencoded"
    assert checked(b"purpose=caf%C3%A9&x=%E4%B8%AD", 4, urlencoded) is None
    found = checked(b"a=1&purpose=assistants%ED%A0%80&b=2", 4, urlencoded)
    assert found == BadFormText("purpose", "is not valid UTF-8")


def test_a_body_the_parser_cannot_read_is_left_to_the_app() -> None:
    assert checked(b"--nope\r\n\r\n garbage", 4) is None
