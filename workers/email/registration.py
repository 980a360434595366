"""The email domain's registration (entry point `jobfleet.domains`: `email`): plain data."""

from shared.domains import Command, Domain, PeriodicJob, Process

DOMAIN = Domain(
    name="email",
    jobs="workers.email.jobs:JOBS",
    order=10,
    settings=("workers.email.settings:EmailSettings",),
    commands=(
        Command(
            "email", "workers.email.cli:app", "Email: templates, sequences, the local mailbox."
        ),
    ),
    processes=(
        # 16 threads: a send mostly waits on SMTP and Postgres (bench/email_throughput.py).
        Process("worker-email", "workers.email.app", threads=16),
        Process(
            "email-inbound",
            "workers.email.feedback.inbound",
            kind="extra",
            port_env="EMAIL_INBOUND_HEALTH_PORT",
            port=8185,
            port_as="HEALTH_PORT",
            requires=("aiosmtpd",),
            extra_ports=(("EMAIL_INBOUND_PORT", 2526),),
        ),
    ),
    services=("workers.email.embedded:start",),
    demo=("workers.email.demo:scenario",),
    migrations="workers.email.migrations",
    console="workers.email.console",
    status="workers.email.status",
    retries={"email": {"max_attempts": 3, "min_backoff_ms": 2_000}},
    # The slot (minute) is the job's stable id: a second replica's send is a duplicate.
    periodic=(
        PeriodicJob(
            "email-run-due", "workers.email.periodic:run_due", "workers.email.periodic:interval_s"
        ),
    ),
)
