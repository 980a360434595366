-- The runs whose QUEUED rows a producer just inserted new (shared/jobs/run_writer.py): each
-- job id's key, still holding the message id its send claimed it with, says "<message id>|fresh",
-- and a worker may keep that run's start in Redis (lua/run_start.lua). A key that holds anything
-- else (another message, a start) is left as it is.
-- KEYS the job id keys, ARGV their message ids (same order). Returns how many were marked.
local marked = 0
for i, key in ipairs(KEYS) do
    if redis.call("get", key) == ARGV[i] then
        redis.call("set", key, ARGV[i] .. "|fresh", "KEEPTTL")
        marked = marked + 1
    end
end
return marked
