"""The queue address (``redis://host:port/BATCH``) and the key names of one batch.

Every key of a batch carries the hash tag ``{BATCH}``, so the scripts, which touch several
keys at once, stay valid on a cluster (all keys of a batch live in one slot). A batch is
therefore served by one primary; run several batches to spread load over a cluster.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import attrs

from .._core.errors import ConfigError

__all__ = ["GROUP", "Keys", "QueueAddress"]

GROUP = "workers"
"""The consumer group every worker of every batch reads the step stream through."""

_BATCH = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@attrs.frozen
class Keys:
    """The key names of one batch (see docs/distributed.md for what each holds)."""

    batch: str

    def _key(self, name: str) -> str:
        return f"ac:{{{self.batch}}}:{name}"

    @property
    def steps(self) -> str:
        """Stream of runnable steps (``agent``, ``step``), read through :data:`GROUP`."""
        return self._key("q")

    @property
    def version(self) -> str:
        """Hash agent -> committed step number: the compare-and-set token."""
        return self._key("ver")

    @property
    def checkpoint(self) -> str:
        """Hash agent -> the loop snapshot after the last committed step."""
        return self._key("ckpt")

    @property
    def inputs(self) -> str:
        """Hash agent -> the agent's input (JSON), while it is live."""
        return self._key("in")

    @property
    def results(self) -> str:
        """Hash agent -> the final result record (written once)."""
        return self._key("res")

    @property
    def done(self) -> str:
        """Stream of finished agents, read by the submitter."""
        return self._key("done")

    @property
    def dead(self) -> str:
        """Stream of dead-lettered steps (delivered too often without a commit)."""
        return self._key("dlq")

    @property
    def meta(self) -> str:
        """Hash: task fingerprint, input count, admission cursor, the ``finished`` flag."""
        return self._key("meta")

    @property
    def stats(self) -> str:
        """Hash of counters that workers add to (steps committed, rejected, reclaimed ...)."""
        return self._key("stats")

    @property
    def audit(self) -> str:
        """Hash ``agent:step`` -> commits (only with auditing on; used by the chaos suite)."""
        return self._key("audit")

    @property
    def pause(self) -> str:
        """String with a time to live: while it exists, every worker holds its model requests
        (a shared back-off after a 429 or an overload)."""
        return self._key("pause")

    @property
    def budget(self) -> str:
        """Hash: the fleet's rate budget (limits configured and learned, the buckets' state)."""
        return self._key("budget")

    @property
    def budget_workers(self) -> str:
        """Sorted set worker -> when it last reserved (server clock): the live workers that
        share the budget."""
        return self._key("budget:workers")

    def memos(self, agent: str) -> str:
        """Hash idempotency key -> memoised tool outcome, one per agent."""
        return self._key(f"fx:{agent}")


@attrs.frozen
class QueueAddress:
    """Where a batch lives: a Redis-compatible server and the batch's name."""

    host: str
    port: int
    batch: str

    @property
    def keys(self) -> Keys:
        """The batch's key names."""
        return Keys(self.batch)

    @property
    def url(self) -> str:
        """The address as a ``redis://`` URL."""
        return f"redis://{self.host}:{self.port}/{self.batch}"

    @classmethod
    def parse(cls, url: str) -> QueueAddress:
        """Parse ``redis://host[:port]/BATCH`` (``valkey://`` works too; port 6379 by default).

        Raises:
            ConfigError: the URL is not of that form or the batch name is not 1-64 of
                ``A-Z a-z 0-9 _ . -``.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "valkey"):
            raise ConfigError(f"queue URL must start with redis:// or valkey://, got {url!r}")
        try:
            port = parts.port or 6379
        except ValueError:
            raise ConfigError(f"queue URL has an invalid port: {url!r}") from None
        batch = parts.path.lstrip("/")
        if not parts.hostname or not _BATCH.match(batch):
            raise ConfigError(
                f"queue URL must look like redis://HOST:PORT/BATCH with BATCH made of 1-64 "
                f"letters, digits, '_', '.', '-': got {url!r}"
            )
        return cls(parts.hostname, port, batch)
