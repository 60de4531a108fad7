#!/usr/bin/env python3
"""Compares two memarea-bench JSON files row by row (same machine, same lease).

Usage: scripts/bench-compare.py BEFORE.json AFTER.json [--markdown]

Rows are matched by (group, variant, raw call) and, where those repeat, by their order. For each
row it prints memarea's median with its min-max range before and after, the change of the
median, and whether the row's target was met before and after. Rows present on one side only
are listed apart. Exits 1 when a target met before is missed after, 0 otherwise.
"""
import json
import sys
from collections import defaultdict


def keyed_rows(path):
    """The file's rows by (group, variant, raw_call, occurrence)."""
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)["rows"]
    seen = defaultdict(int)
    out = {}
    for r in rows:
        base = (r.get("group", ""), r.get("variant", ""), r.get("raw_call", ""))
        out[base + (seen[base],)] = r
        seen[base] += 1
    return out


def figure(row):
    s = row.get("memarea_spread") or {}
    med = s.get("median", row.get("memarea"))
    if med is None:
        return "-"
    lo, hi = s.get("min", med), s.get("max", med)
    return f"{med:.4g} ({lo:.4g}-{hi:.4g}) {row.get('unit', '')}".strip()


def change(before, after):
    """After's median against before's, in the direction that is better for the row."""
    b = (before.get("memarea_spread") or {}).get("median", before.get("memarea"))
    a = (after.get("memarea_spread") or {}).get("median", after.get("memarea"))
    if not b or a is None:
        return "-"
    ratio = a / b
    if after.get("higher_is_better"):
        ratio = 1 / ratio if ratio else float("inf")
    # ratio > 1: after is slower (takes more time, or moves fewer bytes per second).
    return f"{ratio:.2f}x " + ("slower" if ratio > 1 else "faster" if ratio < 1 else "same")


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    before, after = keyed_rows(args[0]), keyed_rows(args[1])
    print("| group | variant | target | before | after | after vs before | met before -> after |")
    print("|---|---|---|---|---|---|---|")
    regressions = 0
    for key in [k for k in before if k in after]:
        b, a = before[key], after[key]
        met = f"{'yes' if b.get('met') else 'no'} -> {'yes' if a.get('met') else 'no'}"
        if b.get("met") and not a.get("met"):
            regressions += 1
            met += " (LOST)"
        print(f"| {key[0]} | {key[1]} | {a.get('target', '') or '-'} | {figure(b)} | "
              f"{figure(a)} | {change(b, a)} | {met} |")
    only_before = [k for k in before if k not in after]
    only_after = [k for k in after if k not in before]
    for title, keys in (("only before", only_before), ("only after", only_after)):
        if keys:
            print(f"\n{title}: " + "; ".join(f"{k[0]} / {k[1]}" for k in keys))
    print(f"\ntargets met before and missed after: {regressions}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
