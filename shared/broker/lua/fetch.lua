-- Fetch up to ARGV[4] messages of a queue for a worker: Dramatiq's own "fetch" command
-- (dispatch.lua: heartbeat, LPOP, SADD to the worker's unacked set), except that it returns
-- each message's Redis id with its data, so that a message that cannot be decoded can still
-- be acknowledged, that a fetch sent again gets what it took the first time
-- (shared/broker/consumer.py), and that it picks fairly among the queue's lanes, within the
-- concurrency limits (docs/kernel.md, "Fair share, limits and priorities").
-- KEYS[1] the broker namespace
-- ARGV[1] now (ms), ARGV[2] queue name, ARGV[3] worker (broker) id, ARGV[4] most messages,
-- ARGV[5] fetch id: the same as the last fetch's when that fetch is sent again (redis-py sends
-- a command again after a lost reply; a consumer whose fetch failed sends it again), which
-- then returns the messages that fetch took and still holds, and takes no others.
-- ARGV[6] the limits the settings give this queue, JSON {"queue": n, "org": n, "orgs": {org: n}}
-- or "" (those set with `fleet queues limit`, in the hash `jobfleet:limits:<queue>`, win).
-- Returns {id1, data1, id2, data2, ...}; a data is nil when the id has no message.
local namespace = KEYS[1]
local queue = ARGV[2]
local queue_full_name = namespace .. ":" .. queue
local queue_messages = queue_full_name .. ".msgs"
local queue_acks = namespace .. ":__acks__." .. ARGV[3] .. "." .. queue
local last_fetch = namespace .. ":__fetched__." .. ARGV[3] .. "." .. queue
redis.call("zadd", namespace .. ":__heartbeats__", ARGV[1], ARGV[3])
local out = {}
local last = redis.call("get", last_fetch)
-- The record starts with its fetch id (`["<id>",...`): decoded only for a resend.
local resent = '["' .. ARGV[5] .. '"'
if last and string.sub(last, 1, #resent) == resent then
    local taken = cjson.decode(last)
    for i = 2, #taken do
        if redis.call("sismember", queue_acks, taken[i]) == 1 then
            out[#out + 1] = taken[i]
            out[#out + 1] = redis.call("hget", queue_messages, taken[i])
        end
    end
    return out
end
local taken = {ARGV[5]}
local function take(message_id)
    redis.call("sadd", queue_acks, message_id)
    out[#out + 1] = message_id
    out[#out + 1] = redis.call("hget", queue_messages, message_id)
    taken[#taken + 1] = message_id
end
local function done()
    if #taken > 1 then
        -- Kept long enough for any resend; a worker that is gone leaves nothing behind for good.
        redis.call("set", last_fetch, cjson.encode(taken), "PX", 600000)
    end
    return out
end

if string.sub(queue, -3) == ".DQ" then
    -- A delay queue: in order, no lanes, no limits (its messages wait for their eta).
    for _ = 1, tonumber(ARGV[4]) do
        local message_id = redis.call("lpop", queue_full_name)
        if not message_id then
            break
        end
        take(message_id)
    end
    return done()
end

-- Lanes: `<queue>` itself (the default lane, member "d/": senders that name no lane, requeued
-- messages) and `<queue>.lane.<p>/<org>` (p: h, d, l). `<queue>.ready` ranks the lanes that
-- hold messages: score = band of the priority * W + the pick count when the lane was last
-- served (or joined), so the lowest score of a band is the lane served longest ago.
local ready = queue_full_name .. ".ready"
-- A token per message waiting in a lane other than the default (lua/enqueue_once.lua).
local laned = queue_full_name .. ".laned"
local plain = redis.call("llen", queue_full_name)
if plain == 0 and redis.call("zcard", ready) == 0 then
    return out -- idle: one command more than a plain LPOP
end
local W = 1e12
local BAND = {h = 0, d = 1, l = 2}
-- Weighted picks between priorities, 6:3:1 over ten picks, never two non-high picks in a row;
-- a priority with nothing to take gives its turn to the next one in ORDER.
local PATTERN = {"h", "d", "h", "h", "d", "h", "l", "h", "d", "h"}
local ORDER = {h = {"h", "d", "l"}, d = {"d", "h", "l"}, l = {"l", "h", "d"}}
-- Lanes looked at per priority and pick: the lanes over their org's limit are skipped.
local SCAN = 32
local seq_key = queue_full_name .. ".seq"
local seq = tonumber(redis.call("get", seq_key) or "0")
if plain > 0 then
    redis.call("zadd", ready, "NX", BAND.d * W + seq, "d/")
end

local settings = {}
if ARGV[6] and ARGV[6] ~= "" then
    settings = cjson.decode(ARGV[6])
end
local set_orgs = type(settings.orgs) == "table" and settings.orgs or {}
local stored = {}
local flat = redis.call("hgetall", namespace .. ":jobfleet:limits:" .. queue)
for i = 1, #flat, 2 do
    stored[flat[i]] = flat[i + 1]
end
local function positive(value)
    local n = tonumber(value)
    if n and n > 0 then
        return n
    end
    return nil
end
local queue_limit = positive(stored["queue"]) or positive(settings.queue)
local org_default = positive(stored["org"]) or positive(settings.org)
local busy_key = queue_full_name .. ".busy"
local held_key = namespace .. ":__held__." .. ARGV[3] .. "." .. queue
local busy_total = tonumber(redis.call("hget", busy_key, "*") or "0")
local busy = {}
local added = {}
local added_total = 0

-- "-": a message that names no org (limited by the queue's limit only).
local function blocked(org)
    if org == "-" then
        return false
    end
    local limit = positive(stored["org:" .. org]) or positive(set_orgs[org]) or org_default
    if not limit then
        return false
    end
    if busy[org] == nil then
        busy[org] = tonumber(redis.call("hget", busy_key, org) or "0")
    end
    return busy[org] >= limit
end

local function lane_key(member)
    if member == "d/" then
        return queue_full_name
    end
    return queue_full_name .. ".lane." .. member
end

-- After a pick: the lane goes behind the others of its priority, or out when empty.
local function served(member)
    if redis.call("llen", lane_key(member)) > 0 then
        redis.call("zadd", ready, BAND[string.sub(member, 1, 1)] * W + seq, member)
    else
        redis.call("zrem", ready, member)
    end
end

-- The org and priority a message's data names (a message sent to the default lane).
local function lane_of(data)
    if not data then
        return "-", nil
    end
    local ok, message = pcall(cjson.decode, data)
    if not ok or type(message) ~= "table" or type(message.options) ~= "table" then
        return "-", nil
    end
    local org = message.options.org_id
    if type(org) ~= "string" or org == "" then
        org = "-"
    end
    local priority = message.options.priority
    if priority ~= "high" and priority ~= "low" then
        priority = "default"
    end
    return org, priority
end

local skip = {}
-- One message of lane `member`, with its org; nil when the lane has none it may take now.
local function pop(member)
    local key = lane_key(member)
    if member ~= "d/" then
        local org = string.sub(member, 3)
        if blocked(org) then
            skip[member] = true
            return nil
        end
        local message_id = redis.call("lpop", key)
        if not message_id then
            redis.call("zrem", ready, member)
            return nil
        end
        redis.call("lpop", laned)
        return message_id, org
    end
    for _ = 1, SCAN do
        local message_id = redis.call("lpop", key)
        if not message_id then
            redis.call("zrem", ready, member)
            return nil
        end
        local org, priority = lane_of(redis.call("hget", queue_messages, message_id))
        if not blocked(org) then
            return message_id, org
        end
        -- Over its org's limit: to the front of its org's own lane, where it waits its turn
        -- without holding up the other orgs' messages of the default lane.
        local own = string.sub(priority, 1, 1) .. "/" .. org
        redis.call("rpush", laned, "1")
        if redis.call("lpush", lane_key(own), message_id) == 1 then
            redis.call("zadd", ready, "NX", BAND[string.sub(own, 1, 1)] * W + seq, own)
        end
        skip[own] = true
    end
    skip[member] = true
    return nil
end

for _ = 1, tonumber(ARGV[4]) do
    if queue_limit and busy_total >= queue_limit then
        break
    end
    local message_id, org, member = nil, nil, nil
    for _, p in ipairs(ORDER[PATTERN[seq % 10 + 1]]) do
        local low = BAND[p] * W
        local lanes = redis.call("zrangebyscore", ready, low, low + W - 1, "LIMIT", 0, SCAN)
        for _, lane in ipairs(lanes) do
            if not skip[lane] then
                message_id, org = pop(lane)
                if message_id then
                    member = lane
                    break
                end
            end
        end
        if message_id then
            break
        end
    end
    if not message_id then
        break
    end
    seq = seq + 1
    served(member)
    take(message_id)
    redis.call("hset", held_key, message_id, org)
    busy_total = busy_total + 1
    added_total = added_total + 1
    added[org] = (added[org] or 0) + 1
    if busy[org] ~= nil then
        busy[org] = busy[org] + 1
    end
end
if added_total > 0 then
    for org, n in pairs(added) do
        redis.call("hincrby", busy_key, org, n)
    end
    redis.call("hincrby", busy_key, "*", added_total)
    redis.call("set", seq_key, seq)
    -- Who holds slots of this queue: a dead holder's slots are released (lua/release.lua).
    redis.call("sadd", queue_full_name .. ".holders", ARGV[3])
end
return done()
