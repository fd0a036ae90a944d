"""Basic auth and the configured response headers, in front of every route."""

from __future__ import annotations

import asyncio

from fastapi import Response
from fastapi.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actionscheduler_exporter.web.auth import BasicAuth
from actionscheduler_exporter.web.serving import CurrentServing


class AuthAndHeaders:
    """Basic auth and the configured response headers, as a plain ASGI middleware (no
    per-request task group or stream, unlike Starlette's BaseHTTPMiddleware)."""

    def __init__(self, app: ASGIApp, live: CurrentServing) -> None:
        self.app = app
        self.live = live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        serving = self.live.current
        # /healthz stays open for liveness probes: it tells nothing but "the process runs".
        if serving.auth.enabled and scope["path"] != "/healthz":
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            refusal = await self._refusal(serving.auth, header or None)
            if refusal is not None:
                await refusal(scope, receive, self._with_headers(serving.headers, send))
                return
        await self.app(scope, receive, self._with_headers(serving.headers, send))

    @staticmethod
    async def _refusal(auth: BasicAuth, authorization: str | None) -> Response | None:
        """None when the request may pass. A pair verified before is checked without a
        thread; others wait for bcrypt on the auth threads, or are told to come back
        later when too many checks wait already."""
        allowed = auth.remembered(authorization)
        if allowed is None:
            check = auth.check(authorization)
            if check is None:
                return PlainTextResponse(
                    "Too many authentication attempts\n", status_code=429,
                    headers={"Retry-After": "1"},
                )  # fmt: skip
            allowed = await asyncio.wrap_future(check)
        if allowed:
            return None
        return PlainTextResponse(
            "Unauthorized\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Basic realm="actionscheduler-exporter"'},
        )

    @staticmethod
    def _with_headers(headers: list[tuple[bytes, bytes]], send: Send) -> Send:
        if not headers:
            return send

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        return send_with_headers
