"""Where the reference contracts live: the `chain_contracts` table, overridden by settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .abi import BADGE, LOTTERY
from .address import to_checksum_address
from .errors import ContractNotDeployed


@dataclass(frozen=True)
class Deployment:
    name: str
    address: str
    tx_hash: str | None = None
    block_number: int | None = None
    deployer: str | None = None
    artifact_sha256: str | None = None


def record_deployment(conn: Any, chain_id: int, deployment: Deployment) -> None:
    conn.execute(
        """
        INSERT INTO chain_contracts
            (chain_id, name, address, tx_hash, block_number, deployer, artifact_sha256)
        VALUES (%s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (chain_id, name) DO UPDATE SET
            address = EXCLUDED.address, tx_hash = EXCLUDED.tx_hash,
            block_number = EXCLUDED.block_number, deployer = EXCLUDED.deployer,
            artifact_sha256 = EXCLUDED.artifact_sha256, deployed_at = now()
        """,
        (
            chain_id,
            deployment.name,
            deployment.address,
            deployment.tx_hash,
            deployment.block_number,
            deployment.deployer,
            deployment.artifact_sha256,
        ),
    )


def deployments(conn: Any, chain_id: int) -> dict[str, Deployment]:
    rows = conn.execute(
        "SELECT name, address, tx_hash, block_number, deployer, artifact_sha256"
        " FROM chain_contracts WHERE chain_id = %s ORDER BY name",
        (chain_id,),
    ).fetchall()
    return {row[0]: Deployment(*row) for row in rows}


def contract_address(conn: Any, chain_id: int, name: str, *, override: str | None = None) -> str:
    """The address of `name` on `chain_id`: the settings override, else the recorded deployment."""
    if override:
        return to_checksum_address(override)
    row = conn.execute(
        "SELECT address FROM chain_contracts WHERE chain_id = %s AND name = %s", (chain_id, name)
    ).fetchone()
    if row is None:
        raise ContractNotDeployed(
            f"no {name} address for chain {chain_id}: run `fleet chain deploy`"
        )
    return to_checksum_address(row[0])


def overrides(lottery: str | None, badge: str | None) -> dict[str, str | None]:
    return {LOTTERY: lottery, BADGE: badge}
