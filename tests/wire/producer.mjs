// A producer written without any of jobfleet's code: Node.js builtins only (net, crypto),
// speaking RESP to Redis itself. It follows docs/wire-protocol.md to the letter: derive the
// job id, lay out the message, and claim the job id and enqueue with the one script.
//
//   node tests/wire/producer.mjs --redis 127.0.0.1:6379 --namespace dramatiq \
//        --window-ms 2592000000 --queue testq --job test:echo --entity-type echo \
//        --payload '{"v":2,"org_id":"...","entity_id":"...","message":"hi","times":1}'
//
// Prints {"job_id", "message_id", "duplicate", "holder"} as JSON.
import { createHash, randomUUID } from "node:crypto";
import { connect } from "node:net";

// The claim-and-enqueue script, copied from docs/wire-protocol.md.
const ENQUEUE_ONCE = `-- Enqueue a message unless its job id was already enqueued (atomic dedup + enqueue).
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
`;

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, "")] = argv[i + 1];
  return out;
}

// Canonical JSON: sorted keys (by code point), no whitespace, non-ASCII as itself.
function canonical(value) {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort((a, b) => {
      const x = [...a].map((c) => c.codePointAt(0));
      const y = [...b].map((c) => c.codePointAt(0));
      for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
      return x.length - y.length;
    });
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

function jobId(jobName, payload) {
  const stable = { ...payload };
  delete stable.v;
  const digest = createHash("sha256").update(canonical(stable), "utf8").digest("hex");
  return `${payload.org_id}:${jobName}:${payload.entity_id}:${digest.slice(0, 16)}`;
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
const payload = JSON.parse(opts.payload);
const id = jobId(opts.job, payload);
const messageId = randomUUID();
const redisMessageId = randomUUID();
const message = {
  queue_name: opts.queue,
  actor_name: opts.job,
  args: [payload],
  kwargs: {},
  options: {
    job_id: id,
    org_id: payload.org_id,
    entity_type: opts["entity-type"] ?? null,
    entity_id: payload.entity_id,
    request_id: null,
    attempt: 1,
    sent_at: Date.now() / 1000,
    redis_message_id: redisMessageId,
  },
  message_id: messageId,
  message_timestamp: Date.now(),
};
const ns = opts.namespace;
const queue = `${ns}:${opts.queue}`;
const holder = await evalScript(opts.redis, [
  "EVAL", ENQUEUE_ONCE, 4,
  `${ns}:jobfleet:job-id:${id}`, `${queue}.msgs`, queue, `${queue}.wake`,
  messageId, opts["window-ms"], redisMessageId, JSON.stringify(message),
]);
console.log(JSON.stringify({
  job_id: id,
  message_id: holder ?? messageId,
  duplicate: holder !== null,
  holder,
}));
