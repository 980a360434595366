"""The chain-actions domain: the lottery's follow-up transactions (mint a badge, claim a prize,
claim a refund), sent by the worker process `dramatiq workers.chain_actions.app` (`app.py`, the
only module that boots anything). Importing this package boots nothing; producers use
`workers.chain_actions.client`.
"""
