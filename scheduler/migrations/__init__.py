"""The scheduler's Alembic revisions (registered as `Domain.migrations`): the chain indexer's
cursor, block hashes and lottery projections, the keeper's runs (0007), and the per-chain
scoping of the journal and indexer keys with the genesis record (0009). They branch off the
EVM library's `0003_chain` (its wallets, journal and contract registry: chain/migrations).
"""
