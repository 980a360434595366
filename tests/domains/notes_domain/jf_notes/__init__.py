"""The notes domain: a sixth domain added without touching the kernel. Boots nothing."""
