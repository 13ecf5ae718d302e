"""The keys a QuantaCloud VM gets: the no-login key, made here and found again by fingerprint."""

from app.providers.quantacloud import keys
from app.support.security import ssh_key_fingerprint


def listed(name: str, fingerprint: str | None, key_id: str) -> dict[str, object]:
    return {"id": key_id, "name": name, "managed": False, "fingerprint": fingerprint}


def test_a_no_login_key_is_a_new_public_key_each_time() -> None:
    first, second = keys.new_no_login_key(), keys.new_no_login_key()
    assert first != second
    for public_key in (first, second):
        kind, _blob = public_key.split()
        assert kind == "ssh-ed25519" and ssh_key_fingerprint(public_key) is not None
        assert "PRIVATE" not in public_key


def test_the_no_login_key_is_found_by_the_fingerprint_its_name_carries() -> None:
    fingerprint = ssh_key_fingerprint(keys.new_no_login_key())
    other = ssh_key_fingerprint(keys.new_no_login_key())
    assert fingerprint is not None and other is not None
    ours = listed(keys.no_login_key_name(fingerprint), fingerprint, "key_2")
    padded = listed(keys.no_login_key_name(fingerprint), fingerprint + "=", "key_3")
    customer = listed("autoprovision-0123456789ab", other, "key_1")
    borrowed_name = listed(keys.no_login_key_name(fingerprint), other, "key_0")
    assert keys.no_login_key_id([customer, ours, padded]) == "key_2"
    assert keys.no_login_key_id([customer, borrowed_name]) is None
    assert keys.no_login_key_id([customer]) is None
    assert keys.no_login_key_id({"data": [ours]}) is None
