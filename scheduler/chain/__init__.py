"""The scheduler's chain work: the indexer (`indexer.py`: events, projections, reorgs), the
lottery keeper (`keeper.py`), their composition and periodic passes (`jobs.py`), what
`fleet chain status` and `fleet status` say of them (`status.py`), and `fleet chain` (`cli.py`).

Built on the kernel's EVM client library (`chain/`); the follow-up chain actions are
staged through `workers.chain_actions.client`.
"""
