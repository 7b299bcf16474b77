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
    "RESERVE",
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

RESERVE: Final = """
-- KEYS: budget, pause, workers
-- ARGV: worker, now (seconds; '' = the server's clock), horizon (s), workers' window (s),
--       configured rpm, configured tpm, learned rpm, learned tpm, remaining requests,
--       remaining tokens ('' = not said), requests back, tokens back (signed), costs...
-- Returns: retry (us), rpm, tpm (-1: unknown), live workers, now (us), delays (us)...
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1e6
end
local b = KEYS[1]
local function num(field) return tonumber(redis.call('HGET', b, field)) end
local function arg(i) return tonumber(ARGV[i]) end
local function lower(x, y)
  if not x then return y end
  if not y then return x end
  return math.min(x, y)
end
local function put(field, value)
  if value then
    redis.call('HSET', b, field, string.format('%.17g', value))
  else
    redis.call('HDEL', b, field)
  end
end
-- configured limits: the lowest any worker was given; learned: the latest headers
local crpm, ctpm = lower(num('crpm'), arg(5)), lower(num('ctpm'), arg(6))
local lrpm, ltpm = num('lrpm'), num('ltpm')
if arg(7) and arg(7) > 0 then lrpm = arg(7) end
if arg(8) and arg(8) > 0 then ltpm = arg(8) end
put('crpm', crpm); put('ctpm', ctpm); put('lrpm', lrpm); put('ltpm', ltpm)
-- the buckets: {limit, tat}; tat nil = full
local buckets = {}
local limits = {lower(crpm, lrpm), lower(ctpm, ltpm)}
for i, name in ipairs({'r', 't'}) do
  local limit = limits[i]
  local old, tat = num(name .. 'limit'), num(name .. 'tat')
  if limit and old and limit ~= old then
    -- a new limit keeps the level
    local level = old - math.max(0, (tat or -math.huge) - now * (old / 60))
    tat = math.max(-math.huge, now * (limit / 60) + limit - level)
  end
  if limit then buckets[i] = {limit, tat} end
  put(name .. 'limit', limit)
end
local function level(k, at)
  return k[1] - math.max(0, (k[2] or -math.huge) - at * (k[1] / 60))
end
local function cap(k, at, most)
  k[2] = math.max(k[2] or -math.huge, at * (k[1] / 60) + k[1] - most)
end
local function add(k, at, amount)
  local clock = at * (k[1] / 60)
  if amount < 0 then
    k[2] = math.max(k[2] or -math.huge, clock) - amount
  elseif amount > 0 and k[2] and k[2] > clock then
    k[2] = math.max(clock, k[2] - amount)
  end
end
local function wait(k, at, cost)
  local need = math.min(math.max(cost, 0), k[1])
  if not k[2] then return 0 end
  local w = (k[2] - (k[1] - need)) / (k[1] / 60) - at
  if w <= 1e-9 then return 0 end
  return w
end
-- corrections first: what remains at the API already counts the usage they correct
for i = 1, 2 do
  local k = buckets[i]
  if k then
    if arg(10 + i) and arg(10 + i) ~= 0 then add(k, now, arg(10 + i)) end
    if arg(8 + i) then cap(k, now, math.max(arg(8 + i), 0)) end
  end
end
-- the fleet's live workers: those that reserved within the window
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - arg(4))
local live = redis.call('ZCARD', KEYS[3])
local out = {0, limits[1] or -1, limits[2] or -1, live, math.floor(now * 1e6)}
local held = redis.call('PTTL', KEYS[2])
if held > 0 then
  out[1] = held * 1000
else
  local horizon = arg(3)
  for i = 13, #ARGV do
    local cost, delay = arg(i), 0
    for j = 1, 2 do
      local k = buckets[j]
      if k then delay = math.max(delay, wait(k, now, j == 1 and 1 or cost)) end
    end
    if delay > horizon then
      out[1] = math.ceil((delay - horizon) * 1e6)
      break
    end
    for j = 1, 2 do
      local k = buckets[j]
      if k then add(k, now + delay, -(j == 1 and 1 or math.max(cost, 0))) end
    end
    out[#out + 1] = math.ceil(delay * 1e6)
  end
end
for i, name in ipairs({'r', 't'}) do
  local k = buckets[i]
  -- a bucket full again holds nothing worth keeping
  if k and k[2] and k[2] > now * (k[1] / 60) then
    put(name .. 'tat', k[2])
  else
    put(name .. 'tat', nil)
  end
end
return out
"""
"""The fleet's rate budget (:class:`agentcore._core.fleetbudget.SharedBudget`, step for step,
with the server's clock): learn the limits and what remains, take corrections back, then grant
the costs of a line of requests in order, each at the time both buckets hold it, up to
``horizon`` seconds ahead; nothing while the batch's pause is in force. Also counts the live
workers (those that reserved within the window) for the local share."""
