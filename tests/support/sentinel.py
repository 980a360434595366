"""A Redis primary, its replica and three Sentinels on free loopback ports (redis-server only).

    with SentinelGroup(tmp, master="fleet") as group:
        group.sentinels_spec     # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3" (REDIS_SENTINELS)
        group.kill_primary()     # SIGKILL: what it had not sent to its replica is lost
        group.wait_promoted()    # the replica is the master the Sentinels name

No persistence (the replica is the copy); the Sentinels decide fast (down after 1 s).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from types import TracebackType

import redis

from tests.support.procs import free_port
from tests.support.wait import wait_for


class SentinelGroup:
    def __init__(self, tmp: Path, *, master: str = "fleet", down_after_ms: int = 1000) -> None:
        self.tmp = tmp
        self.master = master
        self.procs: list[subprocess.Popen[bytes]] = []
        self.primary_port, self.replica_port = free_port(), free_port()
        self.primary = self._server("primary", self.primary_port)
        self.replica = self._server(
            "replica", self.replica_port, "--replicaof", "127.0.0.1", str(self.primary_port)
        )
        self.sentinel_ports = [free_port() for _ in range(3)]
        for index, port in enumerate(self.sentinel_ports):
            conf = tmp / f"sentinel-{index}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {tmp}\n"
                f"sentinel monitor {master} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {master} {down_after_ms}\n"
                f"sentinel failover-timeout {master} 10000\n"
                f"sentinel parallel-syncs {master} 1\n"
            )
            self.procs.append(self._spawn(f"sentinel-{index}", str(conf), "--sentinel"))
        link = redis.Redis(port=self.replica_port)
        wait_for(
            lambda: link.info("replication").get("master_link_status") == "up",
            timeout=15,
            what="the replica in sync",
        )
        link.close()
        for port in self.sentinel_ports:  # each sees the replica and the two other Sentinels
            s = redis.Redis(port=port, decode_responses=True)
            wait_for(
                lambda s=s: (
                    len(s.execute_command("SENTINEL", "REPLICAS", master)) == 1
                    and len(s.execute_command("SENTINEL", "SENTINELS", master)) == 2
                ),
                timeout=20,
                what=f"sentinel {port} sees the replica and its peers",
            )
            s.close()

    @property
    def sentinels_spec(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def master_port(self) -> int:
        s = redis.Redis(port=self.sentinel_ports[0], decode_responses=True)
        try:
            _, port = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.master)
            return int(port)
        finally:
            s.close()

    def replication_lag(self) -> int:
        """Bytes of the primary's replication stream its replica has not acknowledged yet."""
        client = redis.Redis(port=self.primary_port, decode_responses=True)
        try:
            info = client.info("replication")
        finally:
            client.close()
        return int(info["master_repl_offset"]) - int(info["slave0"]["offset"])

    def kill_primary(self) -> None:
        os.kill(self.primary.pid, signal.SIGKILL)
        self.primary.wait(10)

    def wait_promoted(self, timeout: float = 30) -> None:
        wait_for(
            lambda: self.master_port() == self.replica_port,
            timeout=timeout,
            what="the replica promoted by the Sentinels",
        )

    def _server(self, name: str, port: int, *extra: str) -> subprocess.Popen[bytes]:
        proc = self._spawn(
            name,
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(self.tmp), *extra,
        )  # fmt: skip
        self.procs.append(proc)
        client = redis.Redis(port=port)
        wait_for(lambda: _pings(client), timeout=10, what=f"redis-server {name} on {port}")
        client.close()
        return proc

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.tmp / f"{name}.log", "wb") as log:
            return subprocess.Popen(["redis-server", *args], stdout=log, stderr=subprocess.STDOUT)

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> SentinelGroup:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
