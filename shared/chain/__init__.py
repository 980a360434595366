"""EVM helpers shared by the chain-actions worker and the scheduler (no web3 import here)."""
