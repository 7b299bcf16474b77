"""Kill a journaled batch at random points and resume it, under virtual time.

A Hypothesis state machine draws a batch (agents, latencies, inference slots), runs it once
uninterrupted for reference, then runs it on a step journal again and again, each run killed
after a random virtual time (whatever the journal had not committed then is lost, as with a
SIGKILL) and the next one resumed from the journal, until a run finishes. Checked: no reply
or tool outcome that the journal held when a run began is computed again in it, no agent
whose end the journal held runs again, and at the end every agent's result (transcript,
output, usage, turns) equals the uninterrupted run's.
"""

from __future__ import annotations

import collections
import shutil
import sqlite3
import tempfile
from pathlib import Path

import orjson
import trio
import trio.testing
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from agentcore import Result
from tests.batch.journal_kit import World, run_killed, same_runs


def _virtual(fn, *args):  # type: ignore[no-untyped-def]
    return trio.run(fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


class KillAndResume(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="journal-stateful-"))
        self.path = self.folder / "batch.journal"
        self.world: World | None = None
        self.reference: list[Result] = []
        self.delivered: dict[int, Result] = {}
        self.finished = False
        self.kills = 0
        self.replies: set[str] = set()
        self.tools: set[str] = set()
        self.ended: set[str] = set()

    @initialize(
        agents=st.integers(2, 8),
        model_latency=st.sampled_from([0.3, 1.0, 1.7]),
        tool_latency=st.sampled_from([0.05, 0.4, 0.9]),
        max_inflight=st.integers(1, 4),
    )
    def draw_batch(
        self, agents: int, model_latency: float, tool_latency: float, max_inflight: int
    ) -> None:
        options = {
            "model_latency": model_latency,
            "tool_latency": tool_latency,
            "max_inflight": max_inflight,
        }
        self.reference = _virtual(World(agents, **options).run)
        self.world = World(agents, **options)
        self.world.audit = self.path

    @precondition(lambda self: self.world is not None and not self.finished)
    @rule(after=st.floats(0.01, 8.0))
    def kill_and_resume(self, after: float) -> None:
        self._segment(after)

    @rule()
    def results_so_far_are_the_uninterrupted_runs(self) -> None:
        reference = [r for r in self.reference if r.index in self.delivered]
        assert same_runs(list(self.delivered.values()), reference) == []

    def _segment(self, after: float | None) -> None:
        world = self.world
        assert world is not None
        requests = collections.Counter(world.requests)
        executions = collections.Counter(world.executions)
        killed = _virtual(run_killed, world, self.path, after, self.delivered)
        # Nothing the journal held when this run began was computed again in it.
        for key in self.tools:
            assert world.executions[key] == executions[key], key
        for request in self.replies:
            assert world.requests[request] == requests[request], request
        for key in world.executions:
            if world.executions[key] > executions[key]:
                assert key.split("/")[0] not in self.ended, key
        for request in world.requests:
            if world.requests[request] > requests[request]:
                assert request.split("/")[0] not in self.ended, request
        self._read_journal()
        # Each step was durable before what follows it began: no tool ran for a reply, and
        # no request was sent with tool outcomes, that a kill could have lost.
        assert world.early == []
        self.kills += killed
        self.finished = not killed

    def _read_journal(self) -> None:
        conn = sqlite3.connect(self.path)
        try:
            for _, key, data in conn.execute("SELECT run, key, data FROM steps"):
                if key:
                    self.tools.add(key)
                else:
                    self.replies.add(orjson.loads(data)["request_id"])
            self.ended.update(run for (run,) in conn.execute("SELECT run FROM ends"))
        finally:
            conn.close()

    def teardown(self) -> None:
        try:
            if self.world is not None:
                if not self.finished:
                    self._segment(None)
                assert sorted(self.delivered) == list(range(self.world.agents))
                assert same_runs(list(self.delivered.values()), self.reference) == []
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


KillAndResume.TestCase.settings = settings(max_examples=25, stateful_step_count=5, deadline=None)
test_a_batch_killed_and_resumed_at_random_points_ends_as_if_never_killed = KillAndResume.TestCase
