"""A real HTTP server on loopback speaking the OpenAI wire format (chat completions, embeddings).

Runs in a thread of the test process; worker processes reach it over TCP like any provider.
A request is matched to a script by a `[case:NAME]` marker in its messages or inputs; each
scripted `Reply` is used once, in order (status, headers such as Retry-After, a delay, a raw
body). Unscripted requests get a deterministic success. Every request is recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CASE = re.compile(r"\[case:([\w-]+)\]")


@dataclass
class Reply:
    status: int = 200
    content: str | None = None  # chat: the assistant's text
    body: Any = None  # a whole JSON body instead of the generated one
    raw: bytes | None = None  # raw bytes instead of JSON
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Request:
    at: float
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    case: str | None


class FakeOpenAI:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.scripts: dict[str, list[Reply]] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="fake-openai", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.scripts.clear()

    def script(self, case: str, *replies: Reply) -> None:
        with self.lock:
            self.scripts.setdefault(case, []).extend(replies)

    def calls(self, case: str | None = None, path: str | None = None) -> list[Request]:
        with self.lock:
            return [
                r
                for r in self.requests
                if (case is None or r.case == case) and (path is None or r.path.endswith(path))
            ]

    # -- serving -----------------------------------------------------------------------------

    def _next(self, case: str | None) -> Reply | None:
        with self.lock:
            queue = self.scripts.get(case or "")
            return queue.pop(0) if queue else None

    def _answer(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Reply, bytes]:
        text = json.dumps(body)
        match = CASE.search(text)
        case = match.group(1) if match else None
        with self.lock:
            self.requests.append(Request(time.time(), path, body, headers, case))
        reply = self._next(case) or Reply()
        if reply.raw is not None:
            return reply, reply.raw
        if reply.body is not None:
            return reply, json.dumps(reply.body).encode()
        if reply.status >= 400:
            error = {"error": {"message": f"fake error {reply.status}", "type": "fake"}}
            return reply, json.dumps(error).encode()
        if path.endswith("/embeddings"):
            return reply, json.dumps(embeddings(body)).encode()
        return reply, json.dumps(completion(body, reply.content)).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = (
                True  # headers and body leave at once (no 40 ms delayed-ACK stall)
            )

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply, payload = fake._answer(self.path, body, dict(self.headers))
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (read timeout)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


def completion(body: dict[str, Any], content: str | None) -> dict[str, Any]:
    prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
    if content is None:
        content = "{}" if body.get("response_format") else f"A summary of {len(prompt)} characters."
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": tokens(prompt),
            "completion_tokens": tokens(content),
            "total_tokens": tokens(prompt) + tokens(content),
        },
    }


def embeddings(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = []
    for i, text in enumerate(inputs):
        digest = hashlib.sha256(text.encode()).digest()
        data.append({"object": "embedding", "index": i, "embedding": [b / 255 for b in digest[:8]]})
    used = sum(tokens(t) for t in inputs)
    return {
        "object": "list",
        "data": list(reversed(data)),  # out of order on purpose: clients must sort by index
        "model": body.get("model", "fake-embed"),
        "usage": {"prompt_tokens": used, "total_tokens": used},
    }
