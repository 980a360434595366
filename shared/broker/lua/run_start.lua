-- A run's start kept in Redis, on its job id's key (the dedup key lua/enqueue_once.lua claims
-- with the message id as its value), so that a short job is written to Postgres once, with its
-- outcome (shared/broker/starts.py, docs/kernel.md "One durable write per short job"). The key
-- has no memory, expiry or acknowledgement of its own: it lives for the dedup window, and a
-- later delivery of the same message reads there what became of the first. Its values:
--   <message id>                          sent; its run may exist already (ask the run store)
--   <message id>|fresh|<day>                     its QUEUED row was inserted new, in that day's
--                                                partition: a start may be kept
--   <message id>|<owner>|<until>|<start>|<day>   a start kept by <owner> (lease until, start: ms)
--   <message id>|written                         a start of this message is in job_runs
-- KEYS[1] the job id key
-- ARGV[1] mode: "written" | "cancel" (a start is kept by lua/run_claim.lua)
-- written: ARGV[2] message id, ARGV[3] owner. This message's start is in job_runs (kept by
--          this owner, or written at once): a later delivery asks the run store. Returns 1
--          when the key changed.
-- cancel:  the key is released unless a start is kept on it. Returns the value when one is
--          (then the key stays), else 1 (released or absent).
local mode = ARGV[1]
local value = redis.call("get", KEYS[1])
local function kept_by(owner)
    return value and string.find(value, ARGV[2] .. "|" .. owner .. "|", 1, true) == 1
end
if mode == "written" then
    local fresh = ARGV[2] .. "|fresh|"
    if value == ARGV[2] or string.sub(value or "", 1, #fresh) == fresh or kept_by(ARGV[3]) then
        redis.call("set", KEYS[1], ARGV[2] .. "|written", "KEEPTTL")
        return 1
    end
    return 0
elseif mode == "cancel" then
    local _, bars = string.gsub(value or "", "|", "")
    if bars == 4 then
        return value
    end
    redis.call("del", KEYS[1])
    return 1
end
return redis.error_reply("unknown mode " .. tostring(mode))
