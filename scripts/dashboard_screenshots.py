"""Screenshots of Ray dashboard pages in headless Chromium, for docs/cluster.md.

    python scripts/dashboard_screenshots.py --dashboard http://127.0.0.1:8265 \
        --shot docs/img/ray-dashboard-actors.png '#/actors' \
        --shot docs/img/ray-dashboard-actor-log.png '#/actors/ACTOR_ID' STDOUT

Each shot is an output file, a dashboard route and optionally the label of a tab to click
first (the actor page opens on STDERR; trials print to STDOUT). With token auth on, the token
(RAY_AUTH_TOKEN, else ~/.ray/auth_token) is set as the dashboard's cookie, as its login
page would. Chromium is driven over the DevTools protocol, so pages render and tabs can be
clicked; `chromium --screenshot` cannot click.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

# The cookie the dashboard's token middleware reads (ray/_private/authentication).
TOKEN_COOKIE = "ray-authentication-token"
WINDOW = (1600, 1000)
RENDER_S = 6.0  # the dashboard polls its APIs and renders after it


class DevTools:
    """One page of a Chromium started with --remote-debugging-port."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self._ws.send_json({"id": call_id, "method": method, "params": params})
        while True:
            message = await self._ws.receive_json()
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"DevTools {method} failed: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result


def _token() -> str | None:
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = Path.home() / ".ray" / "auth_token"
    if not token and path.is_file():
        token = path.read_text().strip()
    return token or None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _page_socket(session: aiohttp.ClientSession, port: int) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            async with session.get(f"http://127.0.0.1:{port}/json") as response:
                pages = [t for t in await response.json() if t["type"] == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.3)
    raise TimeoutError(f"Chromium's DevTools port {port} did not answer in 30 s")


async def take(dashboard: str, shots: list[list[str]], chromium: str) -> None:
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="ciq-chromium-") as profile:
        browser = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--remote-debugging-port={port}",
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            async with aiohttp.ClientSession() as session:
                url = await _page_socket(session, port)
                async with session.ws_connect(url, max_msg_size=0) as ws:
                    page = DevTools(ws)
                    await page.call(
                        "Emulation.setDeviceMetricsOverride",
                        width=WINDOW[0],
                        height=WINDOW[1],
                        deviceScaleFactor=1,
                        mobile=False,
                    )
                    if (token := _token()) is not None:
                        await page.call(
                            "Network.setCookie", name=TOKEN_COOKIE, value=token, url=dashboard
                        )
                    for out, route, *tab in shots:
                        await _shot(page, f"{dashboard.rstrip('/')}/{route}", Path(out), tab)
        finally:
            browser.kill()
            browser.wait()


async def _shot(page: DevTools, url: str, out: Path, tab: list[str]) -> None:
    await page.call("Page.navigate", url=url)
    await asyncio.sleep(RENDER_S)
    if tab:
        # Labels are lower case in the page and upper case on screen (CSS).
        label = json.dumps(tab[0].lower())
        clicked = await page.call(
            "Runtime.evaluate",
            expression=(
                "(() => { const b = [...document.querySelectorAll('button')].find("
                f"e => e.textContent.trim().toLowerCase() === {label}); if (b) b.click(); "
                "return !!b; })()"
            ),
            returnByValue=True,
        )
        if not clicked["result"]["value"]:
            raise RuntimeError(f"no button labelled {tab[0]!r} on {url}")
        await asyncio.sleep(RENDER_S)
    png = await page.call("Page.captureScreenshot", format="png")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(base64.b64decode(png["data"]))
    print(f"wrote {out} ({url})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dashboard", default="http://127.0.0.1:8265")
    parser.add_argument(
        "--shot",
        nargs="+",
        action="append",
        required=True,
        metavar="OUT ROUTE [TAB]",
        help="output PNG, dashboard route (e.g. '#/actors'), optional tab label to click",
    )
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args()
    for shot in args.shot:
        if len(shot) not in (2, 3):
            parser.error(f"--shot takes OUT ROUTE [TAB], got {shot}")
    asyncio.run(take(args.dashboard, args.shot, args.chromium))


if __name__ == "__main__":
    main()
