"""Benchmarks: bare Dramatiq vs jobfleet in one run (`throughput.py`), worker memory (`memory.py`)."""
