#!/usr/bin/env python3
"""Compares memarea-bench JSON files row by row (same machine, same lease).

Usage: scripts/bench-compare.py BEFORE.json[,BEFORE2.json...] AFTER.json[,AFTER2.json...]

Rows are matched by (group, variant, raw call) and, where those repeat, by their order. Several
files a side are rounds of the same bench (run before, after, before, after... so that a drift
of the machine falls on both sides): a row's figure is then the median of the rounds' medians,
with the lowest minimum and highest maximum of all rounds, and its target reads "met in k of n
rounds". For each row it prints memarea's figure before and after, the change of the median,
and whether the row's target was met. Rows present on one side only are listed apart. A target
is LOST when it was met in every round before and in none after; the script then exits 1.
"""
import json
import statistics
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


def spread(row):
    """(min, median, max) of memarea's samples in one row, or None."""
    s = row.get("memarea_spread") or {}
    med = s.get("median", row.get("memarea"))
    if med is None:
        return None
    return s.get("min", med), med, s.get("max", med)


def pooled(rows):
    """(min, median of medians, max) over rounds, or None."""
    spreads = [s for s in map(spread, rows) if s]
    if not spreads:
        return None
    return (min(s[0] for s in spreads), statistics.median(s[1] for s in spreads),
            max(s[2] for s in spreads))


def figure(rows):
    p = pooled(rows)
    if p is None:
        return "-"
    unit = rows[0].get("unit", "")
    return f"{p[1]:.4g} ({p[0]:.4g}-{p[2]:.4g}) {unit}".strip()


def change(before, after):
    """After's median against before's, in the direction that is better for the row."""
    b, a = pooled(before), pooled(after)
    if not b or not b[1] or a is None:
        return "-"
    ratio = a[1] / b[1]
    if after[0].get("higher_is_better"):
        ratio = 1 / ratio if ratio else float("inf")
    # ratio > 1: after is slower (takes more time, or moves fewer bytes per second).
    return f"{ratio:.2f}x " + ("slower" if ratio > 1 else "faster" if ratio < 1 else "same")


def met(rows):
    return sum(1 for r in rows if r.get("met"))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    before = [keyed_rows(p) for p in args[0].split(",")]
    after = [keyed_rows(p) for p in args[1].split(",")]
    keys = [k for k in before[0] if all(k in r for r in before + after)]
    print("| group | variant | target | before | after | after vs before | met before -> after |")
    print("|---|---|---|---|---|---|---|")
    lost = 0
    for key in keys:
        b = [r[key] for r in before]
        a = [r[key] for r in after]
        nb, na = met(b), met(a)
        verdict = f"{nb}/{len(b)} -> {na}/{len(a)}"
        if not any(r.get("judged", bool(r.get("target"))) for r in b + a):
            verdict = "-"  # a row shown beside the others, with no target to meet
        elif nb == len(b) and na == 0:
            lost += 1
            verdict += " (LOST)"
        print(f"| {key[0]} | {key[1]} | {a[0].get('target', '') or '-'} | {figure(b)} | "
              f"{figure(a)} | {change(b, a)} | {verdict} |")
    everywhere = set(keys)
    for title, side in (("not in every file before", before), ("not in every file after", after)):
        missing = sorted({k for rows in side for k in rows} - everywhere)
        if missing:
            print(f"\n{title}: " + "; ".join(f"{k[0]} / {k[1]}" for k in missing))
    print(f"\ntargets met in every round before and in none after: {lost}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
