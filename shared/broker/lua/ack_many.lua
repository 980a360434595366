-- Acknowledge many messages of one queue for a worker in one call: Dramatiq's own "ack"
-- command (dispatch.lua: heartbeat, then SREM from the worker's unacked set and HDEL of the
-- data) for each id, with one heartbeat for the batch (shared/broker/acker.py), and the
-- concurrency slots they held given back (as lua/release.lua does for one worker's ids).
-- KEYS[1] the broker namespace
-- ARGV[1] now (ms), ARGV[2] queue name, ARGV[3] worker (broker) id, ARGV[4...] Redis message ids
-- Returns the number of messages acknowledged.
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
local orgs = redis.call("hmget", held_key, unpack(ids))
local freed = {}
local total = 0
for i, org in ipairs(orgs) do
    if org then
        freed[org] = (freed[org] or 0) + 1
        total = total + 1
    end
end
if total > 0 then
    redis.call("hdel", held_key, unpack(ids))
    for org, n in pairs(freed) do
        redis.call("hincrby", queue_full_name .. ".busy", org, -n)
    end
    redis.call("hincrby", queue_full_name .. ".busy", "*", -total)
    -- A message may wait for one of these slots (lua/fetch.lua): wake an idle consumer.
    if redis.call("zcard", queue_full_name .. ".ready") > 0 then
        redis.call("lpush", queue_full_name .. ".wake", "1")
        redis.call("ltrim", queue_full_name .. ".wake", 0, 7)
    end
end
return acked
