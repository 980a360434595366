-- Enqueue a message unless its job id was already enqueued (atomic dedup + enqueue), in its lane.
-- KEYS[1] the job id key, KEYS[2] the queue's message hash, KEYS[3] the queue's list,
-- KEYS[4] the queue's wake-up list (an idle fleet consumer blocks on it: shared/broker/consumer.py)
-- ARGV[1] message id, ARGV[2] dedup window (ms), ARGV[3] redis message id, ARGV[4] message data
-- Optional: ARGV[5] priority (high, default or low), ARGV[6] org id: the message's lane (fair
-- share, docs/wire-protocol.md §3). Without them, or on a delay queue (<queue>.DQ), it goes on
-- the queue's list itself: the default lane. A window of 0 enqueues without claiming the job id.
-- Returns false when enqueued, or the message id that holds the job id.
-- The hash + list layout is Dramatiq's Redis broker's own "enqueue" command (dispatch.lua).
local priority = ARGV[5]
local band = nil
if priority and priority ~= "" and string.sub(KEYS[3], -3) ~= ".DQ" then
    band = ({high = 0, default = 1, low = 2})[priority]
    if not band then
        return redis.error_reply("unknown priority " .. priority .. " (high, default, low)")
    end
end
if ARGV[2] ~= "0" then
    local existing = redis.call("get", KEYS[1])
    if existing then
        -- A worker records a run's start after a "|" on this key (lua/run_start.lua): the
        -- holder is the message id before it.
        return string.match(existing, "^[^|]*")
    end
    redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
end
redis.call("hset", KEYS[2], ARGV[3], ARGV[4])
local member = band and (string.sub(priority, 1, 1) .. "/" .. (ARGV[6] or ""))
if member and member ~= "d/" then
    -- A lane is a list per priority and org; <queue>.ready ranks the lanes that hold messages
    -- (score: priority band * 1e12 + the queue's pick count when it joined; lua/fetch.lua).
    -- <queue>.laned holds a token per message waiting in a lane (its length is what waits
    -- besides the queue's own list: fleet status, an autoscaler).
    redis.call("rpush", KEYS[3] .. ".laned", "1")
    if redis.call("rpush", KEYS[3] .. ".lane." .. member, ARGV[3]) == 1 then
        local picks = tonumber(redis.call("get", KEYS[3] .. ".seq") or "0")
        redis.call("zadd", KEYS[3] .. ".ready", "NX", band * 1e12 + picks, member)
    end
else
    redis.call("rpush", KEYS[3], ARGV[3])
end
redis.call("lpush", KEYS[4], "1")
redis.call("ltrim", KEYS[4], 0, 7)
return false
