"""`python -m shared.console`: the console as `make run` starts it (the same as `fleet web`)."""

from __future__ import annotations

from shared.cli.web import web

if __name__ == "__main__":
    web(host=None, port=None)
