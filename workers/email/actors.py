"""Actors of the email worker (bound by its domain issue)."""
