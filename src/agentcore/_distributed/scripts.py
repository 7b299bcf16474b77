"""Server-side Lua scripts: every state change of a batch is one of these, run atomically.

The scripts are sent by their SHA1 (``EVALSHA``) and reloaded by the client when the server
does not know them (after a restart), so nothing has to be installed on the server.

Stream entries of the step stream hold ``agent`` and ``step`` in that order; the scripts rely
on that layout (``fields[2]`` is the agent, ``fields[4]`` the step).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ADMIT",
    "CLEANUP",
    "COMMIT",
    "DROP_CONSUMERS",
    "LOAD",
    "PAUSE",
    "RECLAIM",
    "RENEW",
]

ADMIT: Final = """
-- KEYS: version, inputs, steps, meta
-- ARGV: new admission cursor, then agent, input pairs
local admitted = 0
for i = 2, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], 0) == 1 then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    redis.call('XADD', KEYS[3], '*', 'agent', ARGV[i], 'step', 0)
    admitted = admitted + 1
  end
end
redis.call('HSET', KEYS[4], 'next', ARGV[1])
return admitted
"""
"""Admit agents: each gets step number 0 and one runnable entry, at most once; the admission
cursor moves in the same transaction, so a restarted submitter neither skips nor repeats."""

LOAD: Final = """
-- KEYS: version, checkpoint, inputs; ARGV: agent
return {redis.call('HGET', KEYS[1], ARGV[1]), redis.call('HGET', KEYS[2], ARGV[1]),
        redis.call('HGET', KEYS[3], ARGV[1])}
"""
"""Read an agent's committed step number, checkpoint and input in one round trip."""

COMMIT: Final = """
-- KEYS: version, checkpoint, steps, results, done, audit, stats
-- ARGV: agent, step, entry id, 'next' | 'end', snapshot | result record,
--       compare ('1'; '0' only for the negative control), audit ('1' | '0'), group
local agent, step = ARGV[1], ARGV[2]
redis.call('XACK', KEYS[3], ARGV[8], ARGV[3])
redis.call('XDEL', KEYS[3], ARGV[3])
if ARGV[6] == '1' and redis.call('HGET', KEYS[1], agent) ~= step then
  redis.call('HINCRBY', KEYS[7], 'steps_rejected', 1)
  return 0
end
local following = tonumber(step) + 1
redis.call('HSET', KEYS[1], agent, following)
if ARGV[4] == 'next' then
  redis.call('HSET', KEYS[2], agent, ARGV[5])
  redis.call('XADD', KEYS[3], '*', 'agent', agent, 'step', following)
else
  redis.call('HDEL', KEYS[2], agent)
  if redis.call('HSETNX', KEYS[4], agent, ARGV[5]) == 1 then
    redis.call('XADD', KEYS[5], '*', 'agent', agent)
    redis.call('HINCRBY', KEYS[7], 'agents_finished', 1)
  end
end
redis.call('HINCRBY', KEYS[7], 'steps_committed', 1)
if ARGV[7] == '1' then
  redis.call('HINCRBY', KEYS[6], agent .. ':' .. step, 1)
end
return 1
"""
"""The step commit: a compare-and-set on the agent's step number. Only the first execution
of (agent, step) to get here advances the agent; every other one (a zombie, a duplicate
delivery) only acknowledges its entry and returns 0. The batch's progress counters
(``steps_committed``, ``steps_rejected``, ``agents_finished``) are counted here, in the same
transaction, so a worker killed after its commit cannot take them with it."""

RENEW: Final = """
-- KEYS: steps; ARGV: group, consumer, entry ids...
local kept = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    kept[#kept + 1] = ARGV[i]
  end
end
return kept
"""
"""Owner-checked lease renewal: reset the idle time of the entries this consumer still owns
and return them. An entry another worker has reclaimed is left alone (a plain ``XCLAIM``
would steal it back)."""

RECLAIM: Final = """
-- KEYS: steps, dead, version, results, done, checkpoint, stats
-- ARGV: group, consumer, lease (ms), cursor, count, delivery limit
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4],
                     'COUNT', ARGV[5])
local out = {}
for _, e in ipairs(r[2]) do
  local id, f = e[1], e[2]
  local agent, step = f[2], f[4]
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  local deliveries = 0
  if p[1] then deliveries = p[1][4] end
  if deliveries > tonumber(ARGV[6]) then
    if redis.call('HGET', KEYS[3], agent) == step then
      local why = 'step ' .. step .. ' was delivered ' .. deliveries ..
        ' times without a commit (its workers died, stalled past their lease or kept failing)'
      redis.call('HSET', KEYS[3], agent, tonumber(step) + 1)
      redis.call('HDEL', KEYS[6], agent)
      local record = cjson.encode({index = tonumber(agent), status = 'failed',
        output = cjson.null, error = {kind = 'dead_letter', message = why}, turns = 0})
      if redis.call('HSETNX', KEYS[4], agent, record) == 1 then
        redis.call('XADD', KEYS[5], '*', 'agent', agent)
        redis.call('HINCRBY', KEYS[7], 'agents_finished', 1)
      end
      redis.call('XADD', KEYS[2], '*', 'agent', agent, 'step', step,
                 'deliveries', deliveries, 'reason', why)
      redis.call('HINCRBY', KEYS[7], 'steps_dead_lettered', 1)
    end
    redis.call('XACK', KEYS[1], ARGV[1], id)
    redis.call('XDEL', KEYS[1], id)
  else
    out[#out + 1] = {id, agent, step, deliveries}
  end
end
return {r[1], out}
"""
"""The reclaimer: take over entries idle for longer than the lease (their worker died or
froze). An entry delivered more than the limit goes to the dead-letter stream and its agent
gets a failed result naming why; the others are returned to be run."""

CLEANUP: Final = """
-- KEYS: version, inputs, results, checkpoint, done, then one memo hash per agent
-- ARGV: agent, done entry id pairs (in the order of the memo keys)
for i = 1, #ARGV, 2 do
  local agent = ARGV[i]
  redis.call('HDEL', KEYS[1], agent)
  redis.call('HDEL', KEYS[2], agent)
  redis.call('HDEL', KEYS[3], agent)
  redis.call('HDEL', KEYS[4], agent)
  redis.call('XDEL', KEYS[5], ARGV[i + 1])
  redis.call('DEL', KEYS[5 + (i + 1) / 2])
end
return #ARGV / 2
"""
"""Forget finished agents once their results are durable in the output file."""

DROP_CONSUMERS: Final = """
-- KEYS: steps; ARGV: group, consumer names...
local dropped = 0
for i = 2, #ARGV do
  if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[i]) == 0 then
    dropped = dropped + redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[i])
  end
end
return dropped
"""
"""Remove consumers from the group, each only if it owns no pending entry (removing a
consumer drops its pending entries from the group, which would lose their steps): the
names of dead processes, a worker's own name when it leaves, every name when the batch is
finished."""

PAUSE: Final = """
-- KEYS: pause; ARGV: milliseconds
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
  return 1
end
return 0
"""
"""Publish a pause for every worker of the batch, unless a longer one is already set."""
