"""API keys, generated with enough entropy that a plain SHA-256 is a safe thing to store, and
SSH public keys' fingerprints."""

import base64
import binascii
import hashlib
import hmac
import secrets

ACCOUNT_KEY_PREFIX = "ap_live_"
ADMIN_KEY_PREFIX = "ap_admin_"


def generate_api_key(prefix: str = ACCOUNT_KEY_PREFIX) -> str:
    """A new random API key (256 bits), shown to its owner once."""
    return prefix + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    """The stored form of a key: SHA-256 hex (keys are random, so no salt or slow hash needed)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def keys_match(candidate: str, expected: str) -> bool:
    """Compare two keys in constant time."""
    return hmac.compare_digest(hash_api_key(candidate), hash_api_key(expected))


def ssh_key_fingerprint(public_key: str | None) -> str | None:
    """The key's SHA256 fingerprint as `ssh-keygen -lf` prints it (`SHA256:<base64>`), or None
    if it is not an OpenSSH public key line."""
    parts = (public_key or "").split()
    if len(parts) < 2:
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
