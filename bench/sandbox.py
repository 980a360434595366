"""One benchmark run's private corner of the shared services.

Redis and Postgres on this machine are shared with other sessions (tests, helpers): a run uses
its own broker namespace `jobfleet-bench-<hex>` and its own database `jobfleet_bench_<hex>`,
and removes both at the end, whatever happened in between. Never FLUSHALL, never a foreign
database.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
import redis
from sqlalchemy.engine import make_url

from shared.config import Settings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Sandbox:
    base: Settings
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    created: bool = False

    @property
    def namespace(self) -> str:
        return f"jobfleet-bench-{self.run_id}"

    @property
    def database_name(self) -> str:
        return f"jobfleet_bench_{self.run_id}"

    @property
    def database_url(self) -> str:
        url = make_url(self.base.database_url).set(database=self.database_name)
        return url.render_as_string(hide_password=False)

    @property
    def settings(self) -> Settings:
        """The settings of every process of this run (producer and workers)."""
        return Settings(
            redis_url=self.base.redis_url,
            database_url=self.database_url,
            broker_namespace=self.namespace,
            health_port=0,
            prometheus_multiproc_dir=None,
        )

    @property
    def dsn(self) -> str:
        return self.settings.database_dsn

    def env(self, **extra: str) -> dict[str, str]:
        """Environment of a spawned worker: this run's services, nothing inherited that would
        point it elsewhere (health port, multi-process metrics dir, a worker timeout)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k.upper()
            not in {"HEALTH_PORT", "PROMETHEUS_MULTIPROC_DIR", "DRAMATIQ_WORKER_TIMEOUT"}
        }
        env.update(
            REDIS_URL=self.base.redis_url,
            DATABASE_URL=self.database_url,
            BROKER_NAMESPACE=self.namespace,
            HEALTH_PORT="0",
            PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p),
            **extra,
        )
        return env

    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.base.redis_url, decode_responses=True)

    # -- life cycle --------------------------------------------------------------------------

    def create(self) -> None:
        from shared.db.migrate import upgrade

        self.created = True  # set first: a half-created database is still dropped
        upgrade(self.database_url)

    def reset(self) -> None:
        """Between repetitions: empty job_runs and this run's Redis keys."""
        self.delete_keys()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE job_runs")

    def delete_keys(self) -> int:
        client = self.redis()
        try:
            deleted = 0
            batch: list[Any] = []
            for key in client.scan_iter(f"{self.namespace}:*", count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    deleted += int(client.delete(*batch))
                    batch = []
            if batch:
                deleted += int(client.delete(*batch))
            return deleted
        finally:
            client.close()

    def destroy(self) -> None:
        """Delete this run's keys and drop its database (only ever the one it created)."""
        self.delete_keys()
        if not self.created:
            return
        url = make_url(self.database_url)
        name = url.database
        assert name and name.startswith("jobfleet_bench_"), name
        admin = url.set(database="postgres").render_as_string(hide_password=False)
        admin = admin.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        self.created = False
