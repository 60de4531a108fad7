#!/usr/bin/env python3
"""A model of the pool's arena (src/core/pool_state.hpp) replaying REFERENCE.md's mixed trace
and five more traces of its kind (other seeds), to compare fit policies by the peak reserved
against the peak live bytes (issue 13's <= 1.2x).

What it models: 256-byte rounding; blocks of max(n, 2 MiB, reserved / 32) rounded up to 2 MiB,
never adjacent (each block is its own driver allocation, so spans never merge across blocks);
two-level segregated free lists (2**ksub classes per power of two, a stack per class), a search
of the first 8 spans of n's own class (the first that fits, or the tightest of them), then the
head of the first non-empty class whose every span fits; a split keeps the piece at the span's
start; a free merges with free neighbours. What it leaves out: the threads' caches (they hold
at most 4 MiB and are flushed into the arena before a block is added) and stream tags (the
trace uses one stream).

Run: python3 bench/experiments/pool_fit_model.py   (about 10 s)
Seen 2026-11-27: 8 classes, first fit (the pool before): peaks 1.113-1.229x, mean 1.170;
16 classes, tightest of 8 (the pool since): 1.113-1.199x, mean 1.151. Exact best fit over all
spans: 1.140-1.199x. A growth of reserved / 64 instead of / 32: 1.136-1.194x with 40% more
driver allocations. Blocks in one address range (merging across blocks): 1.140-1.190x.
"""

MASK = (1 << 64) - 1
MiB = 1 << 20


def mixed_trace(seed=0x5EED2024):
    """REFERENCE.md's trace: sizes > 0 allocate, -(index + 1) frees live[index]."""
    x = seed

    def nxt():
        nonlocal x
        x = (x + 0x9E3779B97F4A7C15) & MASK
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    ops, live, reached = [], 0, False
    for _ in range(100000):
        if live == 0:
            alloc = True
        elif live == 1000:
            alloc = False
        elif not reached:
            alloc = True
        else:
            alloc = (nxt() >> 63) == 1
        if alloc:
            u = (nxt() >> 11) * 2.0 ** -53
            ops.append(max(256, min(int(256 * 2 ** (14 * u)), (4 << 20) - 1)))
            live += 1
            reached = reached or live == 1000
        else:
            ops.append(-(nxt() % live + 1))
            live -= 1
    return ops


def checksum(ops):
    h = 0
    for op in ops:
        h = ((h * 1099511628211) & MASK) ^ (op & MASK)
    return h


class Span:
    __slots__ = ("start", "size", "free", "prev", "next")

    def __init__(self, start, size):
        self.start, self.size, self.free, self.prev, self.next = start, size, True, None, None


class Arena:
    def __init__(self, ksub=3, tightest=False, growth_div=32, align=256):
        self.ksub, self.tightest, self.div, self.align = ksub, tightest, growth_div, align
        self.lists = {}  # class -> stack (the head is the last element)
        self.reserved = self.peak_reserved = self.blocks = 0
        self.next_base = 1 << 40

    def insert_class(self, n):
        fl = n.bit_length() - 1
        return (fl << self.ksub) | ((n >> (fl - self.ksub)) & ((1 << self.ksub) - 1))

    def search_class(self, n):
        fl = n.bit_length() - 1
        return self.insert_class(n + (1 << (fl - self.ksub)) - 1)

    def push(self, s):
        s.free = True
        self.lists.setdefault(self.insert_class(s.size), []).append(s)

    def remove(self, s):
        self.lists[self.insert_class(s.size)].remove(s)

    def find_fit(self, n):
        best = None
        for s in reversed(self.lists.get(self.insert_class(n), [])[-8:]):
            if s.size >= n:
                if not self.tightest or s.size == n:
                    return s
                if best is None or s.size < best.size:
                    best = s
        if best:
            return best
        c = self.search_class(n)
        fits = [k for k, v in self.lists.items() if k >= c and v]
        return self.lists[min(fits)][-1] if fits else None

    def alloc(self, size):
        n = -(-size // self.align) * self.align
        s = self.find_fit(n)
        if s is None:
            want = max(n, 2 * MiB, min(self.reserved // self.div, 1 << 30))
            want = -(-want // (2 * MiB)) * (2 * MiB)
            self.push(Span(self.next_base, want))
            self.next_base += want + (1 << 30)  # blocks never adjacent
            self.reserved += want
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            self.blocks += 1
            s = self.find_fit(n)
        self.remove(s)
        if s.size - n >= self.align:
            rest = Span(s.start + n, s.size - n)
            rest.prev, rest.next = s, s.next
            if s.next:
                s.next.prev = rest
            s.next, s.size = rest, n
            self.push(rest)
        s.free = False
        return s

    def free(self, s):
        if s.next and s.next.free:
            nx = s.next
            self.remove(nx)
            s.size += nx.size
            s.next = nx.next
            if s.next:
                s.next.prev = s
        if s.prev and s.prev.free:
            p = s.prev
            self.remove(p)
            p.size += s.size
            p.next = s.next
            if p.next:
                p.next.prev = p
            s = p
        self.push(s)


def replay(ops, **policy):
    arena, live, live_bytes, peak_live = Arena(**policy), [], 0, 0
    for op in ops:
        if op > 0:
            live.append((arena.alloc(op), op))
            live_bytes += op
            peak_live = max(peak_live, live_bytes)
        else:
            k = -op - 1
            span, n = live[k]
            arena.free(span)
            live_bytes -= n
            live[k] = live[-1]
            live.pop()
    return arena.peak_reserved / peak_live, arena.blocks


if __name__ == "__main__":
    reference = mixed_trace()
    assert checksum(reference) == 0x01CE674ECF3A0693, "not REFERENCE.md's trace"
    traces = [reference] + [mixed_trace(0x5EED2024 + i) for i in range(1, 6)]
    for name, policy in [("8 classes, first fit (before)", dict()),
                         ("16 classes, tightest of 8 (now)", dict(ksub=4, tightest=True)),
                         ("8 classes, growth / 64", dict(growth_div=64))]:
        got = [replay(t, **policy) for t in traces]
        ratios = [r for r, _ in got]
        print(f"{name:34s}", " ".join(f"{r:.3f}x/{b}" for r, b in got),
              f"mean {sum(ratios) / len(ratios):.3f}x max {max(ratios):.3f}x")
