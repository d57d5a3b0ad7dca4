"""Who may read: beyond loopback every page needs the token (login form or Bearer),
and ``alkstore dashboard`` refuses to serve beyond loopback without one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

import alkstore
from alkstore.dashboard import bind_plan, create_app
from tests.dashboard.conftest import (
    ROOT,
    TOKEN,
    NoRedirect,
    Serve,
    free_port,
    http_get,
    http_post,
)

SECRET = b'{"task": "cards.charge", "args": {"card": "4111-SECRET"}}'


def _cookie(headers: Any, name: str) -> str:
    for value in headers.get_all("set-cookie") or []:
        if value.startswith(name + "="):
            return str(value.split("=", 1)[1].split(";", 1)[0])
    raise AssertionError(f"no {name} cookie in {headers}")


async def test_with_login_to_read_every_read_needs_the_token(
    store: alkstore.Store, serve: Serve
) -> None:
    q = store.queue("cards")
    job_id = await q.enqueue(SECRET)
    served = serve(token=TOKEN, login_to_read=True)
    reads = [
        "/",
        "/api/overview",
        "/queues/cards",
        "/dead",
        "/workers",
        "/metrics",
        f"/jobs?id={job_id}",
        f"/jobs/{job_id}",
        f"/api/jobs/{job_id}/payload",
    ]
    for path in reads:
        status, body, headers = http_get(served.url + path)
        assert status == 401, path
        assert "SECRET" not in body and "cards" not in body, path
        assert 'name="token"' in body, path  # the login form instead
        assert headers["www-authenticate"].startswith("Bearer"), path
    wrong = {"Authorization": "Bearer wrong-token-0123456789"}
    assert http_get(served.url + f"/jobs/{job_id}", wrong)[0] == 401
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for path in reads:
        assert http_get(served.url + path, bearer)[0] in (200, 303), path
    status, body, _ = http_get(served.url + f"/jobs/{job_id}", bearer)
    assert status == 200 and "4111-SECRET" in body
    assert http_get(served.url + "/assets/style.css")[0] == 200  # the login page needs it

    # a browser logs in with the form: an HttpOnly, SameSite=Strict session cookie
    status, _, headers = http_get(served.url + "/login")
    assert status == 200
    csrf = _cookie(headers, "alkstore_csrf")
    status, body = http_post(
        served.url + "/login",
        {"csrf": csrf, "token": "wrong-token-0123456789"},
        {"Cookie": f"alkstore_csrf={csrf}"},
    )
    assert status == 403 and "SECRET" not in body
    status, _, headers = _login(served.url, csrf)
    session = _cookie(headers, "alkstore_session")
    raw = next(v for v in headers.get_all("set-cookie") if v.startswith("alkstore_session="))
    assert "httponly" in raw.lower() and "samesite=strict" in raw.lower()
    cookies = {"Cookie": f"alkstore_csrf={csrf}; alkstore_session={session}"}
    status, body, _ = http_get(served.url + f"/jobs/{job_id}", cookies)
    assert status == 200 and "4111-SECRET" in body


def _login(base: str, csrf: str) -> tuple[int, str, Any]:
    """POST the login form; the answer's headers too (its cookies)."""
    data = urllib.parse.urlencode({"csrf": csrf, "token": TOKEN}).encode()
    request = urllib.request.Request(
        base + "/login", data=data, headers={"Cookie": f"alkstore_csrf={csrf}"}, method="POST"
    )
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


async def test_mounted_with_login_to_read_the_auth_hook_decides_reads_too(
    store: alkstore.Store, serve: Serve
) -> None:
    job_id = await store.queue("cards").enqueue(SECRET)
    served = serve(auth=lambda r: r.headers.get("x-staff") == "yes", login_to_read=True)
    status, body, _ = http_get(served.url + f"/jobs/{job_id}")
    assert status == 403 and "SECRET" not in body
    status, body, _ = http_get(served.url + f"/jobs/{job_id}", {"X-Staff": "yes"})
    assert status == 200 and "4111-SECRET" in body


async def test_without_login_to_read_reads_stay_open(store: alkstore.Store, serve: Serve) -> None:
    job_id = await store.queue("cards").enqueue(SECRET)
    served = serve(token=TOKEN)  # as on loopback
    status, body, _ = http_get(served.url + f"/jobs/{job_id}")
    assert status == 200 and "4111-SECRET" in body


def test_login_to_read_needs_a_token_or_a_hook() -> None:
    with pytest.raises(alkstore.InvalidArgumentError, match="login_to_read needs a token"):
        create_app("sqlite:///unused.db", login_to_read=True)
    create_app("sqlite:///unused.db", login_to_read=True, auth=lambda request: True)


def test_bind_plan_keeps_loopback_open_and_gates_every_other_address() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        hosts, private = bind_plan(host, None)
        assert hosts is not None and host in hosts and not private, host
    for host in ("0.0.0.0", "::", "192.168.1.5", "dashboard.example"):
        with pytest.raises(alkstore.InvalidArgumentError, match="beyond loopback"):
            bind_plan(host, None)
        assert bind_plan(host, TOKEN) == (None, True), host


def _command(target: Any, *args: str) -> list[str]:
    store = ["--url", target.url, "--schema", target.schema]
    return [sys.executable, "-m", "alkstore", *store, "dashboard", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ALKSTORE_DASHBOARD_TOKEN", None)
    return env


def test_dashboard_command_refuses_to_serve_beyond_loopback_without_a_token(
    target: Any,
) -> None:
    out = subprocess.run(
        _command(target, "--host", "0.0.0.0", "--port", str(free_port())),
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2, out.stderr
    assert "beyond loopback" in out.stderr and "--token" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_dashboard_command_beyond_loopback_needs_the_token_to_read(target: Any) -> None:
    port = free_port()
    proc = subprocess.Popen(
        _command(target, "--host", "0.0.0.0", "--port", str(port), "--token", TOKEN),
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30  # names the failure; pytest's timeout bounds it
        while True:
            try:
                status, body, _ = http_get(url)
                break
            except urllib.error.URLError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"dashboard did not start: {proc.stderr.read()!r}")  # type: ignore[union-attr]
                time.sleep(0.1)
        assert status == 401 and 'name="token"' in body
        assert http_get(url, {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    finally:
        proc.terminate()
        proc.wait(30)
    assert b"every page needs the token" in proc.stderr.read()  # type: ignore[union-attr]
