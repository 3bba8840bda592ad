"""Runs of equal executed count in an ncu SASS source page (csv from `ncu --page source --csv --print-source sass`):
prints each run of consecutive instructions with the same "Instructions Executed" whose total (count x length) is at
least THRESHOLD, with its stall samples and first opcodes. Usage: sass_runs.py FILE.csv THRESHOLD (session 34, s34b)."""
import csv,sys
def load(f):
    rows=list(csv.reader(open(f)))
    hdr=rows[1]; i_src=hdr.index("Source"); i_ex=hdr.index("Instructions Executed"); i_s=hdr.index("Warp Stall Sampling (All Samples)")
    out=[]
    for k,r in enumerate(rows[2:]):
        try: ex=int(r[i_ex] or 0); s=int(r[i_s] or 0)
        except: continue
        out.append((k,r[i_src],ex,s))
    return out
ins=load(sys.argv[1]); thr=float(sys.argv[2])
runs=[];cur=[]
for x in ins:
    if cur and x[2]!=cur[-1][2]:
        runs.append(cur);cur=[]
    cur.append(x)
runs.append(cur)
for r in runs:
    tot=r[0][2]*len(r)
    if tot>=thr:
        ops=[i[1].split()[0] if not i[1].startswith('@') else i[1].split()[1] for i in r]
        print("line %5d n=%3d exec=%9d tot=%10d samp=%6d | %s"%(r[0][0],len(r),r[0][2],tot,sum(i[3] for i in r),' '.join(o.split('.')[0] for o in ops[:14])))
