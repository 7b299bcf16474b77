"""The error table: one row per ErrorKind, and every pure layer decides by its kind's row.

Each consumer is checked against the table for every kind, and by flipping a row in a
test-local copy of the table (``monkeypatch.setitem`` on the rows the table shows): a layer
that kept its own set of kinds would not follow the flip.
"""

from __future__ import annotations

import ast
import inspect
import itertools
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentcore import ConfigError, ErrorKind, FallbackPolicy, ModelError, RetryPolicy
from agentcore._codecs import bedrock, classify
from agentcore._codecs.classify import (
    classify_status,
    classify_stream_error,
    connection_error,
    deadline_error,
    protocol_error,
    transport_failure,
    truncated_stream,
    unusable_request,
)
from agentcore._core import error_policy
from agentcore._core.error_policy import ERROR_POLICY, KindPolicy, kinds_where, policy_of
from agentcore._core.fallback import DEFAULT_FALLBACK_ON
from agentcore._core.rejection import repeated_rejection
from agentcore.testing import strategies as acst
from agentcore.wire import TransportError, TransportErrorKind

ALL_KINDS = list(ErrorKind)
COLUMNS = [field.name for field in attrs.fields(KindPolicy)]


def flipped(kind: ErrorKind, column: str) -> KindPolicy:
    row = policy_of(kind)
    return attrs.evolve(row, **{column: not getattr(row, column)})


# ----------------------------------------------------------------------------- the table


def test_every_error_kind_has_exactly_one_row() -> None:
    source = inspect.getsource(error_policy)
    rows = next(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == "_ROWS"
    )
    assert isinstance(rows, ast.Dict)
    written = [ast.unparse(key) for key in rows.keys if key is not None]
    assert sorted(written) == sorted(f"ErrorKind.{kind.name}" for kind in ErrorKind)
    assert set(ERROR_POLICY) == set(ErrorKind)


def test_the_table_cannot_be_changed_through_its_public_name() -> None:
    with pytest.raises(TypeError):
        ERROR_POLICY[ErrorKind.SERVER] = KindPolicy()  # type: ignore[index]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_kind_that_falls_over_by_default_may_fall_over(kind: ErrorKind) -> None:
    row = policy_of(kind)
    assert row.may_fall_over or not row.falls_over


@pytest.mark.parametrize("column", COLUMNS)
def test_kinds_where_lists_the_rows_with_the_column_set(column: str) -> None:
    expected = {kind for kind in ErrorKind if getattr(ERROR_POLICY[kind], column)}
    assert kinds_where(column) == expected  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- classifier


@pytest.mark.parametrize("status", range(400, 600))
def test_an_http_error_is_retryable_as_its_kinds_row_says(status: int) -> None:
    error = classify_status(status, ())
    assert error.retryable is policy_of(error.kind).retryable


@pytest.mark.parametrize("status", [100, 204, 301, 302, 307, 399])
def test_a_status_outside_the_error_range_is_a_final_protocol_error(status: int) -> None:
    error = classify_status(status, ())
    assert (error.kind, error.retryable) == (ErrorKind.PROTOCOL, False)


@pytest.mark.parametrize("error_type", ["overloaded_error", "server_error", "quota", "zzz"])
def test_an_in_stream_error_is_retryable_as_its_kinds_row_says(error_type: str) -> None:
    error = classify_stream_error({"error": {"type": error_type, "message": "m"}})
    assert error.retryable is policy_of(error.kind).retryable


@pytest.mark.parametrize("kind", list(TransportErrorKind))
def test_a_transport_failure_is_retryable_as_its_kinds_row_says(kind: TransportErrorKind) -> None:
    error = transport_failure(TransportError(kind, "x"))
    assert error.retryable is policy_of(error.kind).retryable


def test_the_edge_constructors_take_retryability_from_the_row() -> None:
    made = [
        connection_error("x"),
        truncated_stream("x"),
        deadline_error(),
        protocol_error("x", 200),
        unusable_request("x"),
    ]
    for error in made:
        assert error.retryable is policy_of(error.kind).retryable, error


BEDROCK_EXCEPTIONS = {
    "throttlingException": ErrorKind.RATE_LIMITED,
    "ServiceQuotaExceededException": ErrorKind.RATE_LIMITED,
    "serviceUnavailableException": ErrorKind.OVERLOADED,
    "modelNotReadyException": ErrorKind.OVERLOADED,
    "internalServerException": ErrorKind.SERVER,
    "modelStreamErrorException": ErrorKind.SERVER,
    "modelTimeoutException": ErrorKind.TIMEOUT,
    "validationException": ErrorKind.BAD_REQUEST,
    "modelErrorException": ErrorKind.BAD_REQUEST,
    "accessDeniedException": ErrorKind.AUTH,
    "resourceNotFoundException": ErrorKind.NOT_FOUND,
    "unknownException": ErrorKind.SERVER,
}


@pytest.mark.parametrize(("name", "kind"), BEDROCK_EXCEPTIONS.items())
def test_a_bedrock_exception_is_classified_by_the_one_table(name: str, kind: ErrorKind) -> None:
    error = bedrock._exception(name, b'{"message": "m"}')
    assert (error.kind, error.code, error.message) == (kind, name, "m")
    assert error.retryable is policy_of(error.kind).retryable
    # the same type in any other server's error event means the same
    assert classify_stream_error({"error": {"type": name, "message": "m"}}) == error


def test_the_classifier_follows_a_flipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        error_policy._ROWS, ErrorKind.SERVER, flipped(ErrorKind.SERVER, "retryable")
    )
    monkeypatch.setitem(
        error_policy._ROWS, ErrorKind.BAD_REQUEST, flipped(ErrorKind.BAD_REQUEST, "retryable")
    )
    assert not classify_status(500, ()).retryable
    assert classify_status(400, ()).retryable
    assert not classify.classify_stream_error({"error": {"type": "server_error"}}).retryable
    closed = transport_failure(TransportError(TransportErrorKind.REFUSED, "x"))
    assert closed.kind is ErrorKind.BAD_REQUEST and closed.retryable


def test_x_should_retry_still_overrides_the_row() -> None:
    assert not classify_status(500, (("x-should-retry", "false"),)).retryable
    assert classify_status(400, (("x-should-retry", "true"),)).retryable


# ----------------------------------------------------------------------------- retry policy


def _delay(policy: RetryPolicy, error: ModelError, previous: ModelError | None) -> float | None:
    return policy.delay(attempt=1, error=error, elapsed=0.0, random=lambda: 0.5, previous=previous)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_the_repeat_rule_applies_to_the_kinds_its_row_names(kind: ErrorKind) -> None:
    error = ModelError(kind, "same", status=500, retryable=True)
    repeated = policy_of(kind).final_when_repeated
    assert repeated_rejection(error, error) is repeated
    assert (_delay(RetryPolicy(), error, error) is None) is repeated
    assert _delay(RetryPolicy(stop_on_repeat=False), error, error) is not None


def test_the_repeat_rule_follows_a_flipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    timeout = ModelError(ErrorKind.TIMEOUT, "same", status=408, retryable=True)
    server = ModelError(ErrorKind.SERVER, "same", status=500, retryable=True)
    for kind in (ErrorKind.TIMEOUT, ErrorKind.SERVER):
        monkeypatch.setitem(error_policy._ROWS, kind, flipped(kind, "final_when_repeated"))
    assert _delay(RetryPolicy(), timeout, timeout) is None
    assert _delay(RetryPolicy(), server, server) is not None


def test_the_repeat_rule_needs_a_response_and_the_same_words() -> None:
    first = ModelError(ErrorKind.SERVER, "boom", status=500, retryable=True)
    no_response = ModelError(ErrorKind.SERVER, "boom", retryable=True)
    assert not repeated_rejection(no_response, no_response)
    assert not repeated_rejection(None, first)
    assert not repeated_rejection(first, attrs.evolve(first, code="other"))


def test_without_the_repeat_rule_max_attempts_alone_ends_a_repeating_error() -> None:
    policy = RetryPolicy(max_attempts=30, base_delay=0.0, stop_on_repeat=False)
    error = ModelError(ErrorKind.SERVER, "boom", status=500, retryable=True)
    waits = [
        policy.delay(attempt=n, error=error, elapsed=0.0, random=lambda: 0.5, previous=error)
        for n in range(1, 31)
    ]
    assert waits == [0.0] * 29 + [None]


# ----------------------------------------------------------------------------- fallback


def test_fallbacks_default_is_the_rows_that_fall_over() -> None:
    expected = {kind for kind in ErrorKind if ERROR_POLICY[kind].falls_over}
    assert expected == DEFAULT_FALLBACK_ON
    assert FallbackPolicy().on == expected


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_fallback_accepts_a_kind_only_if_its_row_allows_it(kind: ErrorKind) -> None:
    if policy_of(kind).may_fall_over:
        assert FallbackPolicy([kind]).on == {kind}
    else:
        with pytest.raises(ConfigError, match=kind.value):
            FallbackPolicy([kind])


def test_fallback_follows_a_flipped_row(monkeypatch: pytest.MonkeyPatch) -> None:
    for kind, column in [
        (ErrorKind.CONFLICT, "falls_over"),
        (ErrorKind.SERVER, "falls_over"),
        (ErrorKind.AUTH, "may_fall_over"),
    ]:
        monkeypatch.setitem(error_policy._ROWS, kind, flipped(kind, column))
    on = FallbackPolicy().on
    assert ErrorKind.CONFLICT in on and ErrorKind.SERVER not in on
    with pytest.raises(ConfigError, match="auth"):
        FallbackPolicy([ErrorKind.AUTH])


# ----------------------------------------------------------------------------- testing kit


@given(st.data())
def test_the_strategies_draw_retryability_from_the_row(data: st.DataObject) -> None:
    error = data.draw(acst.model_errors())
    assert error.retryable is policy_of(error.kind).retryable
    if not error.retryable:
        assert error.retry_after is None


@given(st.data())
def test_the_strategies_follow_a_flipped_row(data: st.DataObject) -> None:
    with pytest.MonkeyPatch.context() as patch:
        row = flipped(ErrorKind.AUTH, "retryable")
        patch.setitem(error_policy._ROWS, ErrorKind.AUTH, row)
        error = data.draw(acst.model_errors(kinds=[ErrorKind.AUTH]))
    assert error.retryable


# ----------------------------------------------------------------------------- the docs


def test_the_table_in_the_driver_docs_is_the_error_table() -> None:
    text = (Path(__file__).parents[2] / "docs" / "driver.md").read_text()
    after = text[text.index("\n| kind | retried |") + 1 :].splitlines()
    lines = list(itertools.takewhile(lambda line: line.startswith("|"), after))
    header = lines[0]
    names = [
        cell.strip().replace(" ", "_").replace("-", "_") for cell in header.strip("|").split("|")
    ][1:]
    columns = {"retried": "retryable"}
    assert sorted(columns.get(name, name) for name in names) == sorted(COLUMNS)
    documented: dict[ErrorKind, KindPolicy] = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if set(cells[0]) <= {"-"}:
            continue
        kind = ErrorKind[cells[0].strip("`")]
        assert kind not in documented, kind
        flags = {columns.get(n, n): cell == "yes" for n, cell in zip(names, cells[1:], strict=True)}
        documented[kind] = KindPolicy(**flags)
    assert documented == dict(ERROR_POLICY)
