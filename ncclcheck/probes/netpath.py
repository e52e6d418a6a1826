"""netpath: what decides whether a peer's packet reaches this node and its reply gets back.

* ``routes``: every IPv4 route of the main table (``/proc/net/route``), so two routes to one
  subnet through different interfaces (NVIDIA/nccl#1581) can be named;
* ``policy``: the policy-routing rules (``ip -4 rule show``, the kernel's three defaults left
  out) and the routes of every table but main and local (``ip -4 route show table all``), so
  a route out of a routed-L3 rail (a /31 per NIC, a table per NIC) is not missed;
* ``sysctl``: ``rp_filter``, ``arp_ignore`` and ``arp_announce`` for ``all``, ``default`` and
  each interface (``/proc/sys/net/ipv4/conf/<if>/``); the kernel applies the larger of ``all``
  and the interface's ``rp_filter``, and the larger ``arp_ignore`` / ``arp_announce``;
* ``firewall``: the INPUT chain as ``iptables -S`` prints it (``iptables-nft`` shows the
  nftables rules made through it), else the input hooks of ``nft list ruleset``, and whether ufw
  is enabled (``/etc/ufw/ufw.conf``); ``chains`` holds every chain of both listings (ufw's and
  firewalld's included) and ``bases`` the input-hook chains with their policies, which
  net-firewall-blocks-peers walks as the kernel does. ``readable`` is False, with ``why``, when neither tool
  answers (not root, not installed): then nothing is known, which the section's errors say;
* ``resolve``: the addresses ``/etc/hosts`` gives the hostname and ``MASTER_ADDR``;
* ``identity``: the kernel's ``boot_id`` and this process's network namespace
  (``/proc/self/ns/net``), which tell two facts documents from one machine apart by namespace.

Shell equivalent: ``ip route; sysctl net.ipv4.conf; iptables -S; nft list ruleset; getent hosts $(hostname)``.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from ncclcheck.host.protocol import Host
from ncclcheck.probes.network.links import natural_key, parse_int
from ncclcheck.probes.network.routes import parse_routes

SYSCTLS = ("rp_filter", "arp_ignore", "arp_announce")
_NFT_CHAIN = re.compile(r"^\s*chain\s+(\S+)\s*\{")
_NFT_HOOK = re.compile(r"type\s+filter\s+hook\s+input\b.*?policy\s+(\w+)")


def parse_iptables_input(text: Optional[str]) -> tuple[Optional[str], list[str]]:
    """``iptables -S INPUT`` -> (policy, rules as printed, without ``-A INPUT``).

    As node1 of the namespace fleet prints it after ``iptables -P INPUT DROP`` and two rules:

    >>> parse_iptables_input("-P INPUT DROP\\n-A INPUT -i lo -j ACCEPT\\n"
    ...                      "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\\n")
    ('DROP', ['-i lo -j ACCEPT', '-p tcp -m tcp --dport 22 -j ACCEPT'])
    >>> parse_iptables_input("-P INPUT ACCEPT\\n"), parse_iptables_input(None)
    (('ACCEPT', []), (None, []))
    """
    policy, rules = None, []
    for line in (text or "").splitlines():
        fields = line.split()
        if fields[:2] == ["-P", "INPUT"] and len(fields) >= 3:
            policy = fields[2].upper()
        elif fields[:2] == ["-A", "INPUT"]:
            rules.append(" ".join(fields[2:]))
    return policy, rules


def parse_iptables_chains(text: Optional[str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """``iptables -S`` (the whole filter table) -> (policies of the built-in chains, every
    chain's rules), so the rule can follow INPUT's jumps into ufw's or firewalld's chains.

    As Ubuntu's ufw writes it after ``ufw default deny incoming; ufw allow from 10.0.0.0/8``
    (cut):

    >>> text = ("-P INPUT DROP\\n-N ufw-before-input\\n-N ufw-user-input\\n"
    ...         "-A INPUT -j ufw-before-input\\n-A ufw-before-input -i lo -j ACCEPT\\n"
    ...         "-A ufw-before-input -j ufw-user-input\\n"
    ...         "-A ufw-user-input -s 10.0.0.0/8 -j ACCEPT\\n")
    >>> policies, chains = parse_iptables_chains(text)
    >>> policies, chains["ufw-user-input"], sorted(chains)
    ({'INPUT': 'DROP'}, ['-s 10.0.0.0/8 -j ACCEPT'], ['INPUT', 'ufw-before-input', 'ufw-user-input'])
    """
    policies: dict[str, str] = {}
    chains: dict[str, list[str]] = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "-P":
            policies[fields[1]] = fields[2].upper()
            chains.setdefault(fields[1], [])
        elif len(fields) >= 2 and fields[0] == "-N":
            chains.setdefault(fields[1], [])
        elif len(fields) >= 2 and fields[0] == "-A":
            chains.setdefault(fields[1], []).append(line.split(None, 2)[2] if len(fields) > 2 else "")
    return policies, chains


_NFT_TABLE = re.compile(r"^\s*table\s+(\S+)\s+(\S+)\s*\{")


def parse_nft_chains(text: Optional[str]) -> tuple[list[dict[str, str]], dict[str, list[str]]]:
    """``nft list ruleset`` -> (its input-hook base chains with their policies, the rules of
    every chain keyed ``"<family> <table>/<chain>"``), for the rule to walk.

    firewalld's input chain (cut) and the zone chain it jumps to:

    >>> text = ('table inet firewalld {\\n  chain filter_INPUT {\\n'
    ...         '    type filter hook input priority filter + 10; policy accept;\\n'
    ...         '    ct state established,related accept\\n    jump filter_INPUT_ZONES\\n'
    ...         '    reject with icmpx admin-prohibited\\n  }\\n'
    ...         '  chain filter_INPUT_ZONES {\\n    goto filter_IN_public\\n  }\\n}\\n')
    >>> found, chains = parse_nft_chains(text)
    >>> found
    [{'chain': 'inet firewalld/filter_INPUT', 'policy': 'ACCEPT', 'syntax': 'nft'}]
    >>> chains["inet firewalld/filter_INPUT_ZONES"]
    ['goto filter_IN_public']
    """
    found: list[dict[str, str]] = []
    chains: dict[str, list[str]] = {}
    table, chain = "", None
    for line in (text or "").splitlines():
        head = _NFT_TABLE.match(line)
        if head:
            table, chain = f"{head.group(1)} {head.group(2)}", None
            continue
        named = _NFT_CHAIN.match(line)
        if named:
            chain = f"{table}/{named.group(1)}"
            chains[chain] = []
            continue
        if chain is None:
            continue
        hook = _NFT_HOOK.search(line)
        if hook:
            found.append({"chain": chain, "policy": hook.group(1).upper(), "syntax": "nft"})
        elif line.strip() == "}":
            chain = None
        elif line.strip() and not line.strip().startswith("type "):
            chains[chain].append(line.strip())
    return found, chains


def parse_nft_input(text: Optional[str]) -> tuple[Optional[str], list[str]]:
    """The strictest input-hook chain of ``nft list ruleset`` -> (policy, its rule lines).

    Sample (the nftables wiki's simple ruleset for a workstation)::

        table inet filter {
            chain input {
                type filter hook input priority filter; policy drop;
                ct state established,related accept
                iif "lo" accept
                tcp dport 22 accept
            }
        }

    >>> text = ('table inet filter {\\n  chain input {\\n'
    ...         '    type filter hook input priority filter; policy drop;\\n'
    ...         '    ct state established,related accept\\n    iif "lo" accept\\n'
    ...         '    tcp dport 22 accept\\n  }\\n}\\n')
    >>> parse_nft_input(text)
    ('DROP', ['ct state established,related accept', 'iif "lo" accept', 'tcp dport 22 accept'])
    >>> parse_nft_input("table ip nat {\\n}\\n"), parse_nft_input(None)
    ((None, []), (None, []))

    firewalld accepts by policy but ends its input chain with a reject (cut):

    >>> parse_nft_input('table inet firewalld {\\n  chain filter_INPUT {\\n'
    ...                 '    type filter hook input priority filter + 10; policy accept;\\n'
    ...                 '    jump filter_INPUT_ZONES\\n'
    ...                 '    reject with icmpx admin-prohibited\\n  }\\n}\\n')
    ('REJECT', ['jump filter_INPUT_ZONES', 'reject with icmpx admin-prohibited'])
    """
    best: tuple[Optional[str], list[str]] = (None, [])
    chain: Optional[list[str]] = None
    policy = None
    for line in (text or "").splitlines():
        if _NFT_CHAIN.match(line):
            chain, policy = [], None
            continue
        if chain is None:
            continue
        hook = _NFT_HOOK.search(line)
        if hook:
            policy = hook.group(1).upper()
        elif line.strip() == "}":
            last = chain[-1].split()[0] if chain else ""
            if policy == "ACCEPT" and last in ("drop", "reject"):
                policy = last.upper()  # a final catch-all drop/reject decides, not the policy
            if policy and (best[0] is None or policy in ("DROP", "REJECT")):
                best = (policy, chain)
            chain = None
        elif line.strip():
            chain.append(line.strip())
    return best


def parse_ufw_conf(text: Optional[str]) -> Optional[bool]:
    """Whether ``/etc/ufw/ufw.conf`` enables ufw; None without the file.

    >>> parse_ufw_conf("# comment\\nENABLED=yes\\nLOGLEVEL=low\\n"), parse_ufw_conf("ENABLED=no")
    (True, False)
    >>> parse_ufw_conf(None) is None
    True
    """
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ENABLED":
            return value.strip().strip('"').lower() == "yes"
    return False


def parse_hosts(text: Optional[str], name: Optional[str]) -> list[str]:
    """The addresses ``/etc/hosts`` gives ``name`` (any of its names), in file order.

    As the Debian installer writes it (it maps the hostname to 127.0.1.1):

    >>> text = ("127.0.0.1\\tlocalhost\\n127.0.1.1\\tgpu01.lan\\tgpu01\\n# c\\n"
    ...         "::1 localhost ip6-localhost\\n")
    >>> parse_hosts(text, "gpu01"), parse_hosts(text, "GPU01.lan"), parse_hosts(text, "x")
    (['127.0.1.1'], ['127.0.1.1'], [])
    >>> parse_hosts(None, "a"), parse_hosts("10.0.0.1 a", None)
    ([], [])
    """
    if not name:
        return []
    out = []
    for line in (text or "").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and name.lower() in (f.lower() for f in fields[1:]):
            out.append(fields[0])
    return out


_DEFAULT_RULES = ("from all lookup local", "from all lookup main", "from all lookup default")


def parse_ip_rules(text: Optional[str]) -> list[str]:
    """``ip -4 rule show`` -> the policy-routing rules other than the kernel's three defaults.

    As a routed-L3 RoCE node prints it (one table per rail, chosen by source address):

    >>> parse_ip_rules("0:\\tfrom all lookup local\\n100:\\tfrom 10.1.0.1 lookup rail0\\n"
    ...                "32766:\\tfrom all lookup main\\n32767:\\tfrom all lookup default\\n")
    ['from 10.1.0.1 lookup rail0']
    """
    out = []
    for line in (text or "").splitlines():
        rule = " ".join(line.partition(":")[2].split())
        if rule and rule not in _DEFAULT_RULES:
            out.append(rule)
    return out


def parse_table_routes(text: Optional[str]) -> list[dict[str, Any]]:
    """``ip -4 route show table all`` -> the routes of tables other than main and local
    (``/proc/net/route`` holds main): destination, gateway, interface, table.

    >>> parse_table_routes("default via 10.1.0.0 dev eth1 table rail0 onlink\\n"
    ...                    "10.1.0.0/31 dev eth1 table rail0 proto kernel scope link src 10.1.0.1\\n"
    ...                    "10.0.0.0/24 dev eth0 proto kernel scope link src 10.0.0.5\\n"
    ...                    "local 10.1.0.1 dev eth1 table local proto kernel scope host\\n")
    [{'destination': '0.0.0.0/0', 'gateway': '10.1.0.0', 'interface': 'eth1', 'table': 'rail0'}, {'destination': '10.1.0.0/31', 'gateway': None, 'interface': 'eth1', 'table': 'rail0'}]
    """
    out = []
    for line in (text or "").splitlines():
        words = line.split()
        if not words or words[0] in ("local", "broadcast", "anycast", "multicast", "unreachable",
                                     "prohibit", "blackhole", "throw", "nat"):
            continue
        keyed = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w in ("via", "dev", "table")}
        table = keyed.get("table", "main")
        if table in ("main", "local", "254", "255"):
            continue
        dest = "0.0.0.0/0" if words[0] == "default" else words[0]
        out.append({"destination": dest, "gateway": keyed.get("via"),
                    "interface": keyed.get("dev"), "table": table})
    return out


def _policy(host: Host) -> dict[str, Any]:
    rules = host.run(["ip", "-4", "rule", "show"])
    routes = host.run(["ip", "-4", "route", "show", "table", "all"])
    if not (rules.ok and routes.ok):
        return {"readable": False, "rules": [], "routes": [],
                "why": rules.why_failed() if not rules.ok else routes.why_failed()}
    return {"readable": True, "rules": parse_ip_rules(rules.stdout),
            "routes": parse_table_routes(routes.stdout), "why": None}


def _sysctls(host: Host) -> dict[str, dict[str, Optional[int]]]:
    base = "proc/sys/net/ipv4/conf"
    names = sorted(host.listdir(base), key=lambda n: (n not in ("all", "default"), natural_key(n)))
    return {n: {k: parse_int(host.read(f"{base}/{n}/{k}")) for k in SYSCTLS} for n in names}


def _walkable(ipt: Any, nft: Any) -> dict[str, Any]:
    """Every chain the rule may walk and the input-hook base chains, from both tools: iptables'
    filter table (legacy or iptables-nft) and the native nftables tables; the tables
    iptables-nft writes (``ip filter``, ``ip6 filter``) are taken from iptables' listing."""
    chains: dict[str, list[str]] = {}
    found: list[dict[str, str]] = []
    if ipt.ok:
        policies, chains = parse_iptables_chains(ipt.stdout)
        found.append({"chain": "INPUT", "policy": policies.get("INPUT", "ACCEPT"),
                      "syntax": "iptables"})
    if nft.ok:
        nft_bases, nft_chains = parse_nft_chains(nft.stdout)
        skip = ("ip filter/", "ip6 filter/") if ipt.ok else ()
        chains.update({k: v for k, v in nft_chains.items() if not k.startswith(skip)})
        found += [b for b in nft_bases if not b["chain"].startswith(skip + ("ip6 ",))]
    return {"chains": chains, "bases": found}


def _firewall(host: Host, errors: list[str]) -> dict[str, Any]:
    ufw = parse_ufw_conf(host.read("etc/ufw/ufw.conf"))
    ipt = host.run(["iptables", "-S"])
    nft = host.run(["nft", "list", "ruleset"])
    walkable = _walkable(ipt, nft)
    span = (host.read("proc/sys/net/ipv4/ip_local_port_range") or "").split()
    walkable["local_port_range"] = [int(p) for p in span[:2]] if len(span) >= 2 and all(
        p.isdigit() for p in span[:2]) else None
    found = None
    if ipt.ok:
        policy, rules = parse_iptables_input(ipt.stdout)
        found = {"readable": True, "tool": "iptables", "input_policy": policy,
                 "input_rules": rules, "ufw_active": ufw, "why": None, **walkable}
        if policy in ("DROP", "REJECT"):
            return found
    # native nftables tables (inet filter) do not show in `iptables -S`
    if nft.ok:
        policy, rules = parse_nft_input(nft.stdout)
        if policy or found is None:
            return {"readable": True, "tool": "nft", "input_policy": policy or "ACCEPT",
                    "input_rules": rules, "ufw_active": ufw, "why": None, **walkable}
    if found:
        return found
    why = f"{ipt.why_failed()}; {nft.why_failed()}"
    errors.append(f"firewall ruleset not readable ({why}): whether peers may connect is unknown")
    return {"readable": False, "tool": None, "input_policy": None, "input_rules": [],
            "ufw_active": ufw, "why": why}


def collect(host: Host, errors: list[str]) -> dict[str, Any]:
    """Routes, sysctls, firewall, name resolution and identity (see the module docstring)."""
    hostname = (host.read("proc/sys/kernel/hostname") or "").strip() or None
    hosts_text = host.read("etc/hosts")
    master = host.environ().get("MASTER_ADDR") or None
    netns = host.readlink("proc/self/ns/net")
    return {
        "routes": parse_routes(host.read("proc/net/route")),
        "policy": _policy(host),
        "sysctl": _sysctls(host),
        "firewall": _firewall(host, errors),
        "resolve": {"source": "/etc/hosts" if hosts_text is not None else None,
                    "hostname": hostname, "hostname_addrs": parse_hosts(hosts_text, hostname),
                    "master_addr": master,
                    "master_addrs": parse_hosts(hosts_text, master) if master else []},
        "identity": {"boot_id": (host.read("proc/sys/kernel/random/boot_id") or "").strip() or None,
                     "netns": netns.rsplit("/", 1)[-1] if netns else None},
    }
