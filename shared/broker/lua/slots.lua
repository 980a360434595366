-- Giving back concurrency slots: not a script of its own but a part of release.lua and
-- ack_many.lua (Redis scripts cannot load each other: `scripts.py` puts this text in place
-- of their include line). lua/fetch.lua takes a slot for each message it hands
-- out: it counts the message in `<queue>.busy` (per org, and all of them under `*`) and
-- records message id -> org in the worker's held hash (`<namespace>:__held__.<worker>.<queue>`).

-- Forget the slots that `ids` hold in `held_key` (an id given twice counts once) and count
-- them per org into `freed`. Returns how many were held. At most 1,000 ids per command, well
-- under Lua's limit on unpacked arguments (Dramatiq's dispatch.lua bounds its own likewise).
local function forget_held(held_key, ids, freed)
    local unique, seen = {}, {}
    for _, message_id in ipairs(ids) do
        if not seen[message_id] then
            seen[message_id] = true
            unique[#unique + 1] = message_id
        end
    end
    local total = 0
    for first = 1, #unique, 1000 do
        local last = math.min(first + 999, #unique)
        local held = 0
        for _, org in ipairs(redis.call("hmget", held_key, unpack(unique, first, last))) do
            if org then
                freed[org] = (freed[org] or 0) + 1
                held = held + 1
            end
        end
        if held > 0 then
            redis.call("hdel", held_key, unpack(unique, first, last))
            total = total + held
        end
    end
    return total
end

-- Give back `total` slots of the queue `queue_full_name`, `freed` (org -> count) per org.
local function give_back(queue_full_name, freed, total)
    if total == 0 then
        return
    end
    local busy_key = queue_full_name .. ".busy"
    for org, n in pairs(freed) do
        redis.call("hincrby", busy_key, org, -n)
    end
    redis.call("hincrby", busy_key, "*", -total)
    -- A message may wait for one of these slots (lua/fetch.lua): wake an idle consumer.
    if redis.call("zcard", queue_full_name .. ".ready") > 0 then
        redis.call("lpush", queue_full_name .. ".wake", "1")
        redis.call("ltrim", queue_full_name .. ".wake", 0, 7)
    end
end
