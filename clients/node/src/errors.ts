// The errors of the Python producers (shared/errors.py), for the same situations.

/** Base of every error this package raises. */
export class FleetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** One refusal of a payload: where (a field path, as the Python errors write it) and why. */
export interface PayloadIssue {
  path: string;
  message: string;
}

/** The payload is refused by its contract; nothing was sent or staged. */
export class InvalidPayload extends FleetError {
  constructor(
    readonly job: string,
    readonly issues: PayloadIssue[],
  ) {
    super(`invalid payload for ${job}: ${issues.map((i) => `${i.path || "(payload)"}: ${i.message}`).join("; ")}`);
  }
}

/** No job of that name is declared by the fleet. */
export class UnknownJob extends FleetError {}

/** Redis did not answer: nothing was enqueued (send again: the job id deduplicates). */
export class BrokerUnavailable extends FleetError {
  constructor(
    readonly jobId: string,
    cause: unknown,
  ) {
    super(`the broker (Redis) is unavailable; job ${jobId} was not sent: ${String(cause)}`);
    this.cause = cause;
  }
}

/** The database has no jobfleet schema yet (`fleet db upgrade` creates it). */
export class SchemaNotMigrated extends FleetError {
  constructor(cause: unknown) {
    super(`the jobfleet tables are missing: run \`fleet db upgrade\` (${String(cause)})`);
    this.cause = cause;
  }
}
