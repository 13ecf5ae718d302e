"""The SSRF guard: which webhook URLs and addresses the service may send to.

A URL's host is resolved once; every address it resolves to must pass, and the request then
goes to the checked address (see `sender.py`), so a name cannot resolve to a public address
for the check and to 127.0.0.1 for the connection (DNS rebinding). Registration and every
delivery run the same `resolve`.
"""

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Python 3.11's `is_private`/`is_global` miss some of these (CGNAT is neither, ::/96 is global)
# and do not look inside IPv4-mapped addresses, so the lists are explicit and embedded IPv4 is
# unwrapped first. Where ranges nest (:: and ::1 inside ::/96) the narrowest one decides.
_NEVER = {
    "an unspecified": ["0.0.0.0/8", "::/128"],
    "a link-local (cloud metadata)": ["169.254.0.0/16", "fe80::/10"],
    "a multicast": ["224.0.0.0/4", "ff00::/8"],
    "a reserved": ["240.0.0.0/4", "255.255.255.255/32"],
    "a reserved (IPv4-compatible)": ["::/96"],  # deprecated; no route one may trust
}
_PRIVATE = {
    "a loopback": ["127.0.0.0/8", "::1/128"],
    "a private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
    "a carrier-grade NAT": ["100.64.0.0/10"],
    "a unique-local": ["fc00::/7"],
}
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
RESOLVE_TIMEOUT_SECONDS = 5.0
MAX_HOST_LENGTH = 253
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")  # letters, digits, inner hyphens
_AUTHORITY = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://([^/?#]*)")


def _networks(
    groups: dict[str, list[str]],
) -> list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    return [(name, ipaddress.ip_network(net)) for name, nets in groups.items() for net in nets]


# (name, network, whether allow_private opens it)
RANGES = [(name, net, False) for name, net in _networks(_NEVER)] + [
    (name, net, True) for name, net in _networks(_PRIVATE)
]


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
    found = [
        (network.prefixlen, name, private)
        for name, network, private in RANGES
        if inner.version == network.version and inner in network
    ]
    if found:
        _, name, private = max(found)
        return None if private and allow_private else f"{name} address"
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

    @property
    def sni_hostname(self) -> str:
        """The name TLS asks the receiver's certificate for, IDNA-encoded like the Host header."""
        return self.url.raw_host.decode("ascii")


def _written_port(url: str) -> str:
    """The port as the URL spells it ("" if none): httpx reads "+5", " 5" or "5_0" as numbers."""
    match = _AUTHORITY.match(url)
    authority = match.group(1).rpartition("@")[2] if match else ""
    if authority.startswith("["):
        return authority.partition("]")[2].removeprefix(":")
    return authority.partition(":")[2]


def _check_host(host: str) -> None:
    """Refuse a host that is neither an IP address nor a host name (IDNA names encoded)."""
    if "%" in host:  # httpx writes a space as %20
        raise UrlRefused("the host may not contain spaces or percent-encoding")
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    if len(host) > MAX_HOST_LENGTH or not all(_LABEL.fullmatch(x) for x in host.split(".")):
        raise UrlRefused("the host is not a valid host name")


def check_url(url: str, *, allow_private: bool) -> httpx.URL:
    """The parsed URL, without a trailing dot on its host, if its form is acceptable."""
    port = _written_port(url)
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise UrlRefused("the port must be a number from 1 to 65535")
    try:
        parsed = httpx.URL(url)
        parsed.host  # noqa: B018 - decodes IDNA labels, which raises for an invalid one
    except (httpx.InvalidURL, ValueError) as exc:
        raise UrlRefused("not a valid URL") from exc  # httpx's reason quotes the input
    if parsed.scheme == "http" and not allow_private:
        raise UrlRefused("webhook URLs must use https")
    if parsed.scheme not in ("http", "https"):
        raise UrlRefused("webhook URLs must use https")
    if parsed.userinfo:
        raise UrlRefused("the URL may not contain a user name or password")
    written = parsed.raw_host.decode("ascii")
    host = written.removesuffix(".")  # "localhost." is localhost: check what is connected to
    if not host:
        raise UrlRefused("the URL has no host")
    _check_host(host)
    return parsed if host == written else parsed.copy_with(host=host)


async def resolve(url: str, *, allow_private: bool) -> Target:
    """Check the URL, resolve its host once and check every address it resolves to."""
    parsed = check_url(url, allow_private=allow_private)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.raw_host.decode("ascii")  # IDNA-encoded: the name httpx's request would use
    literal = True
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        literal = False
        try:
            async with asyncio.timeout(RESOLVE_TIMEOUT_SECONDS):
                infos = await asyncio.get_running_loop().getaddrinfo(
                    host, port, type=socket.SOCK_STREAM
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
