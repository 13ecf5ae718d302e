"""Signing secrets: Standard Webhooks' format, sealed at rest, bound to their endpoint."""

import base64
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from app.settings import Settings
from app.support.secrets import (
    SealedSecretError,
    SecretBox,
    SecretBoxLoader,
    SecretKeyError,
    load_secret_box,
    new_signing_secret,
)


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    secret = new_signing_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert new_signing_secret() != secret


def test_a_sealed_secret_opens_only_for_its_own_endpoint() -> None:
    box = SecretBox([Fernet.generate_key().decode()])
    sealed = box.seal("whe_a", "whsec_abc")
    assert "whsec_abc" not in sealed
    assert box.open("whe_a", sealed) == "whsec_abc"
    with pytest.raises(SealedSecretError, match="another endpoint"):
        box.open("whe_b", sealed)


def test_keys_rotate_new_first_old_still_opens() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    sealed_before = SecretBox([old]).seal("whe_a", "whsec_abc")
    rotated = SecretBox([new, old])
    assert rotated.open("whe_a", sealed_before) == "whsec_abc"
    with pytest.raises(SealedSecretError, match="AUTOPROVISION_SECRET_KEY"):
        SecretBox([new]).open("whe_a", sealed_before)


def test_a_malformed_key_stops_start_up_with_a_clear_message() -> None:
    with pytest.raises(SecretKeyError, match="Fernet keys"):
        SecretBoxLoader(Settings(_env_file=None, secret_key="not-a-key"))


def test_without_a_key_one_is_made_once_into_a_private_file(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, secret_key_file=tmp_path / "ap.key")
    loader = SecretBoxLoader(settings)
    assert not settings.secret_key_file.exists()  # nothing made until a secret is needed
    sealed = loader.get().seal("whe_a", "whsec_abc")
    assert stat.S_IMODE(settings.secret_key_file.stat().st_mode) == 0o600
    assert load_secret_box(settings).open("whe_a", sealed) == "whsec_abc"  # after a restart
