"""The EVM client library (no web3 import here): JSON-RPC client, ABI and addresses, fees, the
transaction sender and its journal, signer locks, custodial wallets and their keys, the contract
registry, the reference contracts' deployment and a local anvil (`devnet`), and their settings
(`CHAIN_*`). Every process that talks to the chain builds on it."""
