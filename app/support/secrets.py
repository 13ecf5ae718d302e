"""Secrets at rest: webhook signing secrets (made here) and orders' start-up scripts, sealed
with Fernet and opened again to sign or to send."""

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Protocol

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import SecretStr

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


class SecretKeyError(RuntimeError):
    """The configured encryption key cannot be used."""


class SealedSecretError(RuntimeError):
    """A sealed secret cannot be opened with the configured keys, or belongs to another row."""


def new_signing_secret() -> str:
    """A fresh Standard Webhooks secret: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


class SecretBox:
    """Seals with the first key and opens with any, so keys can be rotated.

    Fernet has no associated data, so each plaintext carries the id of the row it belongs to:
    a sealed secret copied onto another row does not open there.
    """

    def __init__(self, keys: list[str]) -> None:
        try:
            self._fernet = MultiFernet([Fernet(key.encode()) for key in keys])
        except (ValueError, TypeError) as exc:
            raise SecretKeyError(
                "AUTOPROVISION_SECRET_KEY must be Fernet keys (32 url-safe base64-encoded "
                "bytes each), separated by commas"
            ) from exc
        self._first_key = base64.urlsafe_b64decode(keys[0])

    def derive(self, purpose: str, subject: str) -> bytes:
        """32 bytes that only a holder of the sealing (first) key can compute, the same each
        time for the same `purpose` and `subject`: HMAC-SHA256 of both under that key, which
        tells nothing of the key itself."""
        message = f"{purpose}\0{subject}".encode()
        return hmac.new(self._first_key, message, hashlib.sha256).digest()

    def seal(self, owner_id: str, secret: str) -> str:
        """The secret encrypted for storage on row `owner_id`."""
        return self._fernet.encrypt(f"{owner_id}:{secret}".encode()).decode()

    def open(
        self,
        owner_id: str,
        sealed: str,
        *,
        what: str = "the signing secret",
        owner_kind: str = "endpoint",
    ) -> str:
        """The secret sealed for row `owner_id` (`what` and `owner_kind` name them in errors)."""
        try:
            plain = self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken as exc:
            raise SealedSecretError(
                f"{what} cannot be decrypted: was AUTOPROVISION_SECRET_KEY changed "
                "without keeping the old key after it?"
            ) from exc
        owner, _, secret = plain.partition(":")
        if owner != owner_id:
            raise SealedSecretError(f"{what} belongs to another {owner_kind}")
        return secret


def _key_from_file(path: Path) -> str:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    key = Fernet.generate_key().decode()
    with os.fdopen(descriptor, "w") as file:
        file.write(key + "\n")
    return key


class KeySettings(Protocol):
    """Where the keys come from (the service's settings have both)."""

    secret_key: SecretStr | None
    secret_key_file: Path


def load_secret_box(settings: KeySettings) -> SecretBox:
    """The box for the configured keys, or for the key file (made on first use)."""
    if settings.secret_key is not None:
        keys = [k.strip() for k in settings.secret_key.get_secret_value().split(",") if k.strip()]
    else:
        keys = [_key_from_file(settings.secret_key_file)]
    if not keys:
        raise SecretKeyError("AUTOPROVISION_SECRET_KEY is set but holds no key")
    return SecretBox(keys)


class SecretBoxLoader:
    """Loads the box on first use, so a service that never uses webhooks makes no key file
    (but demo mode does: the demo account's key is derived from it).

    A key given in settings is checked at once, so a malformed one stops the start-up.
    """

    def __init__(self, settings: KeySettings) -> None:
        self.settings = settings
        self._box = load_secret_box(settings) if settings.secret_key is not None else None

    def get(self) -> SecretBox:
        """The box, loading (or making) the key file the first time."""
        if self._box is None:
            self._box = load_secret_box(self.settings)
        return self._box
