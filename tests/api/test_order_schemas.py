"""Order request validation that does not need a database."""

from app.api.order_schemas import is_openssh_public_key
from tests.factories import ssh_key


def test_a_well_formed_openssh_key_is_accepted() -> None:
    assert is_openssh_public_key(ssh_key("ssh-ed25519"))
    assert is_openssh_public_key(ssh_key("ssh-rsa").rsplit(" ", 1)[0])


def test_keys_that_are_not_openssh_public_keys_are_refused() -> None:
    assert not is_openssh_public_key("hello")
    assert not is_openssh_public_key("ssh-ed25519 not-base64!!")
    assert not is_openssh_public_key(
        "ssh-ed25519 " + ssh_key("ssh-rsa").split()[1]
    )  # type mismatch
    assert not is_openssh_public_key("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert not is_openssh_public_key(ssh_key("ssh-ed25519") + "\n" + ssh_key("ssh-ed25519"))
