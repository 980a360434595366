"""The `fleet` CLI's pure parts: durations, secret redaction, lazy domain commands, exit codes."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import typer

from shared.cli import lazy
from shared.cli.main import FleetApp, exit_code
from shared.cli.params import parse_duration
from shared.cli.settings import redact, redact_url
from shared.errors import BrokerUnavailable, PayloadError, RunNotFound, UnknownJob


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("15m", timedelta(minutes=15)),
        ("45s", timedelta(seconds=45)),
        ("2w", timedelta(weeks=2)),
        ("1d12h", timedelta(days=1, hours=12)),
        (" 7D ", timedelta(days=7)),
    ],
)
def test_durations_parse(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["30", "30x", "d", "", "-1d", "1.5h", "0d", "30 d"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_duration(text)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://app:pw@db:5432/x", "postgresql+psycopg://app:***@db:5432/x"),
        ("redis://:pw@cache:6379/0", "redis://:***@cache:6379/0"),
        ("redis://cache:6379/0", "redis://cache:6379/0"),
        (
            "postgresql://u@h/db?sslmode=require&password=pw",
            "postgresql://u@h/db?sslmode=require&password=***",
        ),
        ("smtp://user:p%40ss@mail:25", "smtp://user:***@mail:25"),
        ("postgresql://u:we@ird@h/db", "postgresql://u:***@h/db"),
    ],
)
def test_passwords_in_urls_are_redacted(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_secret_settings_are_masked_by_name_and_inside_values() -> None:
    assert redact("metrics_token", "abc") == "***"
    assert redact("smtp_password", "abc") == "***"
    assert redact("chain_keks", {"k1": "base64"}) == "***"
    assert redact("openai_api_key", "sk-1") == "***"
    assert redact("metrics_token", None) is None
    assert redact("upstreams", ["http://a:b@h/", "http://h/"]) == ["http://a:***@h/", "http://h/"]
    assert redact("broker_namespace", "dramatiq") == "dramatiq"


def test_exit_codes_separate_bad_input_from_failures() -> None:
    assert exit_code(PayloadError("email:send", [{"loc": ("x",), "msg": "bad"}])) == 2
    assert exit_code(UnknownJob()) == 2
    assert exit_code(RunNotFound()) == 1
    assert exit_code(BrokerUnavailable()) == 1
    assert exit_code(RuntimeError("a bug")) is None  # a bug keeps its traceback


@pytest.fixture
def domains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, str]]:
    """Three domain packages on disk: one that works, one whose import fails, one absent."""
    for name, body in {
        "jfcli_ok": "import typer\napp = typer.Typer()\n@app.command()\ndef hello(name: str) -> None:\n"
        "    print(f'hello {name}')\n@app.command()\ndef other() -> None:\n    pass\n",
        "jfcli_broken": "import jfcli_missing_dependency\n",
        "jfcli_one": "import typer\napp = typer.Typer()\n@app.command()\ndef greet(name: str) -> None:\n"
        "    print(f'greetings {name}')\n",
    }.items():
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "cli.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    return {
        "ok": ("jfcli_ok.cli:app", "ok"),
        "broken": ("jfcli_broken.cli:app", "broken"),
        "absent": ("jfcli_absent.cli:app", "absent"),
        "one": ("jfcli_one.cli:app", "one"),
    }


def test_domains_on_disk_are_registered_without_being_imported(
    domains: dict[str, tuple[str, str]],
) -> None:
    import sys

    app = FleetApp()
    assert lazy.register(app, domains) == ["ok", "broken", "one"]
    assert "jfcli_ok.cli" not in sys.modules and "jfcli_broken" not in sys.modules


@pytest.mark.parametrize(
    ("argv", "printed"),
    [
        (["ok", "hello", "Zoë"], "hello Zoë\n"),
        # Issue 33: Typer collapses an app of one command into that command, so a domain with
        # one command was `fleet one Ada` while a domain with two is `fleet ok hello Zoë`.
        (["one", "greet", "Ada"], "greetings Ada\n"),
    ],
    ids=["two-commands", "one-command-keeps-its-name"],
)
def test_a_domain_command_forwards_its_arguments(
    domains: dict[str, tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    printed: str,
) -> None:
    app = FleetApp()
    lazy.register(app, domains)
    with pytest.raises(SystemExit) as done:
        app(argv, prog_name="fleet")
    assert done.value.code == 0
    assert capsys.readouterr().out == printed


def test_a_domain_that_fails_to_import_says_why(
    domains: dict[str, tuple[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    app = FleetApp()
    lazy.register(app, domains)
    with pytest.raises(SystemExit) as done:
        app(["broken", "anything"], prog_name="fleet")
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert "fleet broken is unavailable" in err and "jfcli_missing_dependency" in err
    assert len(err.strip().splitlines()) == 1


def test_counts_of_tokens_are_not_secrets_but_tokens_are() -> None:
    """Before: AI_MAX_OUTPUT_TOKENS and AI_TOKENS_PER_DAY printed as *** by `fleet config`."""
    from shared.cli.settings import redact

    assert redact("ai_max_output_tokens", 1024) == 1024
    assert redact("ai_tokens_per_day", 500_000) == 500_000
    assert redact("metrics_token", "s3cr3t") == "***"
    assert redact("console_token", "s3cr3t") == "***"
