// A producer written without any of jobfleet's code: Node.js builtins only (net, crypto),
// speaking RESP to Redis itself. It follows docs/wire-protocol.md to the letter: derive the
// job id (jobid.mjs, §1), lay out the message, and claim the job id and enqueue with the one
// script.
//
//   node tests/wire/producer.mjs --redis 127.0.0.1:6379 --namespace dramatiq \
//        --window-ms 86400000 --schemas tests/contracts/schemas --job export:build \
//        --payload '{"org_id":"...","entity_id":"...","requested_by":"...","type":"JOB_RUNS"}'
//
// A job of the catalog takes its queue, entity type and id rule from the exported contracts
// (`--schemas`, `fleet contracts export`); a job outside it (the tests' `test:echo`) names
// `--queue` and `--entity-type` and hashes every field but `v`.
// `--priority high|default|low` sends it in its org's lane of that priority (§3); without it,
// the message goes to the queue's default lane.
// Prints {"job_id", "message_id", "duplicate", "holder"} as JSON.
import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import { canonical, hashedId, jobId, loadContracts, parse } from "./jobid.mjs";

// The claim-and-enqueue script, copied from docs/wire-protocol.md.
const ENQUEUE_ONCE = `-- Enqueue a message unless its job id was already enqueued (atomic dedup + enqueue), in its lane.
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
`;

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  return out;
}

function command(parts) {
  const chunks = [Buffer.from(`*${parts.length}\r\n`)];
  for (const part of parts) {
    const bytes = Buffer.from(String(part), "utf8");
    chunks.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from("\r\n"));
  }
  return Buffer.concat(chunks);
}

// One reply: a bulk string (null for $-1), an error, a status or an integer.
function parseReply(buffer) {
  const end = buffer.indexOf("\r\n");
  if (end < 0) return undefined;
  const head = buffer.subarray(0, end).toString();
  if (head[0] === "-") throw new Error(head.slice(1));
  if (head[0] === "+" || head[0] === ":") return { value: head.slice(1) };
  if (head[0] === "$") {
    const size = Number(head.slice(1));
    if (size < 0) return { value: null };
    if (buffer.length < end + 2 + size + 2) return undefined;
    return { value: buffer.subarray(end + 2, end + 2 + size).toString("utf8") };
  }
  throw new Error(`unexpected reply ${head}`);
}

function evalScript(address, parts) {
  const [host, port] = address.split(":");
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), host, () => socket.write(command(parts)));
    let buffer = Buffer.alloc(0);
    socket.on("data", (data) => {
      buffer = Buffer.concat([buffer, data]);
      try {
        const reply = parseReply(buffer);
        if (reply !== undefined) {
          socket.end();
          resolve(reply.value);
        }
      } catch (error) {
        socket.destroy();
        reject(error);
      }
    });
    socket.on("error", reject);
  });
}

const opts = args(process.argv.slice(2));
const payload = parse(opts.payload);
let id, queueName, entityType, body;
if (opts.schemas) {
  const contracts = loadContracts(opts.schemas);
  const entry = contracts.index[opts.job];
  const derived = jobId(contracts, opts.job, payload);
  id = derived.jobId;
  body = derived.filled; // the payload as the worker sees it: defaults filled, v set
  queueName = entry.queue;
  entityType = entry.entity_type;
} else {
  const stable = { ...payload };
  delete stable.v;
  id = hashedId(payload.org_id, opts.job, payload.entity_id, stable).jobId;
  body = payload;
  queueName = opts.queue;
  entityType = opts["entity-type"] ?? null;
}
const entityId = body.entity_id ?? body.slot ?? null;
const messageId = randomUUID();
const redisMessageId = randomUUID();
const now = Date.now();
// canonical() writes numbers as the payload wrote them (a float stays a float).
const message = `{"queue_name":${JSON.stringify(queueName)},"actor_name":${JSON.stringify(opts.job)},` +
  `"args":[${canonical(body)}],"kwargs":{},"options":${JSON.stringify({
    job_id: id,
    org_id: body.org_id,
    entity_type: entityType,
    entity_id: entityId === null ? null : String(entityId),
    request_id: null,
    attempt: 1,
    sent_at: now / 1000,
    redis_message_id: redisMessageId,
    ...(opts.priority ? { priority: opts.priority } : {}),
  })},"message_id":${JSON.stringify(messageId)},"message_timestamp":${now}}`;
const ns = opts.namespace;
const queue = `${ns}:${queueName}`;
const holder = await evalScript(opts.redis, [
  "EVAL", ENQUEUE_ONCE, 4,
  `${ns}:jobfleet:job-id:${id}`, `${queue}.msgs`, queue, `${queue}.wake`,
  messageId, opts["window-ms"], redisMessageId, message,
  // The lane (§3): without these two, the default lane.
  ...(opts.priority ? [opts.priority, body.org_id] : []),
]);
console.log(JSON.stringify({
  job_id: id,
  message_id: holder ?? messageId,
  duplicate: holder !== null,
  holder,
}));
