// jobfleet's producer kit for Node.js: send or stage the fleet's jobs with the same contracts,
// job ids and enqueue script as the Python producers (docs/producers.md, "From Node.js").
export { canonical } from "./canonical";
export { BrokerUnavailable, FleetError, InvalidPayload, type PayloadIssue, SchemaNotMigrated, UnknownJob } from "./errors";
export { CONTRACTS, type IdRule } from "./generated/contracts";
export { chainJobId, jobId, jobIdOf } from "./jobid";
export { type Job, type JobName, job, jobs, type PayloadOf, validate } from "./jobs";
export { DEFAULT_DEDUP_WINDOW_MS, PRIORITIES, type Priority, type RedisLike, send, type SendOptions, type SendResult } from "./send";
export { type SqlLike, stage, type StageOptions, type Staged } from "./stage";
