"""The SSRF guard: which webhook URLs and addresses the service may send to.

A URL's host is resolved once; every address it resolves to must pass, and the request then
goes to the checked address (see `sender.py`), so a name cannot resolve to a public address
for the check and to 127.0.0.1 for the connection (DNS rebinding).
"""

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Python 3.11's `is_private`/`is_global` miss some of these (CGNAT is neither) and do not look
# inside IPv4-mapped addresses, so the lists are explicit and embedded IPv4 is unwrapped first.
_NEVER = {
    "unspecified": ["0.0.0.0/8", "::/128"],
    "link-local (cloud metadata)": ["169.254.0.0/16", "fe80::/10"],
    "multicast": ["224.0.0.0/4", "ff00::/8"],
    "reserved": ["240.0.0.0/4", "255.255.255.255/32"],
}
_PRIVATE = {
    "loopback": ["127.0.0.0/8", "::1/128"],
    "private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
    "carrier-grade NAT": ["100.64.0.0/10"],
    "unique-local": ["fc00::/7"],
}
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
RESOLVE_TIMEOUT_SECONDS = 5.0


def _networks(
    groups: dict[str, list[str]],
) -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    return [(name, ipaddress.ip_network(net)) for name, nets in groups.items() for net in nets]


NEVER = _networks(_NEVER)
PRIVATE = _networks(_PRIVATE)


class UrlRefused(ValueError):
    """The URL may not receive webhooks; the message says why."""


def embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped, NAT64, 6to4 or Teredo IPv6 address, else itself."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return address


def refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """What kind of address this is when webhooks may not go to it (`a loopback address`)."""
    inner = embedded_ipv4(address)
    for name, network in NEVER:
        if inner.version == network.version and inner in network:
            return f"a {name} address"
    for name, network in PRIVATE:
        if inner.version == network.version and inner in network:
            return None if allow_private else f"a {name} address"
    if not inner.is_global:
        return "not a public address"
    return None


def _describe(address: IPAddress) -> str:
    inner = embedded_ipv4(address)
    return str(address) if inner == address else f"{address} (IPv4 {inner})"


@dataclass(frozen=True)
class Target:
    """Where a webhook goes: the URL as given and the checked address to connect to."""

    url: httpx.URL
    address: IPAddress

    @property
    def pinned_url(self) -> httpx.URL:
        """The URL with its host replaced by the checked address."""
        return self.url.copy_with(host=str(self.address))

    @property
    def host_header(self) -> str:
        """The Host header the receiver expects."""
        return self.url.netloc.decode("ascii")


def check_url(url: str, *, allow_private: bool) -> httpx.URL:
    """The parsed URL if its form is acceptable (scheme, host, no credentials)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise UrlRefused(f"not a valid URL: {exc}") from exc
    if parsed.scheme == "http" and not allow_private:
        raise UrlRefused("webhook URLs must use https")
    if parsed.scheme not in ("http", "https"):
        raise UrlRefused("webhook URLs must use https")
    if not parsed.host:
        raise UrlRefused("the URL has no host")
    if parsed.userinfo:
        raise UrlRefused("the URL may not contain a user name or password")
    return parsed


async def resolve(url: str, *, allow_private: bool) -> Target:
    """Check the URL, resolve its host once and check every address it resolves to."""
    parsed = check_url(url, allow_private=allow_private)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    literal = True
    try:
        addresses = [ipaddress.ip_address(parsed.host)]
    except ValueError:
        literal = False
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_SECONDS):
                infos = await asyncio.get_running_loop().getaddrinfo(
                    parsed.host, port, type=socket.SOCK_STREAM
                )
        except TimeoutError as exc:
            raise UrlRefused(f"cannot resolve {parsed.host}: no answer in time") from exc
        except (socket.gaierror, UnicodeError) as exc:
            raise UrlRefused(f"cannot resolve {parsed.host}: {exc}") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
    if not addresses:
        raise UrlRefused(f"{parsed.host} resolves to no address")
    for address in addresses:
        reason = refusal(address, allow_private=allow_private)
        if reason is None:
            continue
        if literal:
            raise UrlRefused(f"{_describe(address)} is {reason}; webhooks go to public addresses")
        raise UrlRefused(
            f"{parsed.host} resolves to {_describe(address)}, {reason}; "
            "webhooks go to public addresses"
        )
    return Target(url=parsed, address=addresses[0])
