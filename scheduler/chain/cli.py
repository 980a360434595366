"""`fleet chain ...` (registered by the scheduler: `Domain.commands`).

fleet chain deploy [--dev]     deploy the reference contracts, record their addresses
                               (the EVM library's command: chain/cli.py)
fleet chain status             node, chain id, recorded contracts, operator wallet; the
                               indexer's cursor and lag, the keeper's last action and lock
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from chain.cli import db, deploy
from shared import redis_conn
from shared.cli import output
from shared.config import get_settings

app = typer.Typer(
    help="Blockchain: reference contracts, node status, indexer cursor, lottery keeper.",
    no_args_is_help=True,
)
app.command("deploy")(deploy)


@app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Node head, chain id, contracts, operator balance; indexer cursor and lag, keeper's last
    action and lock holder."""
    from chain.client import ChainClient, safe_url
    from chain.registry import deployments
    from chain.settings import chain_settings
    from chain.wallets import operator_address

    from ..settings import keeper_settings
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
