-- Fetch up to ARGV[4] messages of a queue for a worker: Dramatiq's own "fetch" command
-- (dispatch.lua: heartbeat, LPOP, SADD to the worker's unacked set), except that it returns
-- each message's Redis id with its data, so that a message that cannot be decoded can still
-- be acknowledged (shared/broker/consumer.py).
-- KEYS[1] the broker namespace
-- ARGV[1] now (ms), ARGV[2] queue name, ARGV[3] worker (broker) id, ARGV[4] most messages
-- Returns {id1, data1, id2, data2, ...}; a data is nil when the id has no message.
local namespace = KEYS[1]
local queue_full_name = namespace .. ":" .. ARGV[2]
local queue_messages = queue_full_name .. ".msgs"
local queue_acks = namespace .. ":__acks__." .. ARGV[3] .. "." .. ARGV[2]
redis.call("zadd", namespace .. ":__heartbeats__", ARGV[1], ARGV[3])
local out = {}
for _ = 1, tonumber(ARGV[4]) do
    local message_id = redis.call("lpop", queue_full_name)
    if not message_id then
        break
    end
    redis.call("sadd", queue_acks, message_id)
    out[#out + 1] = message_id
    out[#out + 1] = redis.call("hget", queue_messages, message_id)
end
return out
