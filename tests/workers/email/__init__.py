"""Tests of workers/email against a real SMTP server in another process."""
