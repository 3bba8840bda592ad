"""The sm90 backward's launch tail in a greedy list-schedule model (session 34): B=2 H=16 S=8192, 2048 CTAs (64
kv tiles x 32 heads) on 132 SMs, a CTA's time = its walk (64-row query tiles, from bench_cases' masks) + c steps of
fixed cost, dispatched in the kernel's grouped order (sm90_bwd_grid_tile: groups of G heads, kv tile j of each head
of the group, j ascending; the bench's D=128 shapes take G = 2). Compares that order with one that defers the CTAs
whose walk is below k x the mean walk to the end of the launch (in the same order among them): document masks
(walks 2..46 in no monotone order) lose ~8 % to the tail in the natural order and ~2-3 % with the deferral; causal
(walks descending, already longest first) and sliding windows (even walks) gain nothing. Usage: python3
bench/lab/s34/bwd_tail_model.py (from the repo root)."""
import heapq
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import bench_cases as bc  # noqa: E402

S, PAIRS, SMS, NQ, NKV = 8192, 32, 132, 8192 // 64, 8192 // 128


def makespan(w, order, c):
    heap = [0.0] * SMS
    for _, t in order:
        s = heapq.heappop(heap)
        heapq.heappush(heap, s + w[t] + c)
    return max(heap)


def main():
    ids = bc.doc_ids(S)
    start = {}
    for i, d in enumerate(ids):
        start.setdefault(d, i)
    end = {d: i for i, d in enumerate(ids)}

    def doc_walk(j):  # exact: some (q, kv) of the tile pair in one document with q >= kv
        kv0, kv1, n = j * 128, j * 128 + 127, 0
        for qt in range(NQ):
            q0, q1 = qt * 64, qt * 64 + 63
            n += any(max(q0, start[d]) <= min(q1, end[d]) and min(q1, end[d]) >= max(kv0, start[d])
                     for d in set(ids[kv0:kv1 + 1]))
        return n

    masks = {"document": [doc_walk(j) for j in range(NKV)],
             "causal": [NQ - 2 * j for j in range(NKV)],
             "sliding1024": [min(NQ - 2 * j, 18) for j in range(NKV)]}
    for name, w in masks.items():
        for G in (2, 4):
            for c in (2.0, 4.0):
                nat = [(g * G + p, j) for g in range(PAIRS // G) for j in range(NKV) for p in range(G)]
                mean = sum(w[j] for _, j in nat) / len(nat)
                bound = sum(w[j] + c for _, j in nat) / SMS
                cols = []
                for k in (0.25, 0.5):
                    head = [x for x in nat if w[x[1]] >= k * mean]
                    tail = [x for x in nat if w[x[1]] < k * mean]
                    cols.append(f"defer < {k} mean: {makespan(w, head + tail, c):.0f} ({len(tail)} CTAs)")
                print(f"{name:12s} G={G} c={c}: natural {makespan(w, nat, c):.0f}, bound {bound:.0f}; " + ", ".join(cols))


if __name__ == "__main__":
    main()
