"""Small network helpers of the launcher: free ports and "does it answer" probes."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from pathlib import Path


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers do: a port whose old connections linger in TIME_WAIT is free to listen on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def remembered_port(state_file: Path, host: str = "127.0.0.1") -> int:
    """The port used last time (so URLs stay stable across runs) when it is still free."""
    with contextlib.suppress(OSError, ValueError):
        port = int(state_file.read_text().strip())
        if port_free(port, host):
            return port
    port = free_port(host)
    state_file.write_text(f"{port}\n")
    return port


def wait_until(probe: Callable[[], bool], *, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if probe():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
