"""Greedy schedule of the sm90 backward's launch orders (the model of tests/compile/sm90's grouped-grid-order test):
CTAs taken in launch order by 132 SMs. Pairs form groups of G (the leftover first), ranks first inside a group."""
import heapq


def order(n_kv, pairs, G):
    """(pair, rank) in launch order."""
    groups, start = [], 0
    rem = pairs % G if G > 1 else 0
    if rem:
        groups.append(list(range(rem)))
        start = rem
    while start < pairs:
        groups.append(list(range(start, min(pairs, start + G))))
        start += G
    return [(p, r) for g in groups for r in range(n_kv) for p in g]


def makespan(seq, dur, ctas=132):
    free = [0.0] * ctas
    end = 0.0
    for x in seq:
        f = heapq.heappop(free) + dur(x)
        heapq.heappush(free, f)
        end = max(end, f)
    return end


if __name__ == "__main__":
    n = 64
    for G in (1, 2, 4, 8, 16, 32):
        asc = makespan(order(n, 32, G), lambda x: (n - x[1]) + 1)
        desc = makespan(order(n, 32, G), lambda x: (x[1] + 1) + 1)
        print(G, "ascending", asc, "descending", desc)
    print("bound", 32 * sum(n - j + 1 for j in range(n)) / 132)
