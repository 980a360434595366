"""A TCP forwarder that a test can start late and stop: an RPC endpoint that goes down and up.

`lose_reply_to(marker)` makes it forward the next request holding `marker` and then close that
connection when the reply comes back, before the client reads it: the request ran, its reply
is lost (a Redis primary killed between the two, a network cut). The client sees a closed
connection and, if it retries, sends the request again on a new one. `lose_request(marker)`
drops the next request holding `marker` before it reaches the server and goes down with it:
the server never ran it, and the client's retries are refused until `up()`.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port = port
        self.target = target
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._down_after_loss = False
        self._request_marker: bytes | None = None
        #: Set once a reply was lost (`lose_reply_to`), a request dropped (`lose_request`).
        self.reply_lost = threading.Event()
        self.request_lost = threading.Event()

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            # A thread blocked in accept() keeps a closed listening socket accepting: shut
            # it down first, which wakes that accept() with an error.
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            server.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:  # shut down first, as above: a thread may be blocked in recv()
            _shutdown(conn)
            conn.close()

    def lose_reply_to(self, marker: bytes, *, then_down: bool = False) -> threading.Event:
        """Lose the reply to the next request whose bytes hold `marker` (once); the returned
        event is set when it was lost. `then_down`: the proxy goes down at that moment (new
        connections refused until `up()`), so that a client's retries fail too."""
        self.reply_lost.clear()
        self._down_after_loss = then_down
        self._marker = marker
        return self.reply_lost

    def lose_request(self, marker: bytes) -> threading.Event:
        """Drop the next request whose bytes hold `marker` and go down at that moment (once);
        the returned event is set when it was dropped."""
        self.request_lost.clear()
        self._request_marker = marker
        return self.request_lost

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._conns += [client, upstream]
            armed = threading.Event()  # this connection's next reply is to be lost
            threading.Thread(
                target=self._requests, args=(client, upstream, armed), daemon=True
            ).start()
            threading.Thread(
                target=self._replies, args=(upstream, client, armed), daemon=True
            ).start()

    def _requests(self, src: socket.socket, dst: socket.socket, armed: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                dropped = self._request_marker
                if dropped is not None and dropped in data:
                    self._request_marker = None
                    self.down()
                    self.request_lost.set()
                    break
                marker = self._marker
                if marker is not None and marker in data:
                    self._marker = None
                    armed.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shutdown(src, dst)

    def _replies(self, src: socket.socket, dst: socket.socket, armed: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if armed.is_set():  # the request ran; its reply never reaches the client
                    if self._down_after_loss:
                        self.down()
                    self.reply_lost.set()
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shutdown(src, dst)


def _shutdown(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
