"""What the dedup keys cost Redis per job id, the instance's own overhead included (docs/scaling.md).

    .venv/bin/python bench/dedup_memory.py            # 200,000 keys
    .venv/bin/python bench/dedup_memory.py -n 1000000

A private redis-server on a free loopback port; N claims shaped as a send writes them (the key
`<namespace>:jobfleet:job-id:<job id>` of an `email:send` job id, the message id as value, the
default dedup window as TTL). Prints `MEMORY USAGE` of one key (its key, value and object) and
`used_memory`'s growth per key (that, plus its slots in the key table and the expiry table).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from bench.redis_server import private_redis
from shared.broker import dedup_key
from shared.config import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200_000, help="dedup keys to write")
    args = parser.parse_args(argv)
    settings = Settings.model_construct()
    window_ms = settings.dedup_window_ms
    directory = Path(tempfile.mkdtemp(prefix="jobfleet-dedup-memory-"))
    try:
        with private_redis(directory) as url:
            client = redis.Redis.from_url(url)
            before = int(client.info("memory")["used_memory"])
            pipe = client.pipeline(transaction=False)
            key = ""
            for i in range(args.n):
                digest = hashlib.sha256(str(i).encode()).hexdigest()[:16]
                job_id = f"{uuid.uuid4()}:email:send:{uuid.uuid4()}:{digest}"
                key = dedup_key(settings.broker_namespace, job_id)
                pipe.set(key, uuid.uuid4().hex, px=window_ms)
                if i % 5_000 == 4_999:
                    pipe.execute()
            pipe.execute()
            after = int(client.info("memory")["used_memory"])
            figures = {
                "keys": args.n,
                "namespace": settings.broker_namespace,
                "ttl_s": client.ttl(key),
                "memory_usage_bytes_each": client.memory_usage(key),
                "used_memory_delta_per_key": round((after - before) / args.n, 1),
                "redis_version": client.info("server")["redis_version"],
            }
            client.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
