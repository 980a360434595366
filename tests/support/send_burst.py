"""Send one payload many times from several threads: a producer process of the dedup tests.

    python -m tests.support.send_burst PAYLOAD_JSON THREADS SENDS_PER_THREAD GO_FILE

Prints `ready` once warmed up, waits until GO_FILE exists (so several processes start together),
then prints one JSON line: how many sends were new / duplicate and the distinct ids answered.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from typing import Any

from shared.jobs.send import SendResult
from shared.runtime import get_runtime
from tests.support.jobs import ECHO


def main(payload: dict[str, Any], threads: int, sends: int, go_file: str) -> dict[str, Any]:
    get_runtime().pool.wait(timeout=10)  # connect before the start line
    get_runtime().broker.client.ping()
    results: list[SendResult] = []
    errors: list[str] = []
    lock = threading.Lock()

    def burst() -> None:
        mine = []
        try:
            for _ in range(sends):
                mine.append(ECHO.send(payload))
        except Exception as exc:  # reported, and the test fails on it
            errors.append(repr(exc))
        with lock:
            results.extend(mine)

    workers = [threading.Thread(target=burst) for _ in range(threads)]
    print("ready", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.002)
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    get_runtime().close()  # every QUEUED row written before this process reports
    counts = Counter("duplicate" if r.duplicate else "new" for r in results)
    return {
        "new": counts["new"],
        "duplicate": counts["duplicate"],
        "job_ids": sorted({r.job_id for r in results}),
        "message_ids": sorted({str(r.message_id) for r in results}),
        "errors": errors,
    }


if __name__ == "__main__":
    out = main(json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    print(json.dumps(out), flush=True)
