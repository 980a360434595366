"""Tests of the worker packages."""
