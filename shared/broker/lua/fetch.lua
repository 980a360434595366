-- Fetch up to ARGV[4] messages of a queue for a worker: Dramatiq's own "fetch" command
-- (dispatch.lua: heartbeat, LPOP, SADD to the worker's unacked set), except that it returns
-- each message's Redis id with its data, so that a message that cannot be decoded can still
-- be acknowledged, and that a fetch sent again gets what it took the first time
-- (shared/broker/consumer.py).
-- KEYS[1] the broker namespace
-- ARGV[1] now (ms), ARGV[2] queue name, ARGV[3] worker (broker) id, ARGV[4] most messages,
-- ARGV[5] fetch id: the same as the last fetch's when that fetch is sent again (redis-py sends
-- a command again after a lost reply; a consumer whose fetch failed sends it again), which
-- then returns the messages that fetch took and still holds, and takes no others.
-- Returns {id1, data1, id2, data2, ...}; a data is nil when the id has no message.
local namespace = KEYS[1]
local queue_full_name = namespace .. ":" .. ARGV[2]
local queue_messages = queue_full_name .. ".msgs"
local queue_acks = namespace .. ":__acks__." .. ARGV[3] .. "." .. ARGV[2]
local last_fetch = namespace .. ":__fetched__." .. ARGV[3] .. "." .. ARGV[2]
redis.call("zadd", namespace .. ":__heartbeats__", ARGV[1], ARGV[3])
local out = {}
local last = redis.call("get", last_fetch)
-- The record starts with its fetch id (`["<id>",...`): decoded only for a resend.
local resent = '["' .. ARGV[5] .. '"'
if last and string.sub(last, 1, #resent) == resent then
    local taken = cjson.decode(last)
    for i = 2, #taken do
        if redis.call("sismember", queue_acks, taken[i]) == 1 then
            out[#out + 1] = taken[i]
            out[#out + 1] = redis.call("hget", queue_messages, taken[i])
        end
    end
    return out
end
local taken = {ARGV[5]}
for _ = 1, tonumber(ARGV[4]) do
    local message_id = redis.call("lpop", queue_full_name)
    if not message_id then
        break
    end
    redis.call("sadd", queue_acks, message_id)
    out[#out + 1] = message_id
    out[#out + 1] = redis.call("hget", queue_messages, message_id)
    taken[#taken + 1] = message_id
end
if #taken > 1 then
    -- Kept long enough for any resend; a worker that is gone leaves nothing behind for good.
    redis.call("set", last_fetch, cjson.encode(taken), "PX", 600000)
end
return out
