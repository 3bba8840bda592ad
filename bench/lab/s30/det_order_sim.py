"""Session 30: the ordered (deterministic) backward's launch orders in a tick model with the waits: 64-row query-tile
steps, causal B=2 H=16 S=8192 (64 kv tiles x 32 pairs), 132 SMs; kv tile j adds into query tile i after kv tile j + 1.
Descending launch (today) vs ascending, per launch-group size. Finding: ascending saves 1-2 % (1083-1088 vs 1099
ticks), because later groups start one kv step apart, which cancels the walk offset and serializes the arrivals; and it
deadlocks where a group exceeds the SMs. Not pursued."""
from grid_order_model import order


def sim(n_kv, pairs, G, ascending, slots=132, waits=True):
    seq = order(n_kv, pairs, G)
    nq = 2 * n_kv
    done = {}  # (pair, kv, query tile) -> tick of its add
    running = []  # [pair, kv, next query tile]
    idx, t, finished = 0, 0, 0
    while finished < len(seq):
        while len(running) < slots and idx < len(seq):
            p, r = seq[idx]
            kv = r if ascending else n_kv - 1 - r
            running.append([p, kv, 2 * kv])
            idx += 1
        t += 1
        kept, progressed = [], False
        for c in running:
            p, kv, q = c
            if q >= nq:  # the epilogue tick
                finished += 1
                progressed = True
                continue
            if not waits or kv + 1 > q // 2 or done.get((p, kv + 1, q), 1e9) < t:
                done[(p, kv, q)] = t
                c[2] += 1
                progressed = True
            kept.append(c)
        running = kept
        if not progressed:
            return ("deadlock", t)
    return t


if __name__ == "__main__":
    for G in (1, 2, 4):
        print(G, "ascending", sim(64, 32, G, True), "descending", sim(64, 32, G, False))
    for G in (1, 2):
        print(G, "without waits: ascending", sim(64, 32, G, True, waits=False), "descending",
              sim(64, 32, G, False, waits=False))
    print("ascending, groups of 2, 100 slots:", sim(64, 32, 2, True, slots=100))
