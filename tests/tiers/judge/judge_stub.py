"""A FAULT-INJECTION STUB of the OpenAI chat-completions protocol, for the judge's fault tests.

Not a model and not a stand-in for one: a real HTTP server (a thread of the test, or a process:
`python tests/tiers/judge/judge_stub.py PORT`) on 127.0.0.1 that answers POST
/v1/chat/completions as a plan says: a reply text, a status (429 with Retry-After, 500, 400),
a delay (slow), a body that is no completion at all (malformed). Each answer takes the next
entry of the plan, then the default; a rule ({"match": REGEX, ...an answer}) answers every
request whose messages match it, before the plan. An answer's "logprobs" (a list of
{token, logprob, top_logprobs}) is sent as the choice's logprobs.content. POST /stub/plan sets
{"plan": [...], "default": {...}, "rules": [...]}; GET /stub/log returns what was asked
(bodies, and the most requests open at once).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_REPLY = '{"score": 7, "confidence": 0.9, "reasoning": "mostly right"}'


class StubState:
    """The plan of answers and the log of requests, shared by the server's threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.plan: list[dict[str, Any]] = []
        self.default: dict[str, Any] = {"content": DEFAULT_REPLY}
        self.rules: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.open = 0
        self.most_open = 0

    def next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(body)
            self.open += 1
            self.most_open = max(self.most_open, self.open)
            said = "\n".join(str(m.get("content")) for m in body.get("messages") or [])
            for rule in self.rules:
                if re.search(rule["match"], said):
                    return dict(rule)
            return self.plan.pop(0) if self.plan else dict(self.default)

    def done(self) -> None:
        with self.lock:
            self.open -= 1


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *_: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        state = self.server.state
        with state.lock:
            log = {"requests": state.requests, "most_open": state.most_open}
        self._send(200, json.dumps(log).encode())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        state = self.server.state
        if self.path == "/stub/plan":
            with state.lock:
                state.plan = list(body.get("plan", []))
                state.default = body.get("default", state.default)
                state.rules = list(body.get("rules", []))
                state.requests, state.most_open = [], 0
            self._send(200, b"{}")
            return
        answer = state.next(body)
        try:
            time.sleep(answer.get("delay_s", 0))
            if "reject_response_format" in answer and "response_format" in body:
                self._send(400, b'{"error": {"message": "response_format is not supported"}}')
                return
            status = int(answer.get("status", 200))
            headers = {"Retry-After": str(answer["retry_after"])} if "retry_after" in answer else {}
            if "raw" in answer:
                self._send(status, str(answer["raw"]).encode(), headers)
                return
            if status != 200:
                self._send(status, b'{"error": {"message": "injected fault"}}', headers)
                return
            content = answer.get("content", DEFAULT_REPLY)
            reply = {
                "id": "stub",
                "object": "chat.completion",
                "model": answer.get("model", body.get("model")),  # a rule may name another
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                **({} if "logprobs" not in answer else {"_lp": {"content": answer["logprobs"]}}),
                "usage": answer.get("usage", {"prompt_tokens": 120, "completion_tokens": 30}),
            }
            if "_lp" in reply:
                reply["choices"][0]["logprobs"] = reply.pop("_lp")
            self._send(200, json.dumps(reply).encode())
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass
        finally:
            state.done()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # many connections at once (the bench): none refused at accept
    state: StubState


class JudgeStub:
    """The stub in a thread of this process; `url` is its OpenAI base URL."""

    def __init__(self, port: int = 0) -> None:
        self.server = _Server(("127.0.0.1", port), _Handler)
        self.server.state = self.state = StubState()
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def plan(
        self,
        *answers: dict[str, Any],
        default: dict[str, Any] | None = None,
        rules: list[dict[str, Any]] | None = None,
    ) -> None:
        with self.state.lock:
            self.state.plan = list(answers)
            self.state.rules = list(rules or [])
            if default is not None:
                self.state.default = default
            self.state.requests, self.state.most_open = [], 0

    def __enter__(self) -> JudgeStub:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    stub = _Server(("127.0.0.1", int(sys.argv[1])), _Handler)
    stub.state = StubState()
    stub.serve_forever()
