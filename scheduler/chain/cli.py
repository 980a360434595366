"""`fleet chain ...` (registered by the scheduler: `Domain.commands`).

fleet chain deploy [--dev]     deploy the reference contracts, record their addresses
                               (the EVM library's command: chain/cli.py)
fleet chain status             node, chain id, recorded contracts, operator wallet; the
                               indexer's cursor and lag, the keeper's last action and lock
fleet chain add-signers N       N more operator signers for the badge mints (funded, allowed)
fleet chain reindex --from-block N
                               rebuild the projections from block N (idempotent: only the
                               follow-up actions not already enqueued are staged)
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from chain.cli import add_signers, db, deploy
from shared import redis_conn
from shared.cli import output
from shared.config import get_settings

app = typer.Typer(
    help="Blockchain: reference contracts, node status, indexer cursor, lottery keeper.",
    no_args_is_help=True,
)
app.command("deploy")(deploy)
app.command("add-signers")(add_signers)


@app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Node head, chain id, contracts, operator balance; indexer cursor and lag, keeper's last
    action and lock holder."""
    from chain.client import ChainClient, safe_url
    from chain.registry import deployments
    from chain.settings import chain_settings
    from chain.wallets import operator_address

    from ..settings import keeper_settings
    from .reconcile import reorg_status
    from .status import indexer_status, keeper_status

    chain = chain_settings()
    client = ChainClient.connect(chain.rpc_url, timeout_s=chain.rpc_timeout_s)
    chain_id = client.check_chain(chain.chain_id)
    head = client.block_number()
    lock_redis = redis_conn.client(get_settings(), socket_timeout=2, socket_connect_timeout=2)
    with db() as conn:
        contracts = {name: d.address for name, d in deployments(conn, chain_id).items()}
        operator = operator_address(conn)
        scheduler = {
            **indexer_status(conn, chain_id, head),
            **keeper_status(conn, chain_id, lock_redis, keeper_settings().lock_key),
            **reorg_status(conn, chain_id),
        }
    result: dict[str, Any] = {
        "rpc": safe_url(chain.rpc_url),
        "chain_id": chain_id,
        "block": head,
        "operator": operator,
        "operator_balance_wei": client.balance(operator) if operator else None,
        **contracts,
        **scheduler,
    }
    if as_json:
        output.print_json(result)
    else:
        output.print_fields(result, title="Chain")


@app.command("reindex")
def reindex(
    from_block: Annotated[
        int, typer.Option("--from-block", min=0, help="First block whose logs are projected again.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Rebuild the indexer's projections from a block (a damaged projection): what was projected
    from it on is deleted and indexed again up to the head. Idempotent: a follow-up action
    already enqueued is not staged again. A running scheduler may go on indexing meanwhile."""
    from shared.jobs import runs
    from shared.runtime import get_runtime

    from . import jobs as chain_jobs
    from .indexer import reindex as run_reindex

    runtime = get_runtime()
    built = chain_jobs.build(runtime)
    done = run_reindex(
        built.client,
        runtime.sessions,
        built.indexer,
        from_block,
        cancel=lambda job_id: runs.cancel(job_id, org_id=None, runtime=runtime),
        release=runtime.sender.gate.forget,
    )
    result: dict[str, Any] = {
        "chain_id": built.indexer.chain_id,
        "from_block": done.from_block,
        "logs_removed": done.logs_removed,
        "logs_indexed": done.logs,
        "actions_staged": len(done.staged),
        "cursor": done.cursor,
        "head": done.head,
    }
    if as_json:
        output.print_json({**result, "staged": done.staged})
    else:
        output.print_fields(result, title="Re-indexed")
