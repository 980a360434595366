"""compose/docker-compose.yml runs each process exactly as `make run-worker-*` / `make
run-scheduler` do: the command and environment of the launcher's plan (shared/launcher/plan.py),
a health check on that process's `/health/ready` port and a restart policy. Docker cannot run
here, so the file is parsed and compared; a change to the plan without the compose file fails."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.config import Settings
from shared.launcher.plan import ProcessSpec, lookup, names

NAMES = names()

ROOT = Path(__file__).resolve().parents[2]


def make_targets() -> dict[str, str]:
    """`make run-<row>` for every row of the plan -> the row it executes (`make -n`: what make
    would run, through the Makefile's `run-%` rule or a target of its own)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", *(f"run-{name}" for name in NAMES)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    executed = re.findall(r"-m shared\.launcher exec (\S+)$", done.stdout, re.M)
    return {f"run-{name}": row for name, row in zip(NAMES, executed, strict=True)}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose" / "docker-compose.yml").read_text())
    return loaded


@pytest.fixture
def plan_settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The plan at its defaults (this session's environment must not shift ports or timeouts)."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def normalised(argv: list[str] | tuple[str, ...]) -> list[str]:
    """The venv's absolute interpreter and scripts vs the image's: compare by program name."""
    program = Path(argv[0]).name
    program = "python" if re.fullmatch(r"python3?(\.\d+)?", program) else program
    return [program, *argv[1:]]


def test_every_makefile_process_target_runs_a_row_of_the_plan() -> None:
    targets = make_targets()
    assert sorted(targets.values()) == sorted(NAMES)
    assert sorted(targets) == sorted(f"run-{name}" for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_compose_service_has_the_command_and_env_of_the_makefile_target(
    name: str, compose: dict[str, Any], plan_settings: Settings
) -> None:
    spec: ProcessSpec = lookup(plan_settings, name)
    service = compose["services"].get(name)
    assert service is not None, f"no compose service {name} for `make run-{name}`"

    assert normalised(service["command"]) == normalised(spec.argv)
    env = {k: str(v) for k, v in service["environment"].items()}
    for key, value in spec.env.items():
        assert env.get(key) == value, f"{name}: {key} is {env.get(key)!r}, the plan says {value!r}"


@pytest.mark.parametrize("name", NAMES)
def test_compose_service_is_health_checked_on_its_ready_port_and_restarted(
    name: str, compose: dict[str, Any], plan_settings: Settings
) -> None:
    spec = lookup(plan_settings, name)
    service = compose["services"][name]
    check = " ".join(service["healthcheck"]["test"])
    assert f"http://127.0.0.1:{spec.health_port}/health/ready" in check
    assert service["environment"]["HEALTH_PORT"] == str(spec.health_port)
    assert service["environment"]["HEALTH_HOST"] == "0.0.0.0"  # reachable for scrapes
    assert service["restart"] in {"unless-stopped", "always", "on-failure"}
    # SIGTERM gives in-flight jobs the shutdown grace; compose must not SIGKILL before it ends.
    grace_s = int(service["stop_grace_period"].rstrip("s"))
    assert grace_s * 1000 > plan_settings.shutdown_grace_ms


def test_the_stack_has_its_services_with_redis_keeping_an_append_only_file(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    for needed in ("redis", "postgres", "anvil", "mailpit", "minio"):
        assert needed in services
    assert "--appendonly" in services["redis"]["command"]
    assert (
        services["redis"]["command"][services["redis"]["command"].index("--appendonly") + 1]
        == "yes"
    )


def test_every_variable_the_compose_file_requires_is_in_env_example(
    compose: dict[str, Any],
) -> None:
    text = (ROOT / "compose" / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    example = (ROOT / ".env.example").read_text()
    defined = set(re.findall(r"^(\w+)=", example, re.M))
    assert required and required <= defined, f"missing from .env.example: {required - defined}"
