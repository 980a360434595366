"""Actors of the export worker (bound by its domain issue)."""
