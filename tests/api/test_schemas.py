"""Order request validation that does not need a database."""

import base64

from app.api.schemas import is_openssh_public_key


def _key(key_type: str, payload: bytes = b"\x00" * 32) -> str:
    blob = len(key_type).to_bytes(4, "big") + key_type.encode() + payload
    return f"{key_type} {base64.b64encode(blob).decode()} me@laptop"


def test_a_well_formed_openssh_key_is_accepted() -> None:
    assert is_openssh_public_key(_key("ssh-ed25519"))
    assert is_openssh_public_key(_key("ssh-rsa").rsplit(" ", 1)[0])


def test_keys_that_are_not_openssh_public_keys_are_refused() -> None:
    assert not is_openssh_public_key("hello")
    assert not is_openssh_public_key("ssh-ed25519 not-base64!!")
    assert not is_openssh_public_key("ssh-ed25519 " + _key("ssh-rsa").split()[1])  # type mismatch
    assert not is_openssh_public_key("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert not is_openssh_public_key(_key("ssh-ed25519") + "\n" + _key("ssh-ed25519"))
