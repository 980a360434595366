-- The runs whose QUEUED rows a producer just inserted new (shared/jobs/run_writer.py): each
-- job id's key, still holding the message id its send claimed it with, says
-- "<message id>|fresh|<day of its row>", and a worker may keep that run's start in Redis
-- (lua/run_claim.lua), then write it in that day's partition at once. A key that holds anything
-- else (another message, a start) is left as it is.
-- KEYS the job id keys; ARGV the message id and the row's day of each (in the order of KEYS).
-- Returns how many were marked.
local marked = 0
for i, key in ipairs(KEYS) do
    local message_id = ARGV[2 * i - 1]
    if redis.call("get", key) == message_id then
        redis.call("set", key, message_id .. "|fresh|" .. ARGV[2 * i], "KEEPTTL")
        marked = marked + 1
    end
end
return marked
