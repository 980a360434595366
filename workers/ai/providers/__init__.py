"""Implementations of the provider port (`workers/ai/provider.py`), one module per technology."""
