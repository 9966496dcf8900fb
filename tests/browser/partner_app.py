"""A partner app on loopback for the browser tests: the pages ledgerport frames, its OAuth
redirect target and its webhook endpoint, served by a threaded HTTP server on its own port (so
on its own origin).

- ``GET /callback``: the OAuth redirect URI; shows the query it got.
- ``GET /embedded`` and ``GET /extension``: a page that asks its parent (the app bridge) for a
  session token, posts each token it receives to ``/verify`` and lists the answers in
  ``#tokens``: one ``<li>`` a token, with its ``jti``, whether it verified, and the context the
  bridge sent. With ``?connect=1`` the first token is also exchanged for the app's tokens
  (``#connected`` shows the granted scope): how an app gets its first tokens after a managed
  install.
- ``POST /verify``: the app's back end checks a session token as the spec says: ES256 against
  ledgerport's JWKS (fetched over HTTP), ``aud`` the app's client id, ``iss`` ledgerport.
- ``POST /hook``: the webhook endpoint; answers the statuses and bodies of ``hook_answers`` in
  turn, then the statuses of ``hook_statuses`` (with ``{}``), then 200, and keeps what arrived.
"""

from __future__ import annotations

import base64
import html
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt

from ledgerport import catalog

_FRAME_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Partner app</title>
<style>body {{ font-family: sans-serif; color: #123; }} li {{ margin: 0.3rem 0; }}</style>
</head><body>
<h2>Partner app: {kind}</h2>
<p id="status">Waiting for a session token</p>
<p id="connected"></p>
<ol id="tokens"></ol>
<script>
"use strict";
const LEDGERPORT = {ledgerport};
const CONNECT = {connect};
let connected = false;
window.addEventListener("message", async (event) => {{
  if (event.origin !== LEDGERPORT) return;
  const message = event.data;
  if (!message || message.type !== "ledgerport:session-token") return;
  if (message.error) {{
    document.getElementById("status").textContent = "Refused: " + message.error;
    return;
  }}
  const exchange = CONNECT && !connected;
  connected = connected || exchange;
  const response = await fetch("/verify", {{
    method: "POST",
    headers: {{"Content-Type": "application/json"}},
    body: JSON.stringify({{token: message.sessionToken, exchange}}),
  }});
  const answer = await response.json();
  const item = document.createElement("li");
  item.dataset.jti = answer.jti || "";
  item.dataset.verified = String(answer.verified);
  item.dataset.target = message.context.target;
  item.dataset.record = message.context.recordId;
  item.dataset.business = message.context.businessId;
  item.textContent = answer.verified
    ? "Verified token " + answer.jti + " for " + answer.sub + " in " + answer.bid
    : "Not verified: " + answer.error;
  document.getElementById("tokens").appendChild(item);
  document.getElementById("status").textContent = "Tokens received: " +
    document.querySelectorAll("#tokens li").length;
  if (answer.scope) {{
    document.getElementById("connected").textContent = "Connected with " + answer.scope;
  }}
}});
window.parent.postMessage({{type: "ledgerport:session-token", id: "first"}}, LEDGERPORT);
</script>
</body></html>
"""


@dataclass
class PartnerApp:
    """The app's server; ``client_id`` and ``client_secret`` are set once the app is made."""

    ledgerport: str
    port: int = 0
    client_id: str = ""
    client_secret: str = ""
    hook_answers: list[tuple[int, bytes]] = field(default_factory=list)
    hook_statuses: list[int] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    signed: list[tuple[str, bytes]] = field(default_factory=list)
    """Each delivery's X-Webhook-Signature header and raw body, as received."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def verify(self, token: str, exchange: bool) -> dict[str, Any]:
        """What the app's back end makes of a session token (and, asked to, its exchange)."""
        try:
            keys = jwt.PyJWKClient(f"{self.ledgerport}/.well-known/jwks.json")
            key = keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["ES256"],
                audience=self.client_id,
                issuer=self.ledgerport,
                options={"require": ["exp", "iat", "jti", "sub"]},
            )
        except jwt.PyJWTError as refused:
            return {"verified": False, "error": str(refused)}
        answer: dict[str, Any] = {"verified": True, **claims}
        if exchange:
            basic = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
            response = httpx.post(
                f"{self.ledgerport}/oauth/token",
                data={
                    "grant_type": catalog.GRANT_TOKEN_EXCHANGE,
                    "subject_token": token,
                    "subject_token_type": catalog.TOKEN_TYPE_JWT,
                },
                headers={"Authorization": f"Basic {basic}"},
                timeout=10.0,
                trust_env=False,
            )
            tokens = response.json()
            answer["scope"] = tokens.get("scope") or f"nothing: {tokens}"
        return answer

    def next_hook_answer(self, body: bytes, signature: str = "") -> tuple[int, bytes]:
        with self.lock:
            self.hooks.append(json.loads(body))
            self.signed.append((signature, body))
            if self.hook_answers:
                return self.hook_answers.pop(0)
            return (self.hook_statuses.pop(0) if self.hook_statuses else 200), b"{}"


@contextmanager
def partner_app(ledgerport: str) -> Iterator[PartnerApp]:
    """The partner app, served on a free loopback port for the block's length."""
    app = PartnerApp(ledgerport)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path == "/callback":
                shown = html.escape(json.dumps(query))
                page = f"<!doctype html><title>Callback</title><h1>Callback</h1><p>{shown}</p>"
                self._send(200, page.encode(), "text/html; charset=utf-8")
            elif parts.path in ("/embedded", "/extension"):
                page = _FRAME_PAGE.format(
                    kind=parts.path[1:],
                    ledgerport=json.dumps(app.ledgerport),
                    connect="true" if query.get("connect") == ["1"] else "false",
                )
                self._send(200, page.encode(), "text/html; charset=utf-8")
            else:
                self._send(404, b"not here", "text/plain")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path == "/verify":
                request = json.loads(body)
                answer = app.verify(request["token"], bool(request.get("exchange")))
                self._send(200, json.dumps(answer).encode(), "application/json")
            elif self.path == "/hook":
                signature = self.headers.get("X-Webhook-Signature", "")
                status, answer = app.next_hook_answer(body, signature)
                self._send(status, answer, "application/json")
            else:
                self._send(404, b"not here", "text/plain")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    app.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield app
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
