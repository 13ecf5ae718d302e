"""Make `docs/dashboard.png` from the running demo, so the picture on the README and the docs
is the dashboard as it is: start `autoprovision serve` in demo mode in a directory of its own
(on loopback), sign in with the demo key in Debian's Chromium, wait until some demo orders run,
and take the whole orders page, 1280 pixels wide.

    .venv/bin/python scripts/dashboard_screenshot.py [--out docs/dashboard.png]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("AUTOPROVISION_TEST_CHROMIUM", "/usr/bin/chromium")
PRINTED = re.compile(r"Open (http://\S+/) and sign in")
DEMO_KEY = re.compile(r"Demo account API key: (\S+)")
RUNNING = 3  # demo orders running before the picture is taken
WAIT_SECONDS = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def printed(log: Path, process: subprocess.Popen[bytes]) -> tuple[str, str]:
    """The URL and the demo key the service printed, once it has."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the service stopped: {log.read_text()}")
        text = log.read_text()
        url, key = PRINTED.search(text), DEMO_KEY.search(text)
        if url and key:
            return url.group(1), key.group(1)
        time.sleep(0.2)  # polling a file the service writes: it has no event to wait on
    raise RuntimeError(f"nothing printed within 60 s: {log.read_text()}")


def shoot(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="dashboard-shot-") as tmp:
        log = Path(tmp) / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROVISION_")}
        env.update(AUTOPROVISION_PORT=str(free_port()), AUTOPROVISION_SIM_PORT=str(free_port()))
        env["PYTHONPATH"] = str(ROOT)
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve"],
            cwd=tmp,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            url, key = printed(log, process)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, args=["--headless", "--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(url)
                page.get_by_label("API key").fill(key)
                page.get_by_role("button", name="Sign in").click()
                running = page.locator(
                    'tr[data-order-id] [data-field="status"]', has_text="running"
                )
                expect(running.nth(RUNNING - 1)).to_be_visible(timeout=WAIT_SECONDS * 1000)
                page.screenshot(path=str(out), full_page=True)
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=40)
    print(f"wrote {out}")  # noqa: T201


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    shoot(parser.parse_args().out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
