"""The email domain's own cost per email: `workers.email.delivery.deliver` called in-process,
without the broker and the run-tracking kernel, from T threads against a private Postfix.

    .venv/bin/python bench/email_deliver.py [-n 2000] [--threads 8] [--profile out.txt]

What `bench/email_throughput.py` cannot separate: the rate and the CPU milliseconds per email
of this process (rendering, message build, the SMTP pool, psycopg) and of Postgres for the
domain's statements alone. `--profile`: cProfile of every thread (tottime and cumtime tops).
Runs in its own database (bench/sandbox.py), dropped at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.email_throughput import ORG, free_port, uptime  # noqa: E402
from bench.proc_cpu import CpuMeter  # noqa: E402
from bench.sandbox import Sandbox  # noqa: E402
from shared.config import Settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--profile", type=Path, help="write cProfile tops here")
    args = parser.parse_args()

    from shared.jobs.context import JobContext
    from shared.runtime import Runtime
    from tests.workers.email import postfix as postfix_instance
    from workers.email.contracts import EmailSendV1
    from workers.email.delivery import deliver
    from workers.email.settings import email_settings
    from workers.email.wiring import build_mailer

    sandbox = Sandbox(Settings())
    tmp = Path(tempfile.mkdtemp(prefix="jobfleet-email-deliver-"))
    tmp.chmod(0o755)
    port = free_port()
    postfix = postfix_instance.Postfix(tmp / "postfix", port=port, deliver=False)
    try:
        sandbox.create()
        postfix.start()
        runtime = Runtime(sandbox.settings)
        settings = email_settings().model_copy(
            update={"smtp_host": "127.0.0.1", "smtp_port": port, "smtp_pool_size": args.threads}
        )
        mailer = build_mailer(runtime, settings)

        def payload(i: int) -> EmailSendV1:
            return EmailSendV1(
                org_id=ORG, entity_id=uuid.uuid4(), template_key="otp-code", lang="en",
                recipient_email=f"d{i}@example.com", variables={"CODE": f"{i:06d}", "EXPIRES_MINUTES": "10"},
            )  # fmt: skip

        def job(i: int) -> JobContext:
            return JobContext(
                job_id=uuid.uuid4().hex, job_name="email:send", queue="email", org_id=ORG,
                attempt=1, max_attempts=3, message_id=uuid.uuid4().hex,
            )  # fmt: skip

        profiles: list[cProfile.Profile] = []

        def run(n: int, threads: int, profile: bool) -> float:
            work = [(payload(i), job(i)) for i in range(n)]
            lock = threading.Lock()

            def lane() -> None:
                prof = cProfile.Profile() if profile else None
                if prof:
                    prof.enable()
                while True:
                    with lock:
                        if not work:
                            break
                        p, j = work.pop()
                    result = deliver(p, j, mailer)
                    assert result["status"] == "SENT", result
                if prof:
                    prof.disable()
                    with lock:
                        profiles.append(prof)

            lanes = [threading.Thread(target=lane) for _ in range(threads)]
            started = time.perf_counter()
            for t in lanes:
                t.start()
            for t in lanes:
                t.join()
            return n / (time.perf_counter() - started)

        run(50, args.threads, False)  # warm-up: pools, templates, prepared statements
        meter = CpuMeter({})
        meter.start()
        rate = run(args.n, args.threads, False)
        cpu = meter.stop(args.n)
        print(f"deliver in-process: {rate:.0f} emails/s, {args.threads} threads")
        print(f"  cpu ms/email: {cpu}  (bench = this process: the email domain)")
        if args.profile:
            run(min(args.n, 1000), args.threads, True)
            stats = pstats.Stats(profiles[0])
            for prof in profiles[1:]:
                stats.add(prof)
            out = io.StringIO()
            stats.stream = out  # type: ignore[attr-defined]
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumtime").print_stats(45)
            args.profile.write_text(out.getvalue())
            print(f"  profile: {args.profile}")
        print(f"  {uptime()}")
        mailer.close()
        runtime.close()
    finally:
        postfix.stop()
        sandbox.destroy()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
