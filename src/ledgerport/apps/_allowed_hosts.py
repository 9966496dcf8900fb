"""The hosts a hosted function may fetch from: its ``allowedHosts`` (contract.md, third round).

Each entry is a host name written exactly (``api.example.com``), a wildcard for every name
under a domain (``*.example.com``: ``a.example.com`` and ``a.b.example.com``, not
``example.com`` itself), or an IP address literal (``203.0.113.7``, ``2001:db8::1``, with or
without brackets). Names are ASCII (an internationalised name in its ``xn--`` form) and kept in
lower case; a wildcard's domain has at least two labels, so no entry opens a whole top-level
domain. The list says where a request may go; whether the address a name resolves to may be
reached is the engine's connect-time check, as for webhooks.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from ledgerport import catalog

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_NAME_MAX = 253


def normal_host(host: str) -> str | None:
    """``host`` as an entry of ``allowedHosts`` or a URL's host is compared: a name in lower
    case, an address as ``ipaddress`` writes it; None when it is neither."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    text = text.removesuffix(".")
    if len(text) > _NAME_MAX or not _NAME.match(text):
        return None
    return text


def allowed_hosts_problems(hosts: Sequence[str]) -> list[str]:
    """What is wrong with ``hosts`` as a function's ``allowedHosts``."""
    problems = []
    if len(hosts) > catalog.FUNCTION_ALLOWED_HOSTS_MAX:
        problems.append(
            f"allowedHosts must list at most {catalog.FUNCTION_ALLOWED_HOSTS_MAX} host names"
        )
    for index, entry in enumerate(hosts):
        if entry.startswith("*."):
            domain = normal_host(entry[2:])
            if domain is None or "." not in domain or _is_address(domain):
                problems.append(
                    f"allowedHosts[{index}] must be a host name, an IP address, or *. and a"
                    " domain of at least two labels"
                )
        elif normal_host(entry) is None:
            problems.append(
                f"allowedHosts[{index}] must be a host name, an IP address, or *. and a domain"
            )
    if not problems and len(set(normal_allowed_hosts(hosts))) != len(hosts):
        problems.append("allowedHosts must list each host once")
    return problems


def normal_allowed_hosts(hosts: Sequence[str]) -> tuple[str, ...]:
    """Entries already checked (:func:`allowed_hosts_problems`), as they are kept."""
    kept = []
    for entry in hosts:
        if entry.startswith("*."):
            kept.append("*." + (normal_host(entry[2:]) or ""))
        else:
            kept.append(normal_host(entry) or "")
    return tuple(kept)


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether ``host`` (a URL's host, in any case) is one ``allowed`` lists."""
    name = normal_host(host)
    if name is None:
        return False
    for entry in allowed:
        if entry.startswith("*."):
            if name.endswith(entry[1:]) and not _is_address(name):
                return True
        elif name == entry:
            return True
    return False


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
