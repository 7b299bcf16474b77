"""AWS credentials and SigV4 signing for Bedrock, by botocore (the ``bedrock`` extra).

Credentials come from botocore's standard chain (environment variables, shared config and
credentials files and their profiles, container and instance roles), resolved once when the
backend is configured and refreshed by botocore when they are temporary. They never appear in
a repr, a snapshot or a log line: :class:`BedrockSigner` shows only the region and profile.
"""

from __future__ import annotations

from typing import Any

from .._codecs.bedrock import load_botocore
from .._core.errors import ConfigError

__all__ = ["BedrockSigner"]

SERVICE = "bedrock"


class BedrockSigner:
    """Signs Bedrock requests with SigV4 (``Authorization``, ``X-Amz-Date``, and
    ``X-Amz-Security-Token`` for temporary credentials).

    Args:
        region: the AWS region, e.g. ``us-east-1``.
        profile: a named profile of the shared config files (``None``: the default chain).
        credentials: botocore credentials to use instead of the chain (tests, custom sources).

    Raises:
        ConfigError: botocore is missing, or no credentials were found.
    """

    def __init__(self, region: str, *, profile: str | None = None, credentials: Any = None) -> None:
        botocore = load_botocore()
        self.region = region
        self.profile = profile
        if credentials is None:
            session = botocore.session.Session(profile=profile)
            credentials = session.get_credentials()
        if credentials is None:
            raise ConfigError(
                "no AWS credentials found for bedrock:// (set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or configure ~/.aws/credentials)"
            )
        self._credentials = credentials
        self._botocore = botocore

    def __repr__(self) -> str:
        return f"BedrockSigner(region={self.region!r}, profile={self.profile!r})"

    def sign(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> list[tuple[str, str]]:
        """The headers to send: ``headers`` plus the SigV4 ones for this exact request."""
        botocore = self._botocore
        frozen = self._credentials.get_frozen_credentials()
        request = botocore.awsrequest.AWSRequest(
            method=method, url=url, data=body, headers=dict(headers)
        )
        botocore.auth.SigV4Auth(frozen, SERVICE, self.region).add_auth(request)
        return [(str(name), str(value)) for name, value in request.headers.items()]
