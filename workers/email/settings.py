"""The email domain's settings (`EmailSettings`): the SMTP client, the sender identity, the
deferral schedule and the feedback loop (unsubscribe, VERP bounces, the inbound listener,
tracking, SES events through SNS).

Env var names are those of the fleet's configuration since the start (compose, Kubernetes, the
README): `EMAIL_*`, and `SMTP_*` for the SMTP client (each of those names its variable with
`validation_alias`, like `from_header`, read from `EMAIL_FROM`).
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from shared.config import DomainSettings, StrList, settings_for


class EmailSettings(DomainSettings):
    model_config = SettingsConfigDict(env_prefix="EMAIL_")

    # --- SMTP client, sender identity, dev sink (issue 3) ---
    smtp_host: str = Field(
        default="127.0.0.1",
        validation_alias="SMTP_HOST",
        description="SMTP server of the email worker (dev: the sink)",
    )
    smtp_port: int = Field(
        default=2525, validation_alias="SMTP_PORT", description="SMTP port (dev sink default 2525)"
    )
    smtp_security: str = Field(
        default="plain",
        pattern="^(plain|starttls|tls)$",
        validation_alias="SMTP_SECURITY",
        description="plain, starttls (required) or tls (implicit)",
    )
    smtp_username: str | None = Field(
        default=None, validation_alias="SMTP_USERNAME", description="SMTP AUTH user (None: no AUTH)"
    )
    smtp_password: SecretStr | None = Field(
        default=None,
        validation_alias="SMTP_PASSWORD",
        description="SMTP AUTH password; never logged",
    )
    smtp_timeout_s: float = Field(
        default=10.0,
        gt=0,
        validation_alias="SMTP_TIMEOUT_S",
        description="Timeout of the connection and each SMTP command",
    )
    smtp_validate_certs: bool = Field(
        default=True,
        validation_alias="SMTP_VALIDATE_CERTS",
        description="Verify the server certificate (TLS, STARTTLS)",
    )
    smtp_pool_size: int = Field(
        default=8,
        ge=1,
        validation_alias="SMTP_POOL_SIZE",
        description="SMTP connections a worker process keeps open to one server at most (reused)",
    )
    smtp_pool_idle_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias="SMTP_POOL_IDLE_S",
        description="An idle pooled SMTP connection is closed after this",
    )
    from_header: str = Field(
        default="jobfleet <no-reply@jobfleet.localhost>",
        validation_alias="EMAIL_FROM",
        description="From header; its address is the envelope sender",
    )
    message_id_domain: str = Field(
        default="jobfleet.localhost",
        description="Right-hand side of the Message-IDs derived from job ids",
    )
    product_name: str = Field(default="jobfleet", description="Product name the templates show")
    run_due_batch: int = Field(
        default=500, ge=1, description="Due emails claimed per pass of email-seq:run_due"
    )
    # A 4xx reply or an unreachable server is the server's state, not the email's fault
    # (RFC 5321 §4.5.4.1): retried without spending attempts, for up to the outage window.
    defer_min_s: float = Field(
        default=60.0, gt=0, description="First retry after a 4xx reply or a connection failure"
    )
    defer_max_s: float = Field(
        default=1_800.0, gt=0, description="Longest wait between two deferred tries (doubling)"
    )
    outage_window_s: float = Field(
        default=86_400.0,
        gt=0,
        description="How long 4xx replies and connection failures are retried before FAILED",
    )
    bounce_exempt_templates: StrList = Field(
        default_factory=list,
        description="Templates still sent to an address that hard-bounced (default: none)",
    )

    # --- the scheduler's periodic job (registration: `periodic`) ---
    due_interval_s: float = Field(
        default=60.0,
        gt=0,
        validation_alias="EMAIL_DUE_INTERVAL_S",
        description="Period of email-seq:run_due (sent by the scheduler)",
    )

    # --- feedback loop (issue 22; feedback/): one-click unsubscribe (RFC 8058) ---
    feedback_url: str = Field(
        default="http://127.0.0.1:8180/email",
        description="Public base URL of the mounted email feedback router (unsubscribe links)",
    )
    feedback_key: SecretStr | None = Field(
        default=None,
        description="HMAC key of unsubscribe tokens (default: a random key kept under VAR_DIR)",
    )
    unsubscribe_ttl_s: int = Field(
        default=7_776_000, ge=60, description="Lifetime of an email's unsubscribe link (90 days)"
    )
    unsubscribe_mailto: str | None = Field(
        default="unsubscribe@jobfleet.localhost",
        description="Address of List-Unsubscribe's mailto (None: the HTTPS URL only)",
    )
    transactional_templates: StrList = Field(
        default_factory=lambda: ["otp-code", "support-reply"],
        description="Templates sent without List-Unsubscribe (sequence steps always carry it)",
    )
    tracked_templates: StrList = Field(
        default_factory=list,
        description="Templates whose emails get an open pixel and tracked links (opt-in; "
        "never for an org with tracking off)",
    )
    sns_cert_hosts: StrList = Field(
        default_factory=lambda: ["sns.*.amazonaws.com"],
        description="Hosts whose SigningCertURL is trusted for SES events via SNS "
        "(`*`: one DNS label)",
    )
    sns_max_age_s: float = Field(
        default=3_600.0, gt=0, description="SNS messages older than this are refused (replay)"
    )
    # Bounces (DSNs, RFC 3464) come back to a VERP envelope sender `bounces+<tag>@<domain>`.
    bounce_domain: str | None = Field(
        default=None,
        description="Domain of the VERP envelope senders (default: the From address's); "
        "its MX (or the relay's transport) leads to the inbound listener",
    )
    inbound_host: str = Field(
        default="127.0.0.1", description="Address the inbound SMTP listener (DSNs) binds"
    )
    inbound_port: int = Field(
        default=2526, description="Port of the inbound SMTP listener (`email-inbound` process)"
    )


def email_settings() -> EmailSettings:
    """The process's email settings (read once; `get_settings.cache_clear()` forgets them)."""
    return settings_for(EmailSettings)


__all__ = ["EmailSettings", "email_settings"]
