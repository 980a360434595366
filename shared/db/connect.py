"""How a process opens Postgres connections: directly, or through a transaction-mode pooler.

Behind PgBouncer in transaction pooling mode (`DATABASE_POOLER=transaction`), consecutive
transactions of one client connection run on different server connections, so nothing may
outlive a transaction on the server side:

- psycopg prepares a statement run `prepare_threshold` times (5) on a connection; the next
  execution names a statement that another server connection never saw (PgBouncer 1.18 does
  not track prepared statements): `prepare_threshold=None` turns that off;
- a session `SET` sticks to whichever server connection ran it, and then applies to other
  clients' transactions: settings move into each transaction (`SET LOCAL`, see `RunWriter`);
- PgBouncer refuses the startup parameter `options` (`-c name=value`): none is sent;
- `LISTEN` hears nothing once its server connection goes back to the pool: the outbox relay
  polls instead (`shared/outbox/relay.py`);
- a session advisory lock may be released on another server connection than the one that
  holds it: `fleet db upgrade` (its lock, and CREATE INDEX CONCURRENTLY outside a transaction)
  needs a direct or session-mode DATABASE_URL (docs/scaling.md).

Short-lived connections (probes, CLI reads) never run a statement five times and need nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import Settings

if TYPE_CHECKING:
    from ..jobs.run_writer import RunWriter


def pooled(settings: Settings) -> bool:
    """True when connections go through a transaction-mode pooler."""
    return settings.database_pooler == "transaction"


def connect_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of `psycopg.connect` (and of a pool's `kwargs`) for this process."""
    return {"prepare_threshold": None} if pooled(settings) else {}


def run_writer(settings: Settings, **options: Any) -> RunWriter:
    """A run writer whose connections are made as `settings` say: through a transaction-mode
    pooler nothing is prepared and each batch sets its own commit mode (`RunWriter(pooled=)`);
    direct, its statements are prepared at their first use. `options` go to `RunWriter`."""
    import psycopg

    from ..jobs.run_writer import RunWriter

    dsn, kwargs = settings.database_dsn, connect_kwargs(settings)
    options.setdefault("max_batch", settings.tracking_batch_max)
    return RunWriter(
        lambda: psycopg.connect(dsn, autocommit=True, connect_timeout=5, **kwargs),
        pooled=pooled(settings),
        **options,
    )
