-- Acknowledge many messages of one queue for a worker in one call: Dramatiq's own "ack"
-- command (dispatch.lua: heartbeat, then SREM from the worker's unacked set and HDEL of the
-- data) for each id, with one heartbeat for the batch (shared/broker/acker.py), and the
-- concurrency slots they held given back (lua/slots.lua, as lua/release.lua does).
-- KEYS[1] the broker namespace
-- ARGV[1] now (ms), ARGV[2] queue name, ARGV[3] worker (broker) id, ARGV[4...] Redis message ids
-- Returns the number of messages acknowledged.
--#include slots.lua
local namespace = KEYS[1]
local queue_full_name = namespace .. ":" .. ARGV[2]
local queue_acks = namespace .. ":__acks__." .. ARGV[3] .. "." .. ARGV[2]
local queue_messages = queue_full_name .. ".msgs"
local held_key = namespace .. ":__held__." .. ARGV[3] .. "." .. ARGV[2]
redis.call("zadd", namespace .. ":__heartbeats__", ARGV[1], ARGV[3])
local acked = 0
local ids = {}
for i = 4, #ARGV do
    if redis.call("srem", queue_acks, ARGV[i]) > 0 then
        redis.call("hdel", queue_messages, ARGV[i])
        acked = acked + 1
    end
    ids[#ids + 1] = ARGV[i]
end
local freed = {}
give_back(queue_full_name, freed, forget_held(held_key, ids, freed))
return acked
