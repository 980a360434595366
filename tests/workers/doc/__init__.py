"""Tests of the doc worker (issue 7)."""
