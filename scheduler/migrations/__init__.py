"""The scheduler's Alembic revisions (registered as `Domain.migrations`): the chain indexer's
cursor, block hashes and lottery projections, the keeper's runs (0007), and the per-chain
scoping of the journal and indexer keys with the genesis record (0009). They branch off the
kernel's `0003_chain` (the EVM library's wallets, journal and contract registry).
"""
