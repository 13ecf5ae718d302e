"""`orders place --startup-script FILE` and what `orders get` shows of it, against a running
service: the file's bytes as UTF-8 text, never shown again but as their size and SHA-256."""

import hashlib
import re
from pathlib import Path

from tests.client.cli import B300, Account, Autoprovision, place

SCRIPT = "#!/bin/bash\r\nexport HF_TOKEN=hf_s3cr3t\necho 'prêt ✓'\n".encode()


def test_the_file_is_sent_as_it_is_and_shown_as_its_size_and_hash(
    autoprovision: Autoprovision, account: Account, tmp_path: Path
) -> None:
    script = tmp_path / "boot.sh"
    script.write_bytes(SCRIPT)
    order_id = place(autoprovision, "--startup-script", str(script))
    (order,) = account.orders()
    digest = hashlib.sha256(SCRIPT).hexdigest()
    assert (order["startup_script_sha256"], order["startup_script_bytes"]) == (digest, len(SCRIPT))
    shown = autoprovision("orders", "get", order_id)
    assert shown.code == 0
    assert re.search(rf"Start-up script\s+{len(SCRIPT)} bytes, SHA-256 {digest}", shown.out)
    assert "hf_s3cr3t" not in shown.out + autoprovision("orders", "get", order_id, "--json").out


def test_an_order_without_one_shows_no_script_line(
    autoprovision: Autoprovision, account: Account
) -> None:
    order_id = place(autoprovision)
    assert "Start-up script" not in autoprovision("orders", "get", order_id).out


def test_a_file_that_is_not_utf8_or_not_there_is_exit_2_before_any_request(
    autoprovision: Autoprovision, nowhere: str, tmp_path: Path
) -> None:
    latin1 = tmp_path / "latin1.sh"
    latin1.write_bytes("echo 'prêt'\n".encode("latin-1"))
    for path, said in (
        (latin1, "is not UTF-8 text (byte 8: 0xea)"),
        (tmp_path / "no", "cannot read"),
    ):
        ran = autoprovision(
            "orders", "place", *B300, "--startup-script", str(path), "--url", nowhere, "--key", "k"
        )
        unboxed = " ".join(re.sub("[\u2500-\u257f]", " ", ran.err).split())  # Typer's box
        assert ran.code == 2 and said in unboxed, ran.err
        assert "Traceback" not in ran.err


def test_a_script_the_service_refuses_is_exit_2_naming_it(
    autoprovision: Autoprovision, account: Account, tmp_path: Path
) -> None:
    script = tmp_path / "nul.sh"
    script.write_bytes(b"echo a\x00b\n")
    ran = autoprovision("orders", "place", *B300, "--startup-script", str(script))
    assert ran.code == 2 and "startup_script: must not contain a NUL character" in ran.err
    assert account.orders() == []
