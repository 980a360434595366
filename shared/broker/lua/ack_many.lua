-- Acknowledge many messages of one queue for a worker in one call: Dramatiq's own "ack"
-- command (dispatch.lua: heartbeat, then SREM from the worker's unacked set and HDEL of the
-- data) for each id, with one heartbeat for the batch (shared/broker/acker.py).
-- KEYS[1] the broker namespace
-- ARGV[1] now (ms), ARGV[2] queue name, ARGV[3] worker (broker) id, ARGV[4...] Redis message ids
-- Returns the number of messages acknowledged.
local namespace = KEYS[1]
local queue_acks = namespace .. ":__acks__." .. ARGV[3] .. "." .. ARGV[2]
local queue_messages = namespace .. ":" .. ARGV[2] .. ".msgs"
redis.call("zadd", namespace .. ":__heartbeats__", ARGV[1], ARGV[3])
local acked = 0
for i = 4, #ARGV do
    if redis.call("srem", queue_acks, ARGV[i]) > 0 then
        redis.call("hdel", queue_messages, ARGV[i])
        acked = acked + 1
    end
end
return acked
