"""Actors of the doc worker (bound by its domain issue)."""
