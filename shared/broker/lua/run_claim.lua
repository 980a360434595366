-- Claim the starts of runs a worker takes (shared/broker/starts.py, `RunStarts.claim_many`): for
-- each job id key that says "<message id>|fresh|<day>" (its QUEUED row inserted new, in that
-- day's partition), the start is kept there, "<message id>|<owner>|<lease until ms>|<started
-- ms>|<day>" (lua/run_start.lua says what each value of the key means). Many runs in one call
-- if need be (a worker thread claims its own run's, one key).
-- KEYS the job id keys; ARGV[1] owner, ARGV[2] now (ms), ARGV[3] lease (ms), ARGV[4...] the
-- message ids (in the order of KEYS).
-- Returns, per key: "+<day>" when its start is now kept, 0 when there is no key, else its value.
local now = tonumber(ARGV[2])
local record = "|" .. ARGV[1] .. "|" .. (now + tonumber(ARGV[3])) .. "|" .. now .. "|"
local replies = {}
for i, key in ipairs(KEYS) do
    local message_id = ARGV[i + 3]
    local value = redis.call("get", key)
    local fresh = message_id .. "|fresh|"
    if not value then
        replies[i] = 0
    elseif string.sub(value, 1, #fresh) == fresh then
        local day = string.sub(value, #fresh + 1)
        redis.call("set", key, message_id .. record .. day, "KEEPTTL")
        replies[i] = "+" .. day
    else
        replies[i] = value
    end
end
return replies
