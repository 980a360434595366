-- Enqueue a message unless its job id was already enqueued (atomic dedup + enqueue).
-- KEYS[1] the job id key, KEYS[2] the queue's message hash, KEYS[3] the queue's list,
-- KEYS[4] the queue's wake-up list (an idle fleet consumer blocks on it: shared/broker/consumer.py)
-- ARGV[1] message id, ARGV[2] dedup window (ms), ARGV[3] redis message id, ARGV[4] message data
-- Returns false when enqueued, or the message id that holds the job id.
-- The hash + list layout is Dramatiq's Redis broker's own "enqueue" command (dispatch.lua).
local existing = redis.call("get", KEYS[1])
if existing then
    return existing
end
redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
redis.call("hset", KEYS[2], ARGV[3], ARGV[4])
redis.call("rpush", KEYS[3], ARGV[3])
redis.call("lpush", KEYS[4], "1")
redis.call("ltrim", KEYS[4], 0, 7)
return false
