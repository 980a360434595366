"""`fleet run --only` starts only the embedded services its processes use (issue 33: `--only
worker-hello` started every domain's SMTP sink, anvil and contract deployment)."""

from __future__ import annotations

from shared.domains import service_hooks


def _names(processes: list[str] | None) -> list[str]:
    return [f"{hook.__module__}:{hook.__name__}" for hook in service_hooks(processes)]


EMAIL = "workers.email.embedded:start"
CHAIN = "workers.chain_actions.embedded:start"


def test_every_domains_services_without_only() -> None:
    assert _names(None) == [EMAIL, CHAIN]


def test_a_worker_starts_its_own_domains_services_only() -> None:
    assert _names(["worker-email"]) == [EMAIL]
    assert _names(["worker-chain-actions"]) == [CHAIN]
    assert _names(["worker-export", "worker-doc", "worker-ai"]) == []


def test_a_process_starts_the_services_of_the_domains_it_uses() -> None:
    assert _names(["scheduler"]) == [CHAIN]  # the indexer and the keeper read the node
    assert _names(["scheduler", "worker-email"]) == [EMAIL, CHAIN]


def test_extras_alone_start_none() -> None:
    assert _names(["console"]) == [] and _names(["product-api"]) == []
