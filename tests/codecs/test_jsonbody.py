"""A large reply document is parsed in memory proportional to its size, under orjson's rules."""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from agentcore._codecs.jsonbody import LARGE_DOCUMENT, loads

PAD = b" " * (LARGE_DOCUMENT + 1)

DOCUMENTS = [
    b'{"a": [1, -2, 3.5, true, false, null, "x"], "b": {"c": "d"}}',
    b"18446744073709551615",  # the largest unsigned 64-bit integer stays an int
    b"18446744073709551616",  # one more becomes a float
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"1.5e308",
    b"-0.0",
    b"1e400",  # overflows a double: refused
    b"1" + b"0" * 400,
    b"1" + b"0" * 5000,
    b"NaN",
    b"-Infinity",
    b'"\\ud83d\\ude00"',  # a surrogate pair is one character
    b'["\\ud83d"]',  # a lone surrogate is refused
    b'{"\\udc00": 1}',
    b'"\\\\ud800"',  # an escaped backslash, not a surrogate
    b'"\x7f"',
    b'"\x1f"',  # a control character in a string: refused
    b"\xef\xbb\xbf[1]",  # a byte-order mark: refused
    b"\xff",  # not UTF-8: refused
    b"[1,]",
    b"[1] x",
    b'{"a": 1, "a": 2}',
    b"[" * 5000 + b"]" * 5000,
]


def _outcome(document: bytes | str) -> tuple[str, object]:
    try:
        return ("value", loads(document))
    except orjson.JSONDecodeError:
        return ("refused", None)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_large_document_reads_as_orjson_reads_it(document: bytes) -> None:
    try:
        expected: tuple[str, object] = ("value", orjson.loads(document))
    except orjson.JSONDecodeError:
        expected = ("refused", None)
    large = document + PAD
    assert len(large) > LARGE_DOCUMENT
    assert _outcome(large) == expected
    assert _outcome(bytearray(large)) == expected
    assert _outcome(memoryview(large)) == expected
    assert _outcome(large.decode("utf-8", "replace")) == expected


def test_a_large_document_costs_its_text_and_its_values() -> None:
    document = orjson.dumps({"content": "a JSON reply " * 200_000})
    tracemalloc.start()
    try:
        value = loads(document)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert value == orjson.loads(document)
    # The text decoded from the bytes plus the parsed string; orjson alone would reserve
    # about twelve times the document.
    assert peak <= 2.2 * len(document)
