"""Keeping secrets out of error texts: what reaches results, logs and traces.

Two passes over a text, both pure:

- every occurrence of a *configured* secret (the values of the secret headers a codec put on
  its requests, see :data:`~agentcore._codecs.http.SECRET_HEADERS`) is replaced, in full and
  with surrounding white space stripped (a key read from a file often ends in a newline, and an
  error text may quote it with or without it, raw or escaped);
- credentials written the way HTTP libraries quote them (``Bearer <token>``,
  ``authorization: <value>``, ``x-api-key: <value>``) are replaced even when the secret is not
  known here (an error from a lower layer quoting a header it refused).

Texts are only rewritten on the failure path; nothing here runs per successful request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .http import SECRET_HEADERS, Headers

__all__ = ["REDACTED", "redact", "secret_values"]

REDACTED = "<redacted>"

_QUOTED_CREDENTIALS = re.compile(
    r"(?i)(\b(?:proxy-)?authorization\s*[:=]\s*(?:[a-z]+\s+)?|\bbearer\s+|\bbasic\s+|"
    r"\b(?:x-)?api-key\s*[:=]\s*)"
    r"(?!<redacted>)[^\s'\",;)\]}]+"
)


_SECRET_NAME = re.compile(r"key|token|secret|auth|password|credential|signature", re.I)
"""Header names that suggest a secret (``x-goog-api-key``, ``x-auth-token``...), besides the
known :data:`SECRET_HEADERS`."""


def secret_values(headers: Headers) -> tuple[str, ...]:
    """The secrets carried by ``headers``: each secret header's value (a known secret header,
    or one whose name says key, token, secret, auth...), and its token after an auth scheme
    (``Bearer sk-...`` gives both the whole value and ``sk-...``)."""
    found: list[str] = []
    for name, value in headers:
        secret = name in SECRET_HEADERS or _SECRET_NAME.search(name) is not None
        if secret and value.strip():
            found.append(value)
            scheme, _, token = value.partition(" ")
            if token.strip() and scheme.isalpha():
                found.append(token)
    return tuple(found)


def _forms(secret: str) -> Iterable[str]:
    stripped = secret.strip()
    yield secret
    yield stripped
    escaped = repr(secret)[1:-1]  # how a repr of str or bytes quotes a newline in the key
    if escaped != secret:
        yield escaped


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every configured secret and every quoted credential replaced by
    ``<redacted>``."""
    forms = {form for secret in secrets for form in _forms(secret) if form}
    for form in sorted(forms, key=len, reverse=True):
        if form in text:
            text = text.replace(form, REDACTED)
    return _QUOTED_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED, text)
