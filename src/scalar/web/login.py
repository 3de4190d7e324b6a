"""The dashboard's sign-in: ``GET /login`` (a form for an API token), ``POST /login`` (checks it and sets
an HttpOnly, SameSite=Strict cookie), ``POST /logout`` (clears it). See docs/security.md.

The cookie holds the token itself, so it is ``HttpOnly`` (no script can read it), ``SameSite=Strict`` (no
other site's page can make the browser send it) and ``Secure`` when served over HTTPS.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

COOKIE_NAME = "scalar_token"  # the same as scalar.api.auth.COOKIE_NAME (api imports web, not back)
COOKIE_MAX_AGE_S = 7 * 86_400
MAX_FORM_BYTES = 4096
DEFAULT_NEXT = "/ui"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in - Scalar</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font-family:system-ui,sans-serif;background:#0f1115;color:#e6e6e6;display:flex;
justify-content:center;align-items:center;min-height:100vh;margin:0}}
form{{background:#181b22;padding:2rem;border-radius:8px;width:26rem;max-width:90vw}}
h1{{font-size:1.3rem;margin-top:0}} label{{display:block;margin-bottom:.4rem}}
input[type=password]{{width:100%;box-sizing:border-box;padding:.5rem;font-family:monospace;
background:#0f1115;color:#e6e6e6;border:1px solid #333;border-radius:4px}}
button{{margin-top:1rem;padding:.5rem 1.2rem;border:0;border-radius:4px;background:#3b82f6;color:#fff}}
.error{{color:#f87171}} .hint{{color:#9ca3af;font-size:.85rem}}
</style></head>
<body><form method="post" action="/login" id="login">
<h1>Scalar</h1>
{message}
<label for="token">API token</label>
<input type="password" id="token" name="token" autocomplete="off" required maxlength="200" autofocus>
<input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
<p class="hint">Use the token <code>scalar up</code> printed (also in its data dir, <code>admin.token</code>),
or one from <code>scalar token create</code>.</p>
</form></body></html>
"""


def safe_next(target: str | None) -> str:
    """Only a path on this server (no ``//host`` or ``scheme:``): no open redirect."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return DEFAULT_NEXT
    return target[:500]


def page(next_path: str, message: str = "", status: int = 200) -> HTMLResponse:
    shown = f'<p class="error">{html.escape(message)}</p>' if message else ""
    body = PAGE.format(message=shown, next=html.escape(safe_next(next_path), quote=True))
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def login_router(authenticate: Callable[[str], Any] | None) -> APIRouter:
    """``authenticate(token)`` returns the principal or ``None``; ``None`` itself: authentication is off."""
    router = APIRouter(tags=["auth"], include_in_schema=False)

    @router.get("/login")
    def login_form(next: str = DEFAULT_NEXT) -> Response:
        if authenticate is None:
            return RedirectResponse(safe_next(next), status_code=303)
        return page(next)

    @router.post("/login")
    async def login(request: Request) -> Response:
        raw = await request.body()
        form = parse_qs(raw[:MAX_FORM_BYTES].decode("utf-8", "replace"), max_num_fields=10)
        token = (form.get("token") or [""])[0].strip()
        target = safe_next((form.get("next") or [DEFAULT_NEXT])[0])
        if authenticate is None:
            return RedirectResponse(target, status_code=303)
        principal = await anyio.to_thread.run_sync(authenticate, token) if token else None
        if principal is None:
            return page(target, "That token is not valid.", status=401)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE_NAME,
            token,
            max_age=COOKIE_MAX_AGE_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    @router.post("/logout")
    def logout() -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
        return response

    return router
