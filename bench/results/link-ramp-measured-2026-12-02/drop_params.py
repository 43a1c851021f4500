# Prices each ringlet-model report again (ringlet-model predict) with and without the past-cache
# points measured since 2026-12-02, and counts the points within 25% and the sizes whose
# predicted-fastest algorithm took within 10% of the fastest measured. Run from the repository
# root: python3 bench/results/link-ramp-measured-2026-12-02/drop_params.py REPORT.json...
import json,os,subprocess,sys,tempfile
tmp=tempfile.mkdtemp()
def count(rep):
    rows=[r for r in rep['rows'] if r['bytes']>=65536]
    within=sum(1 for r in rows if abs(r['predicted_s']/r['measured_s']-1)<=0.25)
    by={}
    for r in rows: by.setdefault((r['collective'],r['bytes']),[]).append(r)
    ch=0
    for k,v in by.items():
        best=min(x['measured_s'] for x in v); pick=min(v,key=lambda x:x['predicted_s'])
        ch+= pick['measured_s']<=1.10*best
    return within,ch
variants={'old':['one_way_memory_factor','link_memory_mid_factor','one_way_memory_mid_factor'],
          'oneway':['link_memory_mid_factor','one_way_memory_mid_factor'],
          'mid':['one_way_memory_factor','one_way_memory_mid_factor'],
          'all':[]}
tot={k:[0,0] for k in variants}
for f in sys.argv[1:]:
    d=json.load(open(f)); out=[]
    for name,drop in variants.items():
        e=json.loads(json.dumps(d))
        for k in drop: e['model'].pop(k,None)
        json.dump(e,open(os.path.join(tmp,'in.json'),'w'))
        subprocess.run(['build/bin/ringlet-model','predict',os.path.join(tmp,'in.json'),'-o',os.path.join(tmp,'out.json')],capture_output=True,check=True)
        c=count(json.load(open(os.path.join(tmp,'out.json')))); out.append(f'{name} {c[0]:2d}/{c[1]:2d}')
        tot[name][0]+=c[0]; tot[name][1]+=c[1]
    m=d['model']
    print(f.split('/')[-1], ' | '.join(out), ' factors', *(round(m.get(k,0),2) for k in ['link_memory_mid_factor','link_memory_factor','one_way_memory_mid_factor','one_way_memory_factor']))
print('total', tot)
