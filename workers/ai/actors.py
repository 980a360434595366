"""Actors of the ai worker (bound by its domain issue)."""
