import heapq
def order(n_kv,pairs,G):
    # groups of G pairs (leftover first), rank-major within group
    out=[]
    rem=pairs%G if G>1 else 0
    groups=[]
    start=0
    if rem: groups.append(list(range(0,rem))); start=rem
    while start<pairs:
        groups.append(list(range(start,min(pairs,start+G)))); start+=G
    for g in groups:
        for r in range(n_kv):
            for p in g: out.append((p,r))
    return out
def makespan(seq, dur, ctas=132):
    h=[0.0]*ctas; end=0
    for x in seq:
        t=heapq.heappop(h); f=t+dur(x); heapq.heappush(h,f); end=max(end,f)
    return end
n=64
for G in (1,2,4,8,16,32):
    asc=makespan(order(n,32,G), lambda x: (n-x[1])+1)
    desc=makespan(order(n,32,G), lambda x: (x[1]+1)+1)
    print(G, asc, desc)
print("bound", 32*sum(n-j+1 for j in range(n))/132)
