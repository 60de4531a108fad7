#!/usr/bin/env python3
"""Checks memarea topo's link labels against `nvidia-smi topo -m`, pair by pair.

Usage:
  scripts/check-topo-links.py [--json TOPO.json | --memarea BIN] [--smi SMI.txt]
                              [--map MAP.csv]
TOPO.json is the output of `memarea topo --json` (without --json the script runs
`BIN topo --json --reps 1`, BIN by default out/gpu-bin/memarea). SMI.txt is the output of
`nvidia-smi topo -m` (by default the script runs it). MAP.csv is the output of
`nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader` (by default the script runs it
when it runs nvidia-smi itself; with a stored SMI.txt and no map, GPU i of nvidia-smi is
device i of memarea). nvidia-smi numbers GPUs in PCI order and CUDA may not, so pairs are
matched by PCI bus id.

It also checks the all-pairs window where the JSON has one: each device's peer capacity is a
positive figure or unknown (null), never 0, and no device's egress or ingress is ABOVE it.

Exit status: 0 when every pair's label matches and the capacities hold; 1 naming every pair that
differs (NV# against NV#, PIX/PXB/PHB/NODE/SYS) and every capacity problem; 2 when the inputs
cannot be read. Python 3 standard library only.
"""
import argparse
import json
import re
import subprocess
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
GPU = re.compile(r"^GPU(\d+)$")


def parse_matrix(text):
    """The GPU-to-GPU labels of `nvidia-smi topo -m`: a list of rows, "X" on the diagonal."""
    header = None
    rows = {}
    for raw in text.splitlines():
        line = ANSI.sub("", raw).rstrip()
        tokens = line.split()
        if not tokens:
            continue
        if header is None:
            # The header is the first line that starts blank and names GPUs (rows start with
            # their GPU's name).
            if line[:1].isspace() and GPU.match(tokens[0]):
                header = [t for t in tokens if GPU.match(t)]
            continue
        m = GPU.match(tokens[0])
        if not m:
            if rows and tokens[0].startswith("Legend"):
                break
            continue
        cells = tokens[1:1 + len(header)]
        if len(cells) < len(header):
            raise ValueError(f"row {tokens[0]} has {len(cells)} GPU columns, not {len(header)}")
        rows[int(m.group(1))] = cells
    if header is None:
        raise ValueError("no GPU header line in the nvidia-smi topo -m output")
    n = len(header)
    if sorted(rows) != list(range(n)):
        raise ValueError(f"GPU rows {sorted(rows)} do not match the {n} GPU columns")
    return [rows[i] for i in range(n)]


def pci_key(bus_id):
    """A PCI bus id as (domain, bus, device, function), whatever its padding and case."""
    m = re.match(r"^\s*([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)\s*$",
                 bus_id)
    if not m:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    return tuple(int(g, 16) for g in m.groups())


def parse_map(text):
    """nvidia-smi index -> PCI key, from `--query-gpu=index,pci.bus_id --format=csv,noheader`."""
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        index, bus = [f.strip() for f in line.split(",", 1)]
        out[int(index)] = pci_key(bus)
    return out


def compare(smi, topo, smi_map=None):
    """Every pair whose labels differ: a list of (a, b, memarea's label, nvidia-smi's label),
    in memarea's ordinals."""
    link = topo["link"]
    n = len(link)
    if smi_map:
        by_pci = {key: i for i, key in smi_map.items()}
        to_smi = []
        for d in topo["devices"]:
            key = pci_key(d["pci_bus_id"])
            if key not in by_pci:
                raise ValueError(f"device {d['ordinal']} ({d['pci_bus_id']}) is not in nvidia-smi's list")
            to_smi.append(by_pci[key])
    else:
        if n > len(smi):
            raise ValueError(f"memarea has {n} devices, nvidia-smi {len(smi)}")
        to_smi = list(range(n))
    bad = []
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            ours, theirs = link[a][b], smi[to_smi[a]][to_smi[b]]
            if ours != theirs:
                bad.append((a, b, ours, theirs))
    return bad


def capacity_problems(topo):
    """What is wrong with the all-pairs window's capacities: a device's peer capacity of 0 where
    there are peers (a link whose speed is unknown must make it null, not 0), and any egress or
    ingress verdict ABOVE the capacity. Empty when the JSON has no all-pairs window."""
    problems = []
    caps = topo.get("peer_capacity_gbps") or []
    for d, cap in enumerate(caps if len(caps) > 1 else []):  # one GPU has no peer to reach
        if cap is not None and cap <= 0:
            problems.append(f"device {d}: peer capacity {cap} GB/s (unknown must be null)")
    for dev in (topo.get("all_pairs") or {}).get("devices", []):
        for side in ("egress", "ingress"):
            v = dev.get(f"{side}_verdict") or ""
            if v.startswith("ABOVE"):
                problems.append(f"device {dev.get('device')}: {side} {v}")
    return problems


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="memarea topo --json output")
    p.add_argument("--memarea", default="out/gpu-bin/memarea", help="memarea binary to run")
    p.add_argument("--smi", help="stored nvidia-smi topo -m output")
    p.add_argument("--map", help="stored nvidia-smi --query-gpu=index,pci.bus_id output")
    args = p.parse_args(argv)
    try:
        if args.smi:
            smi_text = open(args.smi).read()
            map_text = open(args.map).read() if args.map else None
        else:
            smi_text = subprocess.run(["nvidia-smi", "topo", "-m"], check=True,
                                      capture_output=True, text=True).stdout
            map_text = subprocess.run(["nvidia-smi", "--query-gpu=index,pci.bus_id",
                                       "--format=csv,noheader"], check=True,
                                      capture_output=True, text=True).stdout
        if args.json:
            topo = json.load(open(args.json))
        else:
            out = subprocess.run([args.memarea, "topo", "--json", "--reps", "1"], check=True,
                                 capture_output=True, text=True).stdout
            topo = json.loads(out)
        smi = parse_matrix(smi_text)
        bad = compare(smi, topo, parse_map(map_text) if map_text else None)
    except (OSError, ValueError, KeyError, subprocess.CalledProcessError) as e:
        print(f"check-topo-links: cannot compare: {e}", file=sys.stderr)
        return 2
    n = len(topo["link"])
    for a, b, ours, theirs in bad:
        print(f"MISMATCH {a} -> {b}: memarea topo says {ours!r}, nvidia-smi topo -m says "
              f"{theirs!r}")
    problems = capacity_problems(topo)
    for line in problems:
        print(f"CAPACITY {line}")
    if bad:
        print(f"check-topo-links: {len(bad)} of {n * (n - 1)} pairs differ")
    else:
        print(f"check-topo-links: all {n * (n - 1)} ordered pairs match nvidia-smi topo -m")
    if problems:
        print(f"check-topo-links: {len(problems)} capacity problem(s)")
    return 1 if bad or problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
