"""Versioned payload contracts of every job (pydantic v2, frozen, extra=forbid)."""

from .base import SYSTEM_ORG, Contract, Payload, SingleLine

__all__ = ["SYSTEM_ORG", "Contract", "Payload", "SingleLine"]
