"""`fleet export serve-links` as a real process, asked by a real HTTP client: a signed link
downloads its object; paths that are no object key (`..`, `%2e%2e`, a dot file, an empty key)
get a 4xx answer, never a 500 and a traceback in the log."""

from __future__ import annotations

import http.client
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from shared.storage import object_key
from shared.storage.backends.local import LocalBackend
from tests.support.env import test_env
from tests.support.procs import Proc, free_port
from tests.support.wait import wait_for

FLEET = Path(sys.executable).with_name("fleet")
SIGNING_KEY = "links-test-signing-key-0123456789abcdef"


class LinkServer:
    def __init__(self, proc: Proc, port: int, storage: LocalBackend) -> None:
        self.proc, self.port, self.storage = proc, port, storage

    def get(self, target: str) -> tuple[int, bytes]:
        """GET `target` sent as is (http.client does not normalise `..` or percent escapes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", target)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def link_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinkServer]:
    tmp_path = tmp_path_factory.mktemp("links")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/files"
    root = tmp_path / "storage"
    env = {
        **test_env(),
        "PATH": str(FLEET.parent),
        "STORAGE_BACKEND": "local",
        "STORAGE_LOCAL_ROOT": str(root),
        "STORAGE_BUCKET": "exports",
        "STORAGE_SIGNING_KEY": SIGNING_KEY,
        "STORAGE_LINK_BASE_URL": base_url,
    }
    storage = LocalBackend(
        root, "exports", signing_key=SIGNING_KEY.encode(), link_base_url=base_url
    )
    proc = Proc(
        [str(FLEET), "export", "serve-links", "--port", str(port)],
        env=env,
        log_path=tmp_path / "serve-links.log",
    )
    try:
        server = LinkServer(proc, port, storage)

        def up() -> bool:
            if not proc.alive():
                raise AssertionError(f"serve-links exited:\n{proc.log()}")
            try:
                server.get("/")
            except OSError:
                return False
            return True

        wait_for(up, timeout=30, what="fleet export serve-links to listen")
        yield server
    finally:
        proc.close()


def test_a_signed_link_downloads_its_object(link_server: LinkServer) -> None:
    key = object_key("orgs", "o1", "exports", "e1", "accounting.csv")
    link_server.storage.put(key, b"a,b\r\n1,2\r\n", "text/csv")
    link = urlsplit(
        link_server.storage.signed_url(key, expires_in=60, filename="accounting-e1.csv")
    )
    assert link_server.get(f"{link.path}?{link.query}") == (200, b"a,b\r\n1,2\r\n")
    tampered = link.query.replace("sig=", "sig=0")
    assert link_server.get(f"{link.path}?{tampered}")[0] == 403


@pytest.mark.parametrize(
    "target",
    [
        "/files/../../etc/passwd",
        "/files/..%2f..%2fetc%2fpasswd",
        "/files/%2e%2e/%2e%2e/etc/passwd",
        "/files/%2e%2e",
        "/files/.hidden",
        "/files/orgs/.hidden?expires=9999999999&sig=00",
        "/files/",
        "/files",
        "/files//",
        "/files/a//b",
        "/files/%00",
        "/files/%ff%fe",
    ],
)
def test_paths_that_are_no_object_key_get_a_4xx_and_no_traceback(
    link_server: LinkServer, target: str
) -> None:
    (link_server.storage.root / "exports" / ".hidden").write_text("secret")
    status, body = link_server.get(target)
    assert 400 <= status < 500, (status, body)
    assert b"secret" not in body and b"root:" not in body
    time.sleep(0.1)  # the handler logs the request (and any traceback) after answering
    log = link_server.proc.log()
    assert "Traceback" not in log, log


def test_make_run_serves_the_links_it_hands_out(tmp_path: Path) -> None:
    """Before: `make run` handed out links on :9180 that nothing served (`fleet export
    serve-links` had to be started by hand). Now the links server is one of its extras,
    started as `make run` starts it (its process spec), and serves a signed link."""
    from shared.launcher.plan import extra_spec, find_extra

    port = free_port()
    base_url = f"http://127.0.0.1:{port}/files"
    root = tmp_path / "storage"
    env = {
        **test_env(),
        "STORAGE_BACKEND": "local",
        "STORAGE_LOCAL_ROOT": str(root),
        "STORAGE_BUCKET": "exports",
        "STORAGE_SIGNING_KEY": SIGNING_KEY,
        "STORAGE_LINK_BASE_URL": base_url,
        "EXPORT_LINKS_PORT": str(port),
    }
    spec = extra_spec(find_extra("export-links"), env)
    assert spec is not None and spec.health_port == port
    storage = LocalBackend(
        root, "exports", signing_key=SIGNING_KEY.encode(), link_base_url=base_url
    )
    key = object_key("orgs", "o1", "exports", "e2", "make-run.csv")
    storage.put(key, b"a,b\n1,2\n", "text/csv")
    proc = Proc(list(spec.argv), env={**env, **spec.env}, log_path=tmp_path / "links.log")
    try:
        server = LinkServer(proc, port, storage)
        wait_for(lambda: _answers(server), timeout=20, what="the links server's health")
        url = urlsplit(storage.signed_url(key, expires_in=60, filename="make-run.csv"))
        status, body = server.get(f"{url.path}?{url.query}")
        assert (status, body) == (200, b"a,b\n1,2\n")
        assert server.get(f"{url.path}?{url.query.replace('sig=', 'sig=0')}")[0] == 403
    finally:
        proc.close()


def _answers(server: LinkServer) -> bool:
    try:
        return server.get("/health/ready")[0] == 200
    except OSError:
        return False
