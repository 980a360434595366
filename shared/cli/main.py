"""`fleet`: the operator's command line (console script `fleet = shared.cli.main:app`).

Kernel commands live in their own modules (`jobs`, `dlq`, `outbox`, `contracts`, `settings`);
each domain's commands come from its registration (shared/domains.py) and are loaded only when
used (`lazy.py`).

Errors: a `FleetError` ends the command with one red line on stderr, no traceback; exit code 2
for bad input (invalid payload, unknown job), 1 for everything else. Unreachable Redis or
Postgres is reported the same way. `FLEET_DEBUG=1` shows the traceback instead. Logs go to
stderr at `FLEET_LOG_LEVEL` (default WARNING), so stdout carries only the command's output.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from . import contracts, demo, dlq, jobs, outbox, output, queues, repo, status
from .lazy import register, register_domains
from .settings import config

#: The kernel's own commands loaded on use (heavy imports); domains add theirs through their
#: registrations (shared/domains.py), also loaded only when their command runs (`lazy.py`).
KERNEL_APPS: dict[str, tuple[str, str]] = {
    "run": ("shared.cli.run:run", "Start the whole fleet locally with embedded defaults."),
    "web": (
        "shared.cli.web:web",
        "The operator console in a browser (dead-letter replay, pauses, runs).",
    ),
}

#: Errors that mean bad input rather than a failure of the system.
USAGE_CODES = frozenset({"INVALID_PAYLOAD", "UNKNOWN_JOB", "INVALID_LIMIT", "UNKNOWN_PRIORITY"})
#: Modules whose exceptions mean "a backing service is unreachable or refused".
SERVICE_ERRORS = {
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "sqlalchemy": "postgres",
    "redis": "redis",
}


class FleetApp(typer.Typer):
    """A Typer app that turns fleet errors into one red line and an exit code."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except Exception as exc:
            code = exit_code(exc)
            if code is None or os.environ.get("FLEET_DEBUG"):
                raise
            output.error_line(describe(exc))
            sys.exit(code)
        finally:
            _close_runtime()


def exit_code(exc: BaseException) -> int | None:
    from shared.errors import FleetError

    if isinstance(exc, FleetError):
        return 2 if exc.code in USAGE_CODES else 1
    if _service(exc):
        return 1
    return None


def describe(exc: BaseException) -> str:
    service = _service(exc)
    if service:
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"{service}: {type(exc).__name__}: {first}"
    return str(exc)


def _service(exc: BaseException) -> str | None:
    return SERVICE_ERRORS.get(type(exc).__module__.split(".")[0])


def _close_runtime() -> None:
    """Flush and close the runtime a command built (pending QUEUED rows get written)."""
    runtime_module = sys.modules.get("shared.runtime")
    if runtime_module is None:
        return
    previous = runtime_module.set_runtime(None)
    if previous is not None:
        previous.close()


app = FleetApp(
    name="fleet",
    help="Operate the jobfleet: jobs, dead letters, the outbox, contracts, the database.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


#: Commands that reach no Redis nor Postgres: nothing to say about services.
NO_SERVICES = frozenset({"contracts", "config", "repo"})


@app.callback()
def _configure(ctx: typer.Context) -> None:
    # Library logs (outbox, run writer, ...) go to stderr, so stdout stays clean for --json.
    from shared.observability.logging import configure_logging

    configure_logging(
        level=os.environ.get("FLEET_LOG_LEVEL", "WARNING"), fmt="console", process="fleet"
    )
    adopted = _adopt_local_fleet()
    if not adopted and ctx.invoked_subcommand not in NO_SERVICES:
        _say_unconfigured()


def _adopt_local_fleet() -> bool:
    """With nothing configured (no REDIS_URL, no DATABASE_URL), use the services of the fleet
    `make run` is running here (`var/run/services.json`), and say so: a second terminal then
    reaches the fleet's own embedded Redis and Postgres, never the defaults silently."""
    from shared.config import get_settings
    from shared.launcher import services_file

    if "REDIS_URL" in os.environ or "DATABASE_URL" in os.environ:
        return False  # configured: the environment says which services, whatever runs here
    var_dir = os.environ.get("VAR_DIR") or get_settings().var_dir
    file = services_file.path(var_dir)
    exports = services_file.read_live(file)
    if not exports:
        return False
    taken = {k: v for k, v in exports.items() if k not in os.environ}
    os.environ.update(taken)
    get_settings.cache_clear()
    from rich.markup import escape

    from .settings import redact_url

    shown = ", ".join(f"{k}={redact_url(v)}" for k, v in taken.items())
    output.err.print(escape(f"using the running local fleet's services ({file}): {shown}"))
    return True


def _say_unconfigured() -> None:
    """Name the Redis and Postgres a command uses when the environment did not choose them (a
    default, or a `.env` file): after the local fleet stopped, the CLI read 127.0.0.1:6379 and
    :5432 (another server's, maybe) without a word. Configured by REDIS_URL and DATABASE_URL,
    it is the caller's choice and nothing is printed."""
    from rich.markup import escape

    from shared.config import Settings, get_settings

    from .settings import redact_url

    settings = get_settings()
    defaults = Settings.model_construct()
    said = []
    for variable, value, default in (
        ("REDIS_URL", settings.redis_url, defaults.redis_url),
        ("DATABASE_URL", settings.database_url, defaults.database_url),
    ):
        if variable in os.environ:
            continue
        origin = "the default" if value == default else "from .env"
        said.append(f"{variable}={redact_url(value)} ({origin})")
    if said:
        output.err.print(
            escape(
                "using " + ", ".join(said) + ": not set in the environment and no local fleet "
                "running here (set REDIS_URL and DATABASE_URL to choose)"
            )
        )


app.add_typer(jobs.app, name="jobs")
app.add_typer(dlq.app, name="dlq")
app.add_typer(outbox.app, name="outbox")
app.add_typer(queues.app, name="queues")
app.add_typer(contracts.app, name="contracts")
app.add_typer(repo.app, name="repo")

db_app = typer.Typer(help="Database schema: apply migrations, wait for them.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.command("config")(config)
app.command("status")(status.status)
app.command("demo")(demo.demo)


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[
        str, typer.Option("--revision", help="Target revision (default: every head).")
    ] = "heads",
) -> None:
    """Create the database if missing and apply every migration (kernel and domains)."""
    from shared.config import get_settings
    from shared.db.migrate import upgrade

    from .settings import redact_url

    url = get_settings().database_url
    upgrade(url, revision)
    output.out.print(f"database {output.cell(redact_url(url))} upgraded to {revision}")


@db_app.command("wait")
def db_wait(
    timeout: Annotated[
        float, typer.Option("--timeout", help="Give up after this many seconds (exit 1).")
    ] = 300.0,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between two looks.")] = 2.0,
) -> None:
    """Wait until every migration head (kernel and domains) is applied, then exit 0.

    A Kubernetes init container of each worker and of the scheduler (compose/k8s): a pod of a new
    release starts once its migration Job has run. Postgres not answering yet is waited for too.
    """
    from shared.config import get_settings
    from shared.db.schema import wait_migrated

    from .settings import redact_url

    settings = get_settings()

    def said(reason: str) -> None:
        output.err.print(f"waiting for the schema: {output.cell(reason)}")

    wait_migrated(settings.database_dsn, timeout_s=timeout, interval_s=interval, on_wait=said)
    output.out.print(f"database {output.cell(redact_url(settings.database_url))} is migrated")


DOMAINS = register(app, KERNEL_APPS) + register_domains(app)
