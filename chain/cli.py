"""The EVM library's commands: `wallets_app` (`fleet wallets ...`) and `deploy` (`fleet chain
deploy`), for the domains that use the library to register (`Domain.commands`).

    fleet chain deploy [--dev]     deploy the reference contracts, record their addresses
                                   (--dev: anvil's first account as the operator; dev chains only)
    fleet wallets new-kek          print a fresh key-encryption key for CHAIN_KEKS
    fleet wallets import           store a private key read from stdin (operator or embedded)
    fleet wallets create           generate an embedded wallet, print its address
    fleet wallets list             addresses, kinds and the KEK id of their keys
    fleet wallets rotate-kek       re-seal every key under CHAIN_KEK_ID

Private keys are read from stdin (never from arguments, which land in shell history and `ps`)
and never printed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from shared.cli import output
from shared.config import get_settings

from .abi import BADGE, COORDINATOR, LOTTERY
from .keys import Keyring, new_kek
from .settings import ChainSettings, chain_settings

wallets_app = typer.Typer(
    help="Custodial wallets (keys encrypted at rest with AES-256-GCM).", no_args_is_help=True
)


@contextmanager
def db() -> Iterator[Any]:
    """One transaction on the fleet's database (committed durably)."""
    import psycopg

    dsn = get_settings().database_dsn
    with psycopg.connect(dsn, connect_timeout=5) as conn, conn.transaction():
        conn.execute("SET LOCAL synchronous_commit TO on")
        yield conn


def _keyring(settings: ChainSettings) -> Keyring:
    return Keyring.from_settings(settings.keks, settings.kek_id)


def deploy(
    dev: Annotated[
        bool,
        typer.Option(
            "--dev", help="Deploy with anvil's first dev account and store it as the operator."
        ),
    ] = False,
    ticket_price_wei: Annotated[
        int, typer.Option(help="Ticket price of the lottery's rounds.")
    ] = 10**15,
    round_duration_s: Annotated[int, typer.Option(help="Length of a round.")] = 3_600,
    min_players: Annotated[int, typer.Option(help="Players needed for a draw.")] = 2,
    if_missing: Annotated[
        bool,
        typer.Option(
            "--if-missing",
            help="Keep the recorded contracts when the node still has their code (make run).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Deploy coordinator, lottery and badge NFT with the operator key; record them per chain."""
    from .client import ChainClient
    from .deploy import LotteryConfig, deploy_reference
    from .devnet import dev_accounts, dev_chain
    from .registry import deployments, record_deployment
    from .wallets import OPERATOR, load_operator, store_wallet

    settings = chain_settings()
    client = ChainClient.connect(settings.rpc_url, timeout_s=settings.rpc_timeout_s)
    chain_id = client.check_chain(settings.chain_id)
    if dev:
        is_dev, node = dev_chain(client)
        if not is_dev:
            output.err.print(
                f"refusing --dev on {node}: not a development chain (chain id 31337 or anvil,"
                " Hardhat, Ganache); the public dev key would become the operator."
                " Import an operator key with `fleet wallets import --operator` instead."
            )
            raise typer.Exit(2)
    keyring = _keyring(settings)
    if if_missing:
        with db() as conn:
            recorded = deployments(conn, chain_id)
            operator_now = load_operator(conn, keyring)
        wanted = (COORDINATOR, LOTTERY, BADGE)
        if operator_now is not None and all(
            name in recorded and _has_code(client, recorded[name].address) for name in wanted
        ):
            kept = {
                "chain_id": chain_id,
                "operator": operator_now.address,
                **{n: recorded[n].address for n in wanted},
            }
            if as_json:
                output.print_json(kept)
            else:
                output.print_fields(kept, title="Deployed (kept)")
            return
    with db() as conn:
        operator = load_operator(conn, keyring)
        if operator is None and dev:
            operator = dev_accounts(1)[0]
            store_wallet(conn, keyring, bytes(operator.key), kind=OPERATOR)
        if operator is None:
            raise typer.BadParameter(
                "no operator wallet: `fleet wallets import --operator` first (or --dev)"
            )
        config = LotteryConfig(ticket_price_wei, round_duration_s, min_players)
        deployed = deploy_reference(client, operator, operator=operator.address, config=config)
        for deployment in deployed.values():
            record_deployment(conn, chain_id, deployment)
    result = {
        "chain_id": chain_id,
        "operator": operator.address,
        **{n: d.address for n, d in deployed.items()},
    }
    if as_json:
        output.print_json(result)
    else:
        output.print_fields(result, title="Deployed")


def add_signers(
    count: Annotated[int, typer.Argument(min=1, max=64, help="How many signers to add.")],
    fund_eth: Annotated[
        float, typer.Option(help="ETH the operator sends each new signer for its gas.")
    ] = 1.0,
) -> None:
    """Add operator signers to the pool that mints badges: new keys (stored sealed, never shown),
    funded by the operator wallet, allowed to mint by the badge contract (`setOperator`, so the
    operator must be the badge's owner). Each has its own nonce lane and lock."""
    from .client import ChainClient
    from .deploy import add_signers as add
    from .registry import contract_address
    from .wallets import SIGNER, load_operator, store_wallet

    settings = chain_settings()
    client = ChainClient.connect(settings.rpc_url, timeout_s=settings.rpc_timeout_s)
    chain_id = client.check_chain(settings.chain_id)
    keyring = _keyring(settings)
    with db() as conn:
        operator = load_operator(conn, keyring)
        if operator is None:
            raise typer.BadParameter("no operator wallet: `fleet wallets import --operator` first")
        badge = contract_address(conn, chain_id, BADGE, override=settings.badge_address)
        added = add(client, operator, badge, count, fund_wei=int(fund_eth * 10**18))
        for signer in added:
            store_wallet(conn, keyring, bytes(signer.key), kind=SIGNER)
    for signer in added:
        output.out.print(signer.address)


def _has_code(client: Any, address: str) -> bool:
    return str(client.request("eth_getCode", [address, "latest"]) or "0x") not in ("0x", "0x0")


@wallets_app.command("new-kek")
def wallets_new_kek() -> None:
    """Print a fresh random KEK (base64, 32 bytes) to add to CHAIN_KEKS under a new id."""
    print(new_kek())


@wallets_app.command("import")
def wallets_import(
    operator: Annotated[
        bool, typer.Option("--operator", help="Store as the operator wallet.")
    ] = False,
    owner_ref: Annotated[
        str | None, typer.Option(help="Who the embedded wallet belongs to (user id).")
    ] = None,
) -> None:
    """Read a hex private key from stdin and store it sealed under CHAIN_KEK_ID."""
    from .wallets import EMBEDDED, OPERATOR, store_wallet

    text = (
        sys.stdin.readline()
        if not sys.stdin.isatty()
        else typer.prompt("private key", hide_input=True)
    ).strip()
    try:
        key = bytes.fromhex(text.removeprefix("0x"))
    except ValueError:
        raise typer.BadParameter("expected a hex private key on stdin") from None
    if len(key) != 32:
        raise typer.BadParameter("expected a 32-byte hex private key on stdin")
    with db() as conn:
        address = store_wallet(
            conn,
            _keyring(chain_settings()),
            key,
            kind=OPERATOR if operator else EMBEDDED,
            owner_ref=owner_ref,
        )
    output.out.print(f"stored {'operator' if operator else 'embedded'} wallet {address}")


@wallets_app.command("create")
def wallets_create(
    owner_ref: Annotated[
        str | None, typer.Option(help="Who the embedded wallet belongs to (user id).")
    ] = None,
) -> None:
    """Generate an embedded wallet; its key is stored sealed and never shown."""
    from Crypto.Random import get_random_bytes

    from .wallets import EMBEDDED, store_wallet

    with db() as conn:
        address = store_wallet(
            conn,
            _keyring(chain_settings()),
            get_random_bytes(32),
            kind=EMBEDDED,
            owner_ref=owner_ref,
        )
    output.out.print(address)


@wallets_app.command("list")
def wallets_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Wallets with their kind and the id of the KEK their key is sealed with."""
    with db() as conn:
        rows = conn.execute(
            "SELECT address, kind, kek_id, owner_ref, created_at FROM wallets"
            " ORDER BY kind DESC, created_at"
        ).fetchall()
    items = [
        dict(zip(("address", "kind", "kek_id", "owner_ref", "created_at"), r, strict=True))
        for r in rows
    ]
    if as_json:
        output.print_json(items)
        return
    output.print_table(
        ("address", "kind", "kek", "owner"),
        ((r["address"], r["kind"], r["kek_id"] or "-", r["owner_ref"] or "-") for r in items),
        title="Wallets",
    )


@wallets_app.command("rotate-kek")
def wallets_rotate_kek() -> None:
    """Re-seal every stored key under CHAIN_KEK_ID (old KEKs must still be in CHAIN_KEKS)."""
    from .wallets import count_by_kek, rotate_kek

    keyring = _keyring(chain_settings())
    with db() as conn:
        done = rotate_kek(conn, keyring)
        counts = count_by_kek(conn)
    output.out.print(
        f"re-sealed {done} key(s) under {keyring.current_id!r}; keys per KEK: {counts}"
    )
