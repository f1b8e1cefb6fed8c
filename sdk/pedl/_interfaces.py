"""This machine's network interfaces and their addresses (Linux, standard library only).

gloo and NCCL choose the address a rank listens on by interface name (GLOO_SOCKET_IFNAME,
NCCL_SOCKET_IFNAME), not by address, and otherwise by what the hostname resolves to, which on
Debian's and Ubuntu's default /etc/hosts is a loopback address. The agent knows the address other
machines reach it on; this finds the interface that carries it.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from pathlib import Path

_SIOCGIFADDR = 0x8915
_IF_INET6 = Path("/proc/net/if_inet6")


def _ipv4_address(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:  # no IPv4 address on it
            return None
    return socket.inet_ntoa(packed[20:24])


def _ipv6_addresses() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    try:
        lines = _IF_INET6.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if len(fields) >= 6:
            address = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
            out.setdefault(fields[5], []).append(str(address))
    return out


def interface_addresses() -> dict[str, list[str]]:
    """Every interface by name, with its addresses (IPv4 first)."""
    ipv6 = _ipv6_addresses()
    out: dict[str, list[str]] = {}
    for _, name in socket.if_nameindex():
        ipv4 = _ipv4_address(name)
        out[name] = ([ipv4] if ipv4 else []) + ipv6.get(name, [])
    return out


def _canonical(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address.strip("[]").split("%")[0]))
    except ValueError:
        return address


def resolve(host: str) -> list[str]:
    """The IP addresses `host` (a name or an address) stands for; [] when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(_canonical(str(info[4][0])) for info in infos))


def interface_for(address: str, interfaces: dict[str, list[str]] | None = None) -> str | None:
    """The interface carrying `address` (a name resolves first); None when no interface here has it."""
    found = interface_addresses() if interfaces is None else interfaces
    for candidate in resolve(address) or [_canonical(address)]:
        for name, addresses in found.items():
            if candidate in (_canonical(a) for a in addresses):
                return name
    return None


def first_address(interface: str, interfaces: dict[str, list[str]] | None = None) -> str | None:
    """The address a socket bound to `interface` listens on (its IPv4 address where it has one)."""
    found = interface_addresses() if interfaces is None else interfaces
    addresses = found.get(interface) or []
    return addresses[0] if addresses else None


def describe(interfaces: dict[str, list[str]] | None = None) -> str:
    """Like "lo 127.0.0.1, eth0 10.0.0.2": for error messages that list what this machine has."""
    found = interface_addresses() if interfaces is None else interfaces
    return ", ".join(f"{name} {' '.join(addrs) or '(no address)'}" for name, addrs in found.items())
