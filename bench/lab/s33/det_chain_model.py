"""Session 33: the ordered (deterministic) backward as a timeline model of the dQ chains, to compare add orders.
Causal (or document) B*H pairs of n_kv 128-row kv tiles, 64-row query-tile steps of T = 1, 132 SMs, greedy dispatch in
launch order. Per CTA: consumers compute a query tile in T, then hand its dQ to one of two writer warps (alternating
tiles, two smem buffers); a writer waits for the previous add of that query tile in the order (its release plus an
acquire latency a), issues the reduction (buffer free after r), and releases the tile after the completion wait c.
Schemes:
  today:   adds in descending kv order, launch descending (shortest first for causal), walk ascending;
  flipped: adds in ascending kv order, launch ascending (longest first), walk descending (each CTA reaches a query tile
           at the same offset from its start, so a CTA's predecessors are the CTAs dispatched before it);
  default: no order (the default mode's launch, ascending; no waits, no completion wait).
Prints the makespan per scheme and its overhead over default."""
import heapq
import sys


def walks(n_kv, mask):
    """q tiles (64-row) of kv tile j, ascending."""
    out = []
    for j in range(n_kv):
        if mask == "causal":
            out.append(list(range(2 * j, 2 * n_kv)))
        else:  # document of `mask` kv tiles
            d = int(mask)
            end = (j // d + 1) * d
            out.append(list(range(2 * j, 2 * end)))
    return out


def launch(n_kv, pairs, G, ascending):
    seq = []
    for g0 in range(0, pairs, G):
        grp = range(g0, min(pairs, g0 + G))
        for r in range(n_kv):
            for p in grp:
                seq.append((p, r if ascending else n_kv - 1 - r))
    return seq


def sim(n_kv, pairs, G, scheme, mask="causal", slots=132, a=0.25, r=0.15, c=0.3, pro=1.0, epi=1.0):
    W = walks(n_kv, mask)
    seq = launch(n_kv, pairs, G, scheme != "today")
    free = [0.0] * slots
    heapq.heapify(free)
    rel = {}  # (pair, kv, q) -> release time of that add
    end_all = 0.0
    for p, j in seq:
        s = heapq.heappop(free)
        walk = W[j] if scheme != "flipped" else W[j][::-1]
        t = s + pro
        C, F, E = [], [], []
        for k, q in enumerate(walk):
            ready = max(t, F[k - 2] if k >= 2 else 0.0)
            ck = ready + 1.0
            t = ck
            if scheme == "default":
                ak = max(ck, E[k - 2] if k >= 2 else 0.0)
                fk = ak + r
                ek = fk
            else:
                pred = j + 1 if scheme == "today" else j - 1
                pr = rel.get((p, pred, q))
                need = pr + a if pr is not None else 0.0
                ak = max(ck, E[k - 2] if k >= 2 else 0.0, need)
                fk = ak + r
                ek = fk + c
                rel[(p, j, q)] = ek
            C.append(ck); F.append(fk); E.append(ek)
        fin = max(t, F[-1] if F else t) + epi
        end_all = max(end_all, fin)
        heapq.heappush(free, fin)
    return end_all


if __name__ == "__main__":
    mask = sys.argv[1] if len(sys.argv) > 1 else "causal"
    for n_kv, G in ((64, 2), (32, 4)):
        for a, c in ((0.1, 0.1), (0.25, 0.3), (0.5, 0.6)):
            d = sim(n_kv, 32, G, "default", mask)
            t = sim(n_kv, 32, G, "today", mask, a=a, c=c)
            f = sim(n_kv, 32, G, "flipped", mask, a=a, c=c)
            print(f"{mask} n_kv={n_kv} G={G} a={a} c={c}: default {d:.0f} today {t:.0f} ({t/d-1:+.1%}) "
                  f"flipped {f:.0f} ({f/d-1:+.1%})")
