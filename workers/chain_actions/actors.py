"""Actors of the chain_actions worker (bound by its domain issue)."""
