"""Session 30: the ordered (deterministic) backward launch orders in a tick model with the waits: 64-row query-tile steps,
causal B=2 H=16 S=8192 (64 kv tiles x 32 pairs), 132 SMs. Descending (today) vs ascending launch per launch-group size;
finding: ascending saves 1-2 %% (1083-1088 vs 1099 ticks) because later groups start one kv step apart, which cancels
the walk offset and serializes the arrivals; and it deadlocks where a group exceeds the SMs. Not pursued."""
import sys
exec(open(__file__.replace('det_order_sim.py', 'grid_order_model.py')).read().split('n=64')[0])
NOWAIT=False
def sim(n_kv,pairs,G,asc,slots=132,lat=0):
    seq=order(n_kv,pairs,G)
    nq=2*n_kv
    done={}  # (pair,kv,qi)->tick
    running=[]  # [pair,kv,next_q]
    idx=0;t=0;finished=0;total=len(seq)
    while finished<total:
        while len(running)<slots and idx<total:
            p,r=seq[idx]; kv = r if asc else n_kv-1-r
            running.append([p,kv,2*kv,0]); idx+=1
        t+=1
        if t>100000: return None
        newrun=[]
        progressed=False
        for c in running:
            p,kv,q,ep=c
            if q>=nq:
                finished+=1; progressed=True; continue  # epilogue tick
            ok = NOWAIT or (kv+1> q//2) or (done.get((p,kv+1,q),1e9) < t-lat)
            if ok:
                done[(p,kv,q)]=t; c[2]+=1; progressed=True
            newrun.append(c)
        running=newrun
        if not progressed and idx>=total or (not progressed and len(running)==slots):
            if not progressed: return ('deadlock',t)
    return t
for G in (1,2,4):
    print(G, 'asc',sim(64,32,G,True),'desc',sim(64,32,G,False))
print('asc, 2 pairs/group, slots 100:', sim(64,32,2,True,slots=100))
NOWAIT=True
for G in (1,2):
    print('nowait',G, 'asc',sim(64,32,G,True),'desc',sim(64,32,G,False))
NOWAIT=False
for G in (8,16,32):
    print('desc',G, sim(64,32,G,False), 'nowait', end=' ')
    NOWAIT=True; print(sim(64,32,G,False)); NOWAIT=False
