"""A private redis-server for a benchmark that counts Redis commands (nothing else talks to it)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from shared.launcher.net import free_port


@contextmanager
def private_redis(directory: Path, *, appendonly: bool = False) -> Iterator[str]:
    """Start redis-server on a free loopback port with its data in `directory`; yield its URL."""
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--appendonly", "yes" if appendonly else "no", "--dir", str(directory)]
    if appendonly:
        argv += ["--appendfsync", "everysec"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)


def commandstats(client: redis.Redis) -> dict[str, int]:
    """Calls so far, by command."""
    info: dict[str, Any] = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(stat["calls"]) for name, stat in info.items()}
