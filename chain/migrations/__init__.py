"""The EVM library's alembic revision (`wallets`, the `chain_actions` journal, `chain_contracts`),
branching off the kernel's first. The chain-actions domain registers it (`Domain.migrations`); the
scheduler's chain revisions build on it."""
