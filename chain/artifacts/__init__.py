"""Compiled reference contracts (written by `node contracts/build.mjs`; do not edit)."""
