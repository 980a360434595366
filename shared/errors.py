"""One error tree for the fleet. The docstring of each class is its default message."""

from __future__ import annotations

from typing import Any


class FleetError(Exception):
    """Base class for every error raised by jobfleet."""

    code = "ERROR"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or self.code).strip())


# -- Producer side ---------------------------------------------------------------------------


class PayloadError(FleetError, ValueError):
    """The payload does not satisfy the job's contract."""

    code = "INVALID_PAYLOAD"

    def __init__(self, job_name: str, errors: list[dict[str, Any]]) -> None:
        self.job_name = job_name
        self.errors = errors
        details = "; ".join(f"{_loc(e)}: {e.get('msg', '')}" for e in errors)
        super().__init__(f"invalid payload for {job_name}: {details}")


def _loc(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ())) or "<payload>"


class UnknownPriority(FleetError, ValueError):
    """A job's priority is one of high, default, low."""

    code = "UNKNOWN_PRIORITY"


class DependencyUnavailable(FleetError):
    """A service the fleet depends on (a node, a server) cannot be reached or did not answer:
    its outage, not the caller's fault; logged as an outage (`shared.outage.OutageLog`), not as
    a failure with a traceback per try."""

    code = "DEPENDENCY_UNAVAILABLE"


class BrokerUnavailable(FleetError):
    """The broker (Redis) cannot be reached; nothing was enqueued."""

    code = "BROKER_UNAVAILABLE"


class TrackingUnavailable(FleetError):
    """The run store (Postgres) cannot be reached; nothing was enqueued."""

    code = "TRACKING_UNAVAILABLE"


class SchemaNotMigrated(TrackingUnavailable):
    """database not migrated: run `fleet db upgrade`"""

    code = "NOT_MIGRATED"


class UnknownJob(FleetError):
    """No job of that name is declared."""

    code = "UNKNOWN_JOB"


class RunNotFound(FleetError):
    """No run with that job id (for that org)."""

    code = "NOT_FOUND"


class InvalidState(FleetError):
    """The run is not in a state that allows this operation."""

    code = "INVALID_STATE"


# -- Handler side ----------------------------------------------------------------------------


class PermanentError(FleetError):
    """The job failed and retrying cannot help."""

    code = "PERMANENT"

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        super().__init__(message)
        if code:
            self.code = code


class InvalidPayload(PermanentError):
    """The message payload is invalid or of an unknown version."""

    code = "INVALID_PAYLOAD"


class JobCanceled(PermanentError):
    """The job was canceled by an operator."""

    code = "CANCELED"


class LeaseLost(FleetError):
    """Another execution took this run over: this worker stalled past its lease (a frozen
    process, a long GC or swap pause). The execution stops and records no outcome."""

    code = "LEASE_LOST"


class AlreadyDone(FleetError):
    """The effect already happened (an earlier attempt or another path): a success."""

    code = "ALREADY_DONE"


class RetryLater(FleetError):
    """Run the job again after `delay_ms` without counting an attempt (rate limits, locks)."""

    code = "RETRY_LATER"

    def __init__(self, message: str | None = None, *, delay_ms: int = 1_000) -> None:
        super().__init__(message)
        self.delay_ms = delay_ms


# -- Set-up ----------------------------------------------------------------------------------


class UnsupportedDramatiq(FleetError):
    """The installed Dramatiq is not the minor version `shared/broker/` was written against."""

    code = "UNSUPPORTED_DRAMATIQ"
