"""`autoprovision doctor` against the simulators: it passes, it names each injected fault in one
failing line, and the simulators see only reads."""

import json
import os
import shutil
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from app.cli import main
from app.core.market import Fees, Offer, OrderWants
from app.doctor import passed, render_text, run
from app.doctor.images import image_fit_verdict
from app.doctor.local import check_reports
from app.doctor.providers import ResponseLog, balance_verdict, clock_check
from app.providers.base import Image, ImageFit, Images, MachineKey
from app.providers.diagnosis import Status
from app.providers.registry import simulated, simulated_specs, spec_for
from app.settings import Settings, get_settings
from app.simulators.control import SimControlSync
from tests.fixtures.settings import SECRET_KEY

PROVIDERS = [spec.name for spec in simulated_specs()]
TIMEOUT = 5.0  # room for a loaded machine to answer (1 s once was not); the fault outlasts it


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A migrated SQLite database of this test's own (the checks of providers need no more)."""
    path = tmp_path / "doctor.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite+aiosqlite:///{path}"


def _environment(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    for name in [n for n in os.environ if n.startswith("AUTOPROVISION_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTOPROVISION_DATABASE_URL", database_url)
    monkeypatch.setenv("AUTOPROVISION_SECRET_KEY", SECRET_KEY)
    get_settings.cache_clear()


def _only_reads(sim_sync: SimControlSync) -> None:
    for provider in PROVIDERS:
        sent = sim_sync.requests(provider)
        assert sent, f"{provider} saw no request"
        writes = [
            r for r in sent if r["method"] != "GET" and not r["path"].endswith("/oauth2/token")
        ]
        assert writes == [], provider
        assert sim_sync.creates(provider) == [] and sim_sync.vms(provider) == []


def test_doctor_passes_against_the_simulators(
    database_url: str,
    sim_url: str,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _environment(monkeypatch, database_url)
    code = main(["doctor", "--sim-url", sim_url, "--timeout", str(TIMEOUT)])
    output = capsys.readouterr().out
    lines = [line for line in output.splitlines() if line.startswith("  ")]
    assert code == 0, output
    assert lines and all(line.split()[0] == "ok" for line in lines), output
    for provider in PROVIDERS:
        assert f"  ok    {provider}" in output
    assert "every check passed" in output
    _only_reads(sim_sync)
    get_settings.cache_clear()


def test_json_output_parses_and_matches(
    sqlite_url: str,
    sim_url: str,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _environment(monkeypatch, sqlite_url)
    code = main(["doctor", "--json", "--sim-url", sim_url, "--timeout", str(TIMEOUT)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] is True
    assert {c["status"] for c in report["checks"]} == {"pass"}
    assert {c["scope"] for c in report["checks"]} >= {*PROVIDERS, "database", "settings"}
    names = {(c["scope"], c["name"]) for c in report["checks"]}
    for provider in PROVIDERS:
        assert {"credentials", "stock", "prices", "balance", "rate limits", "clock"} <= {
            name for scope, name in names if scope == provider
        }
    assert ("verda", "cluster image") in names
    # Which GPUs the configured images run, from the providers' own lists.
    fit = {c["scope"]: c["reason"] for c in report["checks"] if c["name"] == "image fit"}
    assert set(fit) == {"verda", "hyperstack"}  # QuantaCloud boots one stock image
    assert fit["hyperstack"].startswith(
        "image 'Ubuntu Server 22.04 LTS R535 CUDA 12.2' runs H200, H100, A100-80G, L40, "
        "RTX-A6000; B300, B200, RTX-PRO-6000 boot 'Ubuntu Server 24.04 LTS R580 CUDA 13.0 "
        "with Docker'; a serve script (R580) gets"
    )
    assert "RTX-A6000, V100 boot 'ubuntu-22.04-cuda-12.4-docker'" in fit["verda"]
    assert "no image with R580 on RTX-A6000, V100" in fit["verda"]
    assert "cluster image 'ubuntu-24.04-cuda-13.0-cluster' runs B300, B200, H200" in fit["verda"]
    get_settings.cache_clear()


def test_a_machine_no_image_boots_is_a_warning() -> None:
    machine = MachineKey("B200", 8)
    listed = (Image("os-535", 535), Image("os-580", 580))
    booted = Images.of(listed, [ImageFit("8B200", machine, ("os-580",), configured="os-535")])
    verdict = image_fit_verdict(booted)
    assert verdict == (
        "image 'os-535' runs none of them; B200 boot 'os-580'; a serve script (R580) gets "
        "'os-580' on B200"
    )
    unbootable = Images.of(listed, [ImageFit("8B200", machine, (), configured="os-535")])
    assert image_fit_verdict(unbootable) == (
        Status.WARN,
        "image 'os-535' runs none of them; no image with R580 on B200. nothing boots B200: "
        "orders for them never deploy here",
    )


@pytest.mark.parametrize(
    ("kind", "extra", "reason"),
    [
        ("http_500", {"status": 503}, "provider error 503"),
        ("http_500", {}, "provider error 500"),
        ("timeout", {"seconds": TIMEOUT + 1}, f"no answer in {TIMEOUT:g} s"),
        ("http_429", {"seconds": 3}, "rate limited"),
    ],
)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_injected_fault_is_one_clear_failing_line(
    provider: str,
    kind: str,
    extra: dict[str, float],
    reason: str,
    sqlite_url: str,
    sim_url: str,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim_sync.fault(provider, kind, **extra)
    _environment(monkeypatch, sqlite_url)
    code = main(["doctor", "--sim-url", sim_url, "--timeout", str(TIMEOUT)])
    output = capsys.readouterr().out
    failing = [line for line in output.splitlines() if line.startswith("  FAIL")]
    assert code == 1, output
    assert len(failing) == 1, output
    assert f" {provider} " in failing[0] and reason in failing[0], output
    _only_reads(sim_sync)
    get_settings.cache_clear()


def test_a_cluster_image_verda_does_not_have_is_one_failing_line(
    sqlite_url: str,
    sim_url: str,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _environment(monkeypatch, sqlite_url)
    monkeypatch.setenv("AUTOPROVISION_VERDA_CLUSTER_IMAGE", "ubuntu-99.04-no-such-cluster")
    code = main(["doctor", "--sim-url", sim_url, "--timeout", str(TIMEOUT)])
    output = capsys.readouterr().out
    failing = [line for line in output.splitlines() if line.startswith("  FAIL")]
    assert code == 1, output
    assert len(failing) == 1 and " verda " in failing[0], output
    assert "'ubuntu-99.04-no-such-cluster' is not among Verda's cluster images" in failing[0]
    # Control: the default cluster image passes (test_doctor_passes_against_the_simulators).
    get_settings.cache_clear()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_wrong_key_is_credentials_refused(
    provider: str, sqlite_url: str, sim_url: str, sim_sync: SimControlSync
) -> None:
    settings = simulated(Settings(_env_file=None, database_url=sqlite_url), sim_url)
    spec = spec_for(provider)
    wrong = dict.fromkeys(spec.settings_model.credential_fields, "wrong-key-0123456789")
    providers = {
        **settings.providers,
        provider: spec.at_simulator(spec.settings_of(settings), sim_url, **wrong),
    }
    checks = await run(settings.model_copy(update={"providers": providers}), timeout=TIMEOUT)
    failed = [c for c in checks if c.status is Status.FAIL]
    assert [(c.scope, c.name, c.reason) for c in failed] == [
        (provider, "credentials", "credentials refused")
    ]
    assert not passed(checks)
    assert "wrong-key" not in render_text(checks)
    assert any(c.scope == provider and c.status is Status.SKIP for c in checks)


def _offer(price: str) -> Offer:
    return Offer(
        provider=spec_for(PROVIDERS[0]).provider,
        region="R-1",
        sku="8x",
        gpu_model="H100",
        gpu_count=8,
        price_per_hour=Decimal(price),
    )


def _order(max_price: str) -> OrderWants:
    return OrderWants(
        id="ord_1",
        created_at=datetime.now(UTC),
        providers=frozenset({PROVIDERS[0]}),
        gpu_model="H100",
        gpu_count=8,
        max_price_per_hour=Decimal(max_price),
    )


def test_the_balance_must_pay_one_hour_of_the_cheapest_offer_an_order_could_take() -> None:
    offers = [_offer("20.00"), _offer("18.00"), _offer("30.00")]
    fees = Fees(Decimal("5"), Decimal("0.10"))
    # 18.00 with fees is 19.00: the order at 19.50 could take it, not the 20.00 one.
    short = balance_verdict(Decimal("17.99"), PROVIDERS[0], offers, [_order("19.50")], fees)
    assert not isinstance(short, str)
    assert short[0] is Status.FAIL and "$18.00" in short[1]
    assert isinstance(
        balance_verdict(Decimal("18.00"), PROVIDERS[0], offers, [_order("19.50")], fees), str
    )
    none_fits = balance_verdict(Decimal("1"), PROVIDERS[0], offers, [_order("5.00")], fees)
    assert isinstance(none_fits, str) and "none of 1" in none_fits


def test_a_clock_far_off_is_a_warning() -> None:
    log = ResponseLog(skews=[-0.4, 7.2])
    check = clock_check(PROVIDERS[0], log)
    assert check.status is Status.WARN and "7 s ahead" in check.reason
    assert clock_check(PROVIDERS[0], ResponseLog(skews=[-0.9])).status is Status.PASS


def test_live_mode_without_a_public_url_warns_that_machines_cannot_report() -> None:
    live = Settings(_env_file=None, mode="live")
    warned = check_reports(live)
    assert (warned.status, "AUTOPROVISION_PUBLIC_URL is unset" in warned.reason) == (
        Status.WARN,
        True,
    )
    public = Settings(_env_file=None, mode="live", public_url="https://gpus.example.com/")
    assert check_reports(public).status == Status.PASS  # control: with one, it passes
    assert "https://gpus.example.com/v1/machines/report" in check_reports(public).reason
    assert check_reports(Settings(_env_file=None, mode="demo")).status == Status.PASS
