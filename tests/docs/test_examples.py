"""The README's worked example and the first-order page's examples, run as written against a
service started in demo mode (`autoprovision serve`, as `make run` starts it), on loopback.

Each block marked `<!-- demo-example -->` runs in bash with `set -euo pipefail`, the venv's
`autoprovision` on PATH and the demo account's key (read from what the service printed) in
`AUTOPROVISION_API_KEY`, as the docs tell the reader to set them; the docs' address,
`http://127.0.0.1:8000`, becomes the test service's. The demo's stock feed is random, so it is
off here (`AUTOPROVISION_DEMO_FEED=false`), and the test puts one of every machine in stock
instead: whatever the example orders, the market has it. The block must exit 0 and leave its
order terminating or terminated."""

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.simulators.control import SimControl, SimControlSync
from tests.docs.markdown import ROOT, examples
from tests.processes import clean_env, wait_until_up
from tests.servers import free_port
from tests.waiting import eventually_sync

PAGES = [ROOT / "README.md", ROOT / "docs" / "getting-started" / "first-order.md"]
DOCS_URL = "http://127.0.0.1:8000"
DEMO_KEY = re.compile(r"Demo account API key.*?(ap_live_[A-Za-z0-9_-]+)")
EXAMPLES = [(page, n, block) for page in PAGES for n, block in enumerate(examples(page), 1)]


@dataclass
class Demo:
    url: str
    sim_url: str
    key: str
    workdir: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """`autoprovision serve` in demo mode, in its own directory, with its simulators embedded."""
    workdir = tmp_path_factory.mktemp("demo")
    port, sim_port = free_port(), free_port()
    log = workdir / "serve.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve"],
        cwd=workdir,
        env=clean_env(
            AUTOPROVISION_PORT=str(port),
            AUTOPROVISION_SIM_PORT=str(sim_port),
            AUTOPROVISION_DEMO_FEED="false",
            AUTOPROVISION_LOG_LEVEL="warning",
        ),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{url}/healthz", process)
        key = eventually_sync(lambda: DEMO_KEY.search(log.read_text()), seconds=30).group(1)
        sim_url = f"http://127.0.0.1:{sim_port}"
        with SimControlSync(sim_url) as sim:
            sim.reset_all(boot_seconds=0.5)
        yield Demo(url, sim_url, key, workdir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def test_each_page_marks_its_examples() -> None:
    for page in PAGES:
        assert examples(page), f"{page.name} has no block marked <!-- demo-example -->"


@pytest.mark.skipif(shutil.which("jq") is None, reason="the examples use jq (apt-get install jq)")
@pytest.mark.parametrize(
    ("page", "block"),
    [(page, block) for page, _n, block in EXAMPLES],
    ids=[f"{page.name}-{n}" for page, n, _block in EXAMPLES],
)
def test_the_example_works_against_the_demo(page: Path, block: str, demo: Demo) -> None:
    with SimControlSync(demo.sim_url) as sim:  # one of every machine, at every provider
        for provider in SimControl.providers():
            for entry in sim.catalog(provider):
                sim.stock(provider, entry["sku"], entry["region"], 1)
    env = clean_env(
        PATH=f"{Path(sys.executable).parent}:{clean_env()['PATH']}",
        AUTOPROVISION_API_URL=demo.url,
        AUTOPROVISION_API_KEY=demo.key,
    )
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.replace(DOCS_URL, demo.url)],
        cwd=demo.workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ran.returncode == 0, (
        f"{page.name}:\n{block}\nstdout:\n{ran.stdout}\nstderr:\n{ran.stderr}"
    )
    newest = httpx.get(
        f"{demo.url}/v1/orders?limit=1", headers={"Authorization": f"Bearer {demo.key}"}
    ).json()["data"][0]
    assert newest["status"] in ("terminating", "terminated"), newest
    assert newest["deployment"]["ip"], newest
