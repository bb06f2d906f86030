"""The Lua scripts of the Redis turn table (numi/turns/shared.py has the key layout).

Each runs atomically in Redis: taking a lease with the turn's first state (BEGIN), one
writer round of a chat's events with trimming and the snapshot (PUBLISH), a heartbeat's
lease renewal (RENEW), closing the turn of a dead process exactly once (CLOSE_DEAD), and a
consistent read of the stored state plus the stream after it (FOLD).
"""

import json

# KEYS: lease turn seq events running
# ARGV: token lease_ms turn_id owner started_at floor state chat_id request_id
BEGIN = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
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

# KEYS: seq events turn lease running
# ARGV: floor maxlen state ending_turn token retention_ms chat_id tail...
PUBLISH = """
if not redis.call('GET', KEYS[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
local first, id
for i = 8, #ARGV do
  id = redis.call('INCR', KEYS[1])
  if not first then first = id end
  redis.call('XADD', KEYS[2], id .. '-0', 'e', '{"event_id":' .. id .. ARGV[i])
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], 'through', id or redis.call('GET', KEYS[1]), 'state', ARGV[3])
end
if ARGV[2] ~= '0' then redis.call('XTRIM', KEYS[2], 'MAXLEN', ARGV[2]) end
local holder_turn = redis.call('HGET', KEYS[3], 'turn_id')
if ARGV[4] ~= '' and (holder_turn == ARGV[4] or not holder_turn) then
  if redis.call('GET', KEYS[4]) == ARGV[5] then redis.call('DEL', KEYS[4]) end
  redis.call('HSET', KEYS[3], 'running', '0')
  redis.call('SREM', KEYS[5], ARGV[7])
end
if redis.call('HGET', KEYS[3], 'running') ~= '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
return first or 0
"""

# KEYS: lease turn running ; ARGV: token ttl turn_id owner chat_id
RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]); return 1 end
if holder then return 0 end
local turn_id = redis.call('HGET', KEYS[2], 'turn_id')
if turn_id and (turn_id ~= ARGV[3] or redis.call('HGET', KEYS[2], 'running') ~= '1') then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[2], 'turn_id', ARGV[3], 'owner', ARGV[4], 'running', '1')
redis.call('PERSIST', KEYS[2])
redis.call('SADD', KEYS[3], ARGV[5])
return 2
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

# KEYS: turn events seq ; the stored state, its event id, and the stream after it
FOLD = """
local stored = redis.call('HMGET', KEYS[1], 'through', 'state')
local seq = redis.call('GET', KEYS[3])
if not stored[1] then return {false, false, {}, seq} end
return {stored[1], stored[2], redis.call('XRANGE', KEYS[2], '(' .. stored[1] .. '-0', '+'), seq}
"""

INTERRUPTED = json.dumps(
    {
        "code": "interrupted",
        "message": "The server running this answer stopped. Retry to answer again.",
    }
)
