"""The Lua scripts of the Redis turn table (numi/turns/shared.py has the key layout).

Each runs atomically in Redis: taking a lease with the turn's first state (BEGIN), one
writer round of a chat's events with trimming and the snapshot (PUBLISH), a heartbeat's
lease renewal (RENEW), closing the turn of a dead process exactly once (CLOSE_DEAD), and a
consistent read of the stored state plus the stream after it (FOLD).

Fencing: a turn's lease is its right to write. PUBLISH writes a turn's events only while
the lease holds that turn's token, and RENEW (which the owner also runs before each save)
answers 0 once it does not: the turn then stops publishing and saving. A lapsed lease can
be taken back only while the chat is untouched (its turn hash still names the turn as
running: no sweeper closed it, no other turn began; BEGIN refuses a chat in that state),
or after Redis lost its data (a restart without persistence). `p alive` is set by every
process when it starts; the first script that finds it missing knows the data is gone and
opens a recovery window of one lease period (`p recovering`), in which owners take their
leases back (RENEW or PUBLISH) and no new turn begins (BEGIN answers "wait"). So a lease
is never granted while its turn runs elsewhere.
"""

import json

# Whether Redis lost its data (then a recovery window opens): a process set `alive` when it
# started, so a script that finds it missing knows the data is gone.
# Returns true while the window is open. KEYS[a] alive, KEYS[r] recovering; ttl in ms.
RECOVERING = """
local function recovering(alive, window, ttl)
  if redis.call('EXISTS', alive) == 0 then
    redis.call('SET', alive, '1')
    redis.call('SET', window, '1', 'PX', ttl)
    return true
  end
  return redis.call('EXISTS', window) == 1
end
"""

# The fence: 1 the lease is this turn's (renewed, or taken back after it lapsed while no
# other process touched the chat: its turn is neither closed nor replaced), 2 taken back
# after Redis lost its data, 0 lost (another turn holds the chat, or the sweeper closed
# this one: the turn must stop at once).
FENCE = (
    RECOVERING
    + """
local function fence(lease, turn, running, alive, window, token, ttl, turn_id, owner, chat_id,
                     renew)
  local holder = redis.call('GET', lease)
  if holder == token then
    if renew then redis.call('PEXPIRE', lease, ttl) end
    return 1
  end
  if holder then return 0 end
  local stored = redis.call('HGET', turn, 'turn_id')
  if stored then
    if stored ~= turn_id or redis.call('HGET', turn, 'running') ~= '1' then return 0 end
    redis.call('SET', lease, token, 'PX', ttl)
    return 1
  end
  if not recovering(alive, window, ttl) then return 0 end
  redis.call('SET', lease, token, 'PX', ttl)
  redis.call('HSET', turn, 'turn_id', turn_id, 'owner', owner, 'running', '1')
  redis.call('PERSIST', turn)
  redis.call('SADD', running, chat_id)
  return 2
end
"""
)

# KEYS: lease turn seq events running alive recovering
# ARGV: token lease_ms turn_id owner started_at floor state chat_id request_id
# Returns {first id}, {-1, running request_id} or {-2, ms to wait} (recovery window).
BEGIN = (
    RECOVERING
    + """
if recovering(KEYS[6], KEYS[7], ARGV[2]) then
  return {-2, redis.call('PTTL', KEYS[7])}
end
-- A turn whose lease lapsed but that no sweeper closed yet still holds the chat.
if redis.call('HGET', KEYS[2], 'running') == '1' or
   not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {-1, redis.call('HGET', KEYS[2], 'request_id')}
end
local seq = redis.call('GET', KEYS[3])
if not seq then seq = ARGV[6]; redis.call('SET', KEYS[3], seq) end
redis.call('PERSIST', KEYS[3])
redis.call('DEL', KEYS[4], KEYS[2])
redis.call('HSET', KEYS[2], 'turn_id', ARGV[3], 'owner', ARGV[4], 'started_at', ARGV[5],
           'running', '1', 'through', seq, 'state', ARGV[7], 'request_id', ARGV[9])
redis.call('SADD', KEYS[5], ARGV[8])
return {tonumber(seq)}
"""
)

# KEYS: seq events turn lease running alive recovering
# ARGV: floor maxlen state ending_turn token retention_ms chat_id fenced_turn owner lease_ms
#       previous tail...
# `previous` is the id this process wrote last in the chat: when the counter starts again
# (Redis lost it), the first entry carries it as field `p`, so a reader that had read up to
# it knows the jump in ids hides nothing.
# Returns {code, first id written (0: none)}: code 1 written; 0 the batch's turn lost its
# lease (nothing written); 2 written, the lease taken back after Redis lost its data; 3
# that too, but the batch has no state: nothing written, the owner sends it again with the
# state, so that the turn's snapshot never lacks what its stream lost (a client that
# falls behind or finds a gap resyncs from it).
PUBLISH = (
    FENCE
    + """
local taken = 1
if ARGV[8] ~= '' then
  -- (the heartbeat renews the lease: not every write)
  taken = fence(KEYS[4], KEYS[3], KEYS[5], KEYS[6], KEYS[7], ARGV[5], ARGV[10], ARGV[8],
                ARGV[9], ARGV[7], false)
  if taken == 0 then return {0, 0} end
  if taken == 2 and ARGV[3] == '' then return {3, 0} end
end
local restarted = false
if not redis.call('GET', KEYS[1]) then redis.call('SET', KEYS[1], ARGV[1]); restarted = true end
local first, id
for i = 12, #ARGV do
  id = redis.call('INCR', KEYS[1])
  if restarted and not first then
    redis.call('XADD', KEYS[2], id .. '-0', 'e', '{"event_id":' .. id .. ARGV[i], 'p', ARGV[11])
  else
    redis.call('XADD', KEYS[2], id .. '-0', 'e', '{"event_id":' .. id .. ARGV[i])
  end
  if not first then first = id end
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], 'through', id or redis.call('GET', KEYS[1]), 'state', ARGV[3])
end
if ARGV[2] ~= '0' then redis.call('XTRIM', KEYS[2], 'MAXLEN', ARGV[2]) end
if ARGV[4] ~= '' then
  local holder_turn = redis.call('HGET', KEYS[3], 'turn_id')
  if holder_turn == ARGV[4] or not holder_turn then
    if redis.call('GET', KEYS[4]) == ARGV[5] then redis.call('DEL', KEYS[4]) end
    redis.call('HSET', KEYS[3], 'running', '0')
    redis.call('SREM', KEYS[5], ARGV[7])
  end
end
-- A write fenced by a held lease (not ending) is a running turn's: nothing to expire.
if (taken ~= 1 or ARGV[8] == '' or ARGV[4] ~= '') and
   redis.call('HGET', KEYS[3], 'running') ~= '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
return {taken, first or 0}
"""
)

# KEYS: lease turn running alive recovering ; ARGV: token ttl turn_id owner chat_id
RENEW = (
    FENCE
    + """
return fence(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3], ARGV[4],
             ARGV[5], true)
"""
)

# KEYS: lease ; ARGV: token. A process that stops hands its leases back (the sweepers of
# the others then close the turns at once).
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]); return 1 end
return 0
"""

# KEYS: lease turn seq events running ; ARGV: floor retention_ms chat_id error_data
CLOSE_DEAD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('HGET', KEYS[2], 'running') ~= '1' then redis.call('SREM', KEYS[5], ARGV[3]); return 0 end
local turn_id = redis.call('HGET', KEYS[2], 'turn_id')
if not redis.call('GET', KEYS[3]) then redis.call('SET', KEYS[3], ARGV[1]) end
local id = redis.call('INCR', KEYS[3])
redis.call('XADD', KEYS[4], id .. '-0', 'e', '{"event_id":' .. id .. ',"turn_id":"' .. turn_id ..
           '","type":"error","data":' .. ARGV[4] .. '}')
id = redis.call('INCR', KEYS[3])
redis.call('XADD', KEYS[4], id .. '-0', 'e', '{"event_id":' .. id .. ',"turn_id":"' .. turn_id ..
           '","type":"turn_end","data":{}}')
redis.call('HSET', KEYS[2], 'running', '0')
redis.call('SREM', KEYS[5], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
return 1
"""

# KEYS: turn events seq ; the stored state, its event id, the stream after it, the chat's
# counter, and whether a turn runs (running without a state: Redis lost its data and the
# owner has not stored the state again yet).
FOLD = """
local stored = redis.call('HMGET', KEYS[1], 'through', 'state', 'running')
local seq = redis.call('GET', KEYS[3])
if not stored[1] then return {false, false, {}, seq, stored[3]} end
return {stored[1], stored[2], redis.call('XRANGE', KEYS[2], '(' .. stored[1] .. '-0', '+'), seq,
        stored[3]}
"""

INTERRUPTED = json.dumps(
    {
        "code": "interrupted",
        "message": "The server running this answer stopped. Retry to answer again.",
    }
)
