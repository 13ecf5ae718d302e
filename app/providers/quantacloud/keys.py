"""The SSH keys a QuantaCloud VM gets: always named in its create, never left to the account.

A create that names no keys gets every key on the account (`facts.SSH_KEY_IDS`), and every
customer key this service registers sits on that one account. So a VM gets its order's key,
or, for an order without one, the service's no-login key: an Ed25519 key whose private half is
dropped the moment it is made, so nobody can log in with it. Its public half is registered once,
named after a hash of its fingerprint, and found again by that fingerprint after a restart.
Only holders of the account's API key can add keys, so no one else can plant a key under that
name.
"""

import asyncio
import hashlib
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.providers.base import Rejected, Unavailable
from app.providers.quantacloud import facts, parse
from app.providers.quantacloud.client import QuantaCloudClient
from app.providers.quantacloud.parse import PROVIDER
from app.support.security import ssh_key_fingerprint


def new_no_login_key() -> str:
    """A new Ed25519 public key, OpenSSH form; its private half is never bound to a name, so it
    is gone when this returns."""
    public = Ed25519PrivateKey.generate().public_key()
    return public.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode("ascii")


def no_login_key_name(fingerprint: str) -> str:
    """What the no-login key with this fingerprint is called on the account."""
    digest = hashlib.sha256(fingerprint.strip().rstrip("=").encode()).hexdigest()
    return f"{facts.NO_LOGIN_KEY_PREFIX}{digest[:16]}"


def no_login_key_id(listed: Any) -> str | None:
    """`GET /users/me/ssh-keys` -> the id of a no-login key: one whose name is the one its own
    fingerprint gives (the lowest id, should there be several)."""
    found = [
        str(key[facts.KEY_ID])
        for key in (listed if isinstance(listed, list) else [])
        if isinstance(key, dict)
        and isinstance(key.get(facts.KEY_ID), str | int)
        and isinstance(fingerprint := key.get(facts.KEY_FINGERPRINT), str)
        and key.get(facts.KEY_NAME) == no_login_key_name(fingerprint)
    ]
    return min(found, default=None)


class AccountKeys:
    """The keys on the account a create names: the order's, or the service's no-login key."""

    def __init__(self, api: QuantaCloudClient) -> None:
        self._api = api
        self._no_login: str | None = None  # its id, once found or registered
        self._no_login_lock = asyncio.Lock()

    async def for_vm(self, ssh_public_key: str | None) -> list[str]:
        """The ids of the keys a VM is to get: never empty, as an empty list (or none) gives
        the VM every key on the account."""
        public_key = (ssh_public_key or "").strip()
        return [await self.customer_key(public_key) if public_key else await self.no_login()]

    async def customer_key(self, public_key: str) -> str:
        """The id of this key on the account, registering it if it is not there yet."""
        key_fingerprint = ssh_key_fingerprint(public_key)
        if key_fingerprint is not None:
            found = parse.ssh_key_id(await self._api.ssh_keys(), key_fingerprint)
            if found is not None:
                return found
        label = hashlib.sha256(public_key.encode()).hexdigest()[:12]
        created = await self._api.add_ssh_key(f"{facts.KEY_NAME_PREFIX}{label}", public_key)
        return _created_id(created)

    async def no_login(self) -> str:
        """The id of the service's no-login key, registered the first time it is needed."""
        async with self._no_login_lock:
            if self._no_login is None:
                self._no_login = no_login_key_id(await self._api.ssh_keys())
            if self._no_login is None:
                public_key = new_no_login_key()
                name = no_login_key_name(ssh_key_fingerprint(public_key) or "")
                try:
                    created = await self._api.add_ssh_key(name, public_key)
                except Rejected as refused:  # ours, not the order's: the order waits
                    raise Unavailable(
                        PROVIDER, f"registering our no-login key: {refused}"
                    ) from None
                self._no_login = _created_id(created)
            return self._no_login

    def forget(self) -> None:
        """Look the no-login key up again next time (a create refused it: it may be gone)."""
        self._no_login = None


def _created_id(body: Any) -> str:
    key_id = parse.created_id(body)
    if key_id is None:
        raise Unavailable(PROVIDER, f"POST {facts.SSH_KEYS} answered without an id")
    return key_id
