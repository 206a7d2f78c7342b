"""A real Standard Webhooks receiver on 127.0.0.1 (a thread): verifies every request with the
`standardwebhooks` library against the secret of the endpoint path it came to, answers 503 to
the first `fail_first` requests, and keeps each verified message once by `webhook-id`."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class Receiver:
    def __init__(self, fail_first: int = 0):
        self.fail_first = fail_first
        self.secrets: dict[str, str] = {}  # path → whsec_ secret
        self.requests = 0
        self.unverified = 0
        self.received: dict[str, dict[str, dict]] = {}  # path → webhook-id → event
        self.deliveries: dict[str, int] = {}  # webhook-id → times it arrived verified
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.requests += 1
                    failing = receiver.requests <= receiver.fail_first
                if failing:
                    return self._answer(503)
                try:
                    event = Webhook(receiver.secrets[self.path]).verify(body, dict(self.headers))
                except (KeyError, WebhookVerificationError):
                    with receiver.lock:
                        receiver.unverified += 1
                    return self._answer(400)
                webhook_id = self.headers["webhook-id"]
                with receiver.lock:
                    receiver.deliveries[webhook_id] = receiver.deliveries.get(webhook_id, 0) + 1
                    receiver.received.setdefault(self.path, {})[webhook_id] = event
                self._answer(204)

            def _answer(self, status: int):
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def types(self, path: str) -> list[str]:
        return sorted(event["type"] for event in self.received.get(path, {}).values())
