-- Give back the concurrency slots of a queue's messages (lua/slots.lua).
-- KEYS[1] the broker namespace
-- ARGV[1] queue name, ARGV[2] worker (broker) id, ARGV[3] now (ms), ARGV[4] heartbeat timeout
-- (ms), ARGV[5...] Redis message ids. With ids: those messages of that worker (acknowledged,
-- requeued, dead-lettered). With none: every slot of every holder of the queue whose heartbeat
-- is older than the timeout, or gone (a dead worker: its messages are requeued by the heartbeat
-- maintenance, the same pass).
-- Returns the number of slots released. Releasing a message twice releases it once.
--#include slots.lua
local namespace = KEYS[1]
local queue_full_name = namespace .. ":" .. ARGV[1]
local holders = queue_full_name .. ".holders"
local freed = {}
local total = 0

local function held_key(worker)
    return namespace .. ":__held__." .. worker .. "." .. ARGV[1]
end

if #ARGV >= 5 then
    local ids = {}
    for i = 5, #ARGV do
        ids[#ids + 1] = ARGV[i]
    end
    total = forget_held(held_key(ARGV[2]), ids, freed)
else
    local oldest = tonumber(ARGV[3]) - tonumber(ARGV[4])
    for _, worker in ipairs(redis.call("smembers", holders)) do
        local beat = redis.call("zscore", namespace .. ":__heartbeats__", worker)
        if not beat or tonumber(beat) <= oldest then
            local flat = redis.call("hgetall", held_key(worker))
            for i = 1, #flat, 2 do
                freed[flat[i + 1]] = (freed[flat[i + 1]] or 0) + 1
                total = total + 1
            end
            redis.call("del", held_key(worker))
            redis.call("srem", holders, worker)
        end
    end
end
give_back(queue_full_name, freed, total)
return total
