"""The domains' parts of the console come from their registrations (`Domain.console`, protocol
in shared/console/plugins.py): the ai and email tenant panels, the scheduler's Chain page, its
nav entry and its Overview card; scoped to a restricted console's orgs like the kernel's pages.
With no domain console registered, the kernel's pages stand alone; a failing panel degrades to
its error card; a module that breaks the protocol stops the console at start."""

from __future__ import annotations

import types
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared import domains
from shared.console.app import create_app
from shared.console.plugins import PluginError
from shared.console.settings import ConsoleSettings
from shared.runtime import Runtime
from tests.console.conftest import TOKEN

URL = "http://127.0.0.1:8190"
KERNEL_PAGES = ("/", "/overview/live", "/runs", "/dead", "/outbox", "/tenants", "/audit")
ACTION = "claim_prize-31337-0xabc-7-0xdef"


def signed_in(runtime: Runtime, tmp_path: Path, **settings: Any) -> TestClient:
    app = create_app(
        ConsoleSettings(token=TOKEN, **settings),
        runtime=lambda: runtime,
        state_file=tmp_path / "fleet.json",
    )
    c = TestClient(app, base_url=URL, follow_redirects=False)
    c.headers["Authorization"] = f"Bearer {TOKEN}"
    return c


def seed(db: Any, org: uuid.UUID, cost: str, email: str) -> None:
    db.execute(
        "INSERT INTO ai_usage (org_id, model, day, requests, tokens_in, tokens_out, cost)"
        " VALUES (%s, 'gpt-test', current_date, 12, 3400, 800, %s)",
        (org, cost),
    )
    db.execute(
        "INSERT INTO email_suppressions (org_id, email, reason, detail)"
        " VALUES (%s, %s, 'BOUNCED', '550 no such user')",
        (org, email),
    )


@pytest.fixture
def chain_rows(db: Any) -> None:
    db.execute(
        "INSERT INTO chain_actions (job_id, type, round_id, status, tx_hash, attempts)"
        " VALUES (%s, 'CLAIM_PRIZE', 7, 'CONFIRMED', '0x' || repeat('ab', 32), 1)",
        (ACTION,),
    )
    db.execute(
        "INSERT INTO keeper_actions (chain_id, contract, ran_at, holder, outcome, round_id)"
        " VALUES (31337, '0x0000000000000000000000000000000000000001', now(), 'scheduler-1',"
        " 'draw_requested', 7)"
    )


def test_the_domains_console_modules_come_from_their_registrations(
    runtime: Runtime, tmp_path: Path, db: Any, chain_rows: None
) -> None:
    registered = {d.name: d.console for d in domains.registered()}
    assert registered["ai"] == "workers.ai.console"
    assert registered["email"] == "workers.email.console"
    assert registered["scheduler"] == "scheduler.console"
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    seed(db, mine, "0.0421", "bounced@example.com")
    seed(db, theirs, "0.0777", "theirs@example.com")

    with signed_in(runtime, tmp_path) as c:
        plugins = {p.name for p in c.app.state.console.plugins}  # type: ignore[attr-defined]
        assert {"ai", "email", "scheduler"} <= plugins
        tenants = c.get("/tenants").text
        assert "AI cost per org and day" in tenants and "Email suppressions" in tenants
        for shown in ("0.0421", "0.0777", "bounced@example.com", "theirs@example.com"):
            assert shown in tenants
        overview = c.get("/").text
        assert '<a href="/chain" class="">Chain</a>' in overview
        assert overview.index('href="/tenants"') < overview.index('href="/chain"')
        assert overview.index('href="/chain"') < overview.index('href="/audit"')
        assert "<h2>Indexer</h2>" in overview and "<h2>Indexer</h2>" in c.get("/overview/live").text
        chain = c.get("/chain")
        assert chain.status_code == 200 and ACTION in chain.text and "draw_requested" in chain.text
        assert '<a href="/chain" class="on">Chain</a>' in chain.text

    # Restricted to one org: its tenant rows only, and no chain action (they act for no tenant).
    with signed_in(runtime, tmp_path, orgs=str(mine)) as c:
        tenants = c.get("/tenants").text
        assert "0.0421" in tenants and "bounced@example.com" in tenants
        assert "0.0777" not in tenants and "theirs@example.com" not in tenants
        chain = c.get("/chain")
        assert chain.status_code == 200 and "operators of every org only" in chain.text
        assert ACTION not in chain.text and "draw_requested" not in chain.text


def test_without_a_domain_console_the_kernels_pages_stand_alone(
    runtime: Runtime, tmp_path: Path, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(domains, "consoles", lambda: [])
    seed(db, uuid.uuid4(), "0.0421", "bounced@example.com")
    with signed_in(runtime, tmp_path) as c:
        assert c.app.state.console.plugins == ()  # type: ignore[attr-defined]
        for path in KERNEL_PAGES:
            assert c.get(path).status_code == 200, path
        overview = c.get("/").text
        assert 'href="/chain"' not in overview and "Indexer" not in overview
        assert 'href="/tenants"' in overview and 'href="/audit"' in overview
        tenants = c.get("/tenants").text
        assert "No domain adds a panel to this page" in tenants
        assert "0.0421" not in tenants and "bounced@example.com" not in tenants
        assert c.get("/chain").status_code == 404


def test_a_failing_panel_shows_its_error_and_the_page_still_shows(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(runtime: Runtime, orgs: Any) -> Any:
        raise RuntimeError("the table is locked\nsecond line")

    def quiet(runtime: Runtime, orgs: Any) -> None:
        return None

    modules = [
        types.SimpleNamespace(__name__="broken", NAME="broken", tenant_panel=broken,
                              overview_panel=broken),
        types.SimpleNamespace(__name__="quiet", NAME="quiet", tenant_panel=quiet),
    ]  # fmt: skip
    monkeypatch.setattr(domains, "consoles", lambda: modules)
    with signed_in(runtime, tmp_path) as c:
        for path in ("/tenants", "/", "/overview/live"):
            page = c.get(path)
            assert page.status_code == 200, path
            assert "<h2>broken</h2>" in page.text, path
            assert (
                "RuntimeError: the table is locked" in page.text and "second line" not in page.text
            )
        assert "<h2>quiet</h2>" not in c.get("/tenants").text
        assert "<h2>Queues</h2>" in c.get("/").text


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (types.SimpleNamespace(__name__="m"), "NAME"),
        (
            types.SimpleNamespace(__name__="m", NAME="m", TEMPLATES=Path("/nonexistent")),
            "TEMPLATES",
        ),
        (types.SimpleNamespace(__name__="m", NAME="m", router=object()), "APIRouter"),
        (types.SimpleNamespace(__name__="m", NAME="m", NAV=(("k", "label"),)), "NAV"),
        (types.SimpleNamespace(__name__="m", NAME="m", tenant_panel="nope"), "tenant_panel"),
    ],
)
def test_a_console_module_that_breaks_the_protocol_stops_the_console(
    module: Any, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(domains, "consoles", lambda: [module])
    with pytest.raises(PluginError, match=message):
        create_app(ConsoleSettings())


def test_two_console_modules_may_not_share_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    twins = [types.SimpleNamespace(__name__=f"m{i}", NAME="twin") for i in range(2)]
    monkeypatch.setattr(domains, "consoles", lambda: twins)
    with pytest.raises(PluginError, match="twin"):
        create_app(ConsoleSettings())


def test_the_chain_page_flags_a_settled_action_a_reorg_removed(
    runtime: Runtime, tmp_path: Path, db: Any
) -> None:
    """A settled transaction a deep reorg removed (scheduler/chain/reconcile.py): the journal row
    back to PENDING with REORGED until the re-sent action settles; the page says so loudly."""
    db.execute(
        "INSERT INTO chain_actions (job_id, type, round_id, status, error_code, attempts, chain_id)"
        " VALUES (%s, 'MINT_BADGE', 7, 'PENDING', 'REORGED', 1, 31337)",
        (ACTION,),
    )
    db.execute(
        "INSERT INTO job_runs (job_id, org_id, job_name, queue, status, payload)"
        " VALUES (%s || '@reorg:abababababab', %s, 'chain:mint_badge', 'chain-actions',"
        " 'COMPLETED', '{}')",
        (ACTION, uuid.UUID(int=0)),
    )
    with signed_in(runtime, tmp_path) as c:
        chain = c.get("/chain").text
    assert "1 settled transaction(s) removed by a reorg, not settled again yet" in chain
    assert ACTION in chain and "1 settled action(s) removed by a reorg and sent again" in chain
