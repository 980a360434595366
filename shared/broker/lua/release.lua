-- Give back the concurrency slots of a queue's messages (lua/fetch.lua counts each message it
-- takes in `<queue>.busy`, per org and in all, and records it in the worker's held hash).
-- KEYS[1] the broker namespace
-- ARGV[1] queue name, ARGV[2] worker (broker) id, ARGV[3] now (ms), ARGV[4] heartbeat timeout
-- (ms), ARGV[5...] Redis message ids. With ids: those messages of that worker (acknowledged,
-- requeued, dead-lettered). With none: every slot of every holder of the queue whose heartbeat
-- is older than the timeout, or gone (a dead worker: its messages are requeued by the heartbeat
-- maintenance, the same pass).
-- Returns the number of slots released. Releasing a message twice releases it once.
local namespace = KEYS[1]
local queue_full_name = namespace .. ":" .. ARGV[1]
local busy_key = queue_full_name .. ".busy"
local holders = queue_full_name .. ".holders"
local freed = {}
local total = 0

local function release(worker, ids)
    local held_key = namespace .. ":__held__." .. worker .. "." .. ARGV[1]
    if ids == nil then
        local flat = redis.call("hgetall", held_key)
        for i = 1, #flat, 2 do
            freed[flat[i + 1]] = (freed[flat[i + 1]] or 0) + 1
            total = total + 1
        end
        redis.call("del", held_key)
        return
    end
    for _, message_id in ipairs(ids) do
        local org = redis.call("hget", held_key, message_id)
        if org then
            redis.call("hdel", held_key, message_id)
            freed[org] = (freed[org] or 0) + 1
            total = total + 1
        end
    end
end

if #ARGV >= 5 then
    local ids = {}
    for i = 5, #ARGV do
        ids[#ids + 1] = ARGV[i]
    end
    release(ARGV[2], ids)
else
    local oldest = tonumber(ARGV[3]) - tonumber(ARGV[4])
    for _, worker in ipairs(redis.call("smembers", holders)) do
        local beat = redis.call("zscore", namespace .. ":__heartbeats__", worker)
        if not beat or tonumber(beat) <= oldest then
            release(worker, nil)
            redis.call("srem", holders, worker)
        end
    end
end
if total > 0 then
    for org, n in pairs(freed) do
        redis.call("hincrby", busy_key, org, -n)
    end
    redis.call("hincrby", busy_key, "*", -total)
    -- A message may wait for one of these slots: wake an idle consumer of the queue.
    if redis.call("zcard", queue_full_name .. ".ready") > 0 then
        redis.call("lpush", queue_full_name .. ".wake", "1")
        redis.call("ltrim", queue_full_name .. ".wake", 0, 7)
    end
end
return total
