"""Walk a node's INPUT firewall the way the kernel does, for one packet: a peer's TCP SYN (a new
connection) from a subnet, arriving on an interface, to an ephemeral port, which is where
NCCL's and c10d's listeners are (they bind port 0: src/misc/socket.cc ncclSocketListen).

The kernel (netfilter) tries the rules of a base chain in order; the first whose matches all
hold decides (ACCEPT/accept, DROP/drop, REJECT/reject); a jump walks another chain and comes
back on RETURN or at its end; a goto does not come back; the end of a base chain applies its
policy. In nftables every base chain on the input hook must accept: a drop in any one wins.
A match this module cannot judge (an ipset, a rate limit) is "maybe": the walk goes on as if it
did not match and says that the verdict is not sure.

Not a rule: the registry test skips this module.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass
from typing import Any, Optional

#: Linux's default net.ipv4.ip_local_port_range (Documentation/networking/ip-sysctl.rst).
EPHEMERAL = (32768, 60999)
_TERMINAL = {"ACCEPT": "accept", "DROP": "drop", "REJECT": "drop", "accept": "accept",
             "drop": "drop", "reject": "drop"}
_SERVICES = {"ssh": 22, "http": 80, "https": 443, "domain": 53, "bootpc": 68, "bootps": 67,
             "ntp": 123, "dhcpv6-client": 546, "mdns": 5353}


@dataclass(frozen=True)
class Packet:
    """What is judged: a new TCP connection from ``source`` arriving on ``iface`` for ``dest``."""

    source: Any                 #: ipaddress network of the peers
    iface: str
    dest: Optional[str] = None  #: this node's address on ``iface``
    ports: tuple[int, int] = EPHEMERAL


@dataclass
class Verdict:
    """``accept`` or ``drop``; ``rule`` decided it (``policy DROP`` for a policy); ``sure`` is
    False when a rule that could not be judged might have decided otherwise."""

    action: str
    rule: str
    chain: str
    sure: bool = True
    unknown_chains: tuple[str, ...] = ()


def _tri_not(value: Optional[bool]) -> Optional[bool]:
    return None if value is None else not value


def _net_match(spec: str, pkt: Packet) -> Optional[bool]:
    out: Optional[bool] = False
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        if part.startswith("@") or "-" in part:  # a named set or an address range
            out = None if out is False else out
            continue
        try:
            net = ipaddress.ip_network(part, strict=False)
        except ValueError:
            out = None if out is False else out
            continue
        if net.version != pkt.source.version:
            continue
        if pkt.source.subnet_of(net):
            return True
        if pkt.source.overlaps(net):
            out = None
    return out


def _dest_match(spec: str, pkt: Packet) -> Optional[bool]:
    if not pkt.dest:
        return None
    return _net_match(spec, Packet(ipaddress.ip_network(pkt.dest), pkt.iface))


def _port_match(spec: str, pkt: Packet) -> Optional[bool]:
    """Whether every port of the ephemeral range is in ``spec`` (``22``, ``1000:2000``,
    ``1000-2000``, ``22,80``): True, none of it: False, a part: None."""
    lo, hi = pkt.ports
    covered: list[tuple[int, int]] = []
    for part in spec.replace(" ", "").split(","):
        ends = re.split(r"[:-]", part, maxsplit=1)
        try:
            nums = [int(e) if e else (0 if i == 0 else 65535) for i, e in enumerate(ends)]
        except ValueError:
            if part in _SERVICES:
                nums = [_SERVICES[part]]
            else:
                return None
        a, b = nums[0], nums[-1]
        if a <= lo and b >= hi:
            return True
        if b >= lo and a <= hi:
            covered.append((a, b))
    return None if covered else False


def _iface_match(spec: str, pkt: Packet) -> Optional[bool]:
    names = [n.strip().strip('"') for n in spec.split(",") if n.strip()]
    return any(pkt.iface == n or (n.endswith(("+", "*")) and pkt.iface.startswith(n[:-1]))
               for n in names)


def _states(spec: str) -> bool:
    return "new" in {s.strip().lower() for s in spec.split(",")}


def _ipt_match(opt: str, args: list[str], pkt: Packet) -> Optional[bool]:
    """One iptables match option with its arguments."""
    value = args[0] if args else ""
    if opt in ("-s", "--source", "--src"):
        return _net_match(value, pkt)
    if opt in ("-d", "--destination", "--dst"):
        return _dest_match(value, pkt)
    if opt in ("-i", "--in-interface"):
        return _iface_match(value, pkt)
    if opt in ("-p", "--protocol"):
        return value.lower() in ("tcp", "6", "all", "0")
    if opt in ("--dport", "--destination-port", "--dports", "--destination-ports",
               "--sport", "--source-port", "--sports", "--source-ports"):
        return _port_match(value, pkt)
    if opt in ("--ctstate", "--state"):
        return _states(value)
    if opt == "--syn":
        return True
    if opt == "--tcp-flags":
        return True if len(args) > 1 and "SYN" in args[1] and "ACK" not in args[1] else None
    if opt in ("--icmp-type", "--icmpv6-type", "--ctstatus"):
        return False
    if opt == "--dst-type":
        return value.upper() == "LOCAL" or None
    if opt == "--src-type":
        return value.upper() == "UNICAST"
    if opt == "--pkt-type":
        return value.lower() in ("unicast", "host")
    return None


#: iptables options and how many arguments each takes (the rest take one).
_NO_ARG = {"--syn", "--log-uid", "--log-tcp-sequence", "--log-tcp-options", "--log-ip-options"}
_TWO_ARGS = {"--tcp-flags"}
_IGNORED = {"-m", "--match", "--comment", "--reject-with", "--log-prefix", "--log-level",
            "--set-mark", "--to-ports", "-c", "--set-counters"}


def _ipt_rule(text: str, pkt: Packet) -> tuple[Optional[bool], str, Optional[str]]:
    """(does it match, target kind, target chain) for an iptables rule (``iptables -S`` form
    without ``-A CHAIN``). The kind is accept/drop/return/jump/goto/none."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    matched: Optional[bool] = True
    kind, target = "none", None
    i, negate = 0, False
    while i < len(words):
        word = words[i]
        if word == "!":
            negate, i = True, i + 1
            continue
        if word in ("-j", "--jump", "-g", "--goto") and i + 1 < len(words):
            name = words[i + 1]
            if name in _TERMINAL:
                kind = _TERMINAL[name]
            elif name == "RETURN":
                kind = "return"
            elif name in ("LOG", "NFLOG", "MARK", "CONNMARK", "CT", "TRACE", "AUDIT"):
                kind = "none"
            else:
                kind, target = ("goto" if word in ("-g", "--goto") else "jump"), name
            i += 2
            continue
        if not word.startswith("-"):
            i += 1
            continue
        n = 0 if word in _NO_ARG else 2 if word in _TWO_ARGS else 1
        args = [a for a in words[i + 1:i + 1 + n]]
        if args and args[0] == "!":  # the old "-s ! 10.0.0.0/8" form
            negate, args = True, words[i + 2:i + 2 + n]
            i += 1
        if word not in _IGNORED:
            one = _ipt_match(word, args, pkt)
            one = _tri_not(one) if negate else one
            if one is False:
                matched = False
            elif one is None and matched is True:
                matched = None
        negate = False
        i += 1 + n
    return matched, kind, target


_NFT_SET = re.compile(r"\{([^}]*)\}")


def _nft_rule(text: str, pkt: Packet) -> tuple[Optional[bool], str, Optional[str]]:
    """The same for an nftables rule line (``ip saddr 10.0.0.0/8 tcp dport 22 accept``)."""
    flat = _NFT_SET.sub(lambda m: ",".join(p.strip() for p in m.group(1).split(",")), text)
    try:
        words = shlex.split(flat)
    except ValueError:
        words = flat.split()
    matched: Optional[bool] = True
    kind, target = "none", None

    def hit(one: Optional[bool], negate: bool) -> None:
        nonlocal matched
        one = _tri_not(one) if negate else one
        if one is False:
            matched = False
        elif one is None and matched is True:
            matched = None

    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        negate = False
        j = i + 2
        if j < len(words) and words[j] in ("!=", "=="):
            negate, j = words[j] == "!=", j + 1
        value = words[j] if j < len(words) else ""
        if w in ("accept", "drop", "reject"):
            kind = _TERMINAL[w]
            break
        if w == "return":
            kind = "return"
            break
        if w in ("jump", "goto"):
            kind, target = w, nxt
            break
        if w in ("counter", "log", "comment", "limit", "queue", "notrack", "meter"):
            if w in ("limit", "meter"):
                hit(None, False)
            i += 1
            while i < len(words) and words[i] in ("packets", "bytes", "prefix", "level", "flags",
                                                   "rate", "over", "burst", "group") :
                i += 2
            if w == "comment":
                i += 1
            continue
        if w in ("iif", "iifname"):
            j = i + 1
            negate = j < len(words) and words[j] == "!="
            j += 1 if words[j:j + 1] and words[j] in ("!=", "==") else 0
            hit(_iface_match(words[j] if j < len(words) else "", pkt), negate)
            i = j + 1
            continue
        if w in ("ip6", "icmp", "icmpv6", "udp", "sctp", "udplite", "igmp"):
            hit(False, False)
            i = j + 1
            continue
        if w == "ip" and nxt in ("saddr", "daddr", "protocol"):
            one = (_net_match(value, pkt) if nxt == "saddr" else _dest_match(value, pkt)
                   if nxt == "daddr" else value in ("tcp", "6"))
            hit(one, negate)
            i = j + 1
            continue
        if w in ("tcp", "th") and nxt in ("dport", "sport"):
            hit(_port_match(value, pkt), negate)
            i = j + 1
            continue
        if w == "tcp" and nxt == "flags":
            hit(None, False)
            i += 2
            while i < len(words) and words[i] not in _TERMINAL and words[i] not in (
                    "jump", "goto", "return", "counter", "log"):
                i += 1
            continue
        if w == "meta" and nxt in ("l4proto", "nfproto", "pkttype", "iif", "iifname"):
            one = (value in ("tcp", "6") if nxt == "l4proto" else value in ("ipv4", "ip")
                   if nxt == "nfproto" else value in ("host", "unicast")
                   if nxt == "pkttype" else _iface_match(value, pkt))
            hit(one, negate)
            i = j + 1
            continue
        if w == "ct" and nxt in ("state", "status"):
            hit(_states(value) if nxt == "state" else False, negate)
            i = j + 1
            continue
        if w == "fib" and "type" in words[i:i + 5]:
            k = words.index("type", i)
            hit(words[k + 1] == "local" if k + 1 < len(words) and "daddr" in words[i:k]
                else None, False)
            i = k + 2
            continue
        if w == "with":  # reject with icmpx ...
            break
        hit(None, False)
        i += 1
    return matched, kind, target


def walk(chains: dict[str, list[str]], chain: str, policy: Optional[str], syntax: str,
         pkt: Packet) -> Verdict:
    """The verdict of base ``chain`` (with its ``policy``) for ``pkt``.

    >>> rhel = ["-m state --state RELATED,ESTABLISHED -j ACCEPT", "-p icmp -j ACCEPT",
    ...         "-i lo -j ACCEPT", "-p tcp -m state --state NEW -m tcp --dport 22 -j ACCEPT",
    ...         "-j REJECT --reject-with icmp-host-prohibited"]
    >>> pkt = Packet(ipaddress.ip_network("198.18.0.0/24"), "eth0", "198.18.0.2")
    >>> v = walk({"INPUT": rhel}, "INPUT", "ACCEPT", "iptables", pkt); v.action, v.rule
    ('drop', '-j REJECT --reject-with icmp-host-prohibited')
    >>> walk({"INPUT": ["-s 10.0.0.0/8 -m conntrack --ctstate NEW -j ACCEPT"]}, "INPUT", "DROP",
    ...      "iptables", Packet(ipaddress.ip_network("10.1.0.0/16"), "ib0")).action
    'accept'
    >>> walk({"t/in": ['iif "lo" accept', "tcp dport 22 accept"]}, "t/in", "DROP", "nft",
    ...      pkt).rule
    'policy DROP'
    """
    unsure: list[str] = []
    unknown: list[str] = []
    parse = _nft_rule if syntax == "nft" else _ipt_rule
    table = chain.rsplit("/", 1)[0] + "/" if "/" in chain else ""

    def run(name: str, depth: int) -> Optional[Verdict]:
        if depth > 16:  # a loop; the kernel refuses those, a damaged listing may not
            unknown.append(name)
            return None
        for rule in chains.get(name, []):
            matched, kind, target = parse(rule, pkt)
            if matched is False or kind in ("none",):
                continue
            if matched is None:
                unsure.append(rule)
                continue
            if kind in ("accept", "drop"):
                return Verdict(kind, rule, name)
            if kind == "return":
                return None
            sub = table + str(target)
            if sub not in chains:
                unknown.append(str(target))
                unsure.append(rule)
                continue
            got = run(sub, depth + 1)
            if got is not None:
                return got
            if kind == "goto":
                return None
        return None

    got = run(chain, 0)
    if got is None:
        action = "drop" if str(policy or "ACCEPT").upper() in ("DROP", "REJECT") else "accept"
        got = Verdict(action, f"policy {str(policy or 'ACCEPT').upper()}", chain)
    got.sure = not unsure
    got.unknown_chains = tuple(dict.fromkeys(unknown))
    return got


def bases(fw: dict[str, Any]) -> list[dict[str, Any]]:
    """The base chains on the input hook as the facts give them (``bases``), or, for facts
    written before chains were recorded, INPUT from ``input_policy``/``input_rules``."""
    if fw.get("bases"):
        return list(fw["bases"])
    return [{"chain": "INPUT", "policy": fw.get("input_policy") or "ACCEPT",
             "syntax": "nft" if fw.get("tool") == "nft" else "iptables"}]


def chains_of(fw: dict[str, Any]) -> dict[str, list[str]]:
    """Every chain's rules, keyed as ``bases`` names them."""
    if fw.get("chains"):
        return {str(k): list(v or []) for k, v in fw["chains"].items()}
    return {"INPUT": list(fw.get("input_rules") or [])}
