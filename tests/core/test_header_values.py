"""``check_header_value``: which texts can be sent as an HTTP header value as they are."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import ConfigError
from agentcore._core.validators import check_header_value


def sendable(value: str) -> bool:
    """The rule, character by character: latin-1 only, no control character (a tab only
    inside), no leading or trailing whitespace."""
    if value != value.strip(" \t\r\n"):
        return False
    return all(ord(c) <= 0xFF and c != "\x7f" and (ord(c) >= 0x20 or c == "\t") for c in value)


# Characters around every boundary of the rule, and any character at all.
_edges = st.sampled_from("\x00\t\n\r\x1f \x20~\x7f\x80\xa0\xff\u0100\u2028\U0001f600")
values = st.text(st.one_of(_edges, st.characters()), max_size=12)


@given(values)
def test_a_value_is_refused_exactly_when_the_rule_says_so(value: str) -> None:
    if sendable(value):
        check_header_value("header 'x-a'", value)
    else:
        with pytest.raises(ConfigError, match="HTTP header"):
            check_header_value("header 'x-a'", value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("run-1/0", None),
        ("a\tb", None),
        ("caf\xe9", None),
        ("a\x7fb", "control character"),
        ("a\x00b", "control character"),
        ("a\u2028b", "outside latin-1"),
        (" key", "whitespace"),
    ],
)
def test_the_message_names_the_problem(value: str, problem: str | None) -> None:
    if problem is None:
        check_header_value("the API key", value, secret=True)
    else:
        with pytest.raises(ConfigError, match=problem):
            check_header_value("the API key", value, secret=True)
