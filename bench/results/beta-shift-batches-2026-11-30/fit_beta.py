import json,subprocess,glob,sys
M=sys.argv[3] if len(sys.argv) > 3 else 'build/bin/ringlet-model'
def score(d, skip=()):
    ok=0
    for r in d['rows']:
        if r['bytes']<65536 or r['collective'] in skip: continue
        ok+= abs(r['predicted_s']/r['measured_s']-1)<=0.25
    return ok
def pred(d, **kw):
    d2=json.loads(json.dumps(d)); d2['model'].update(kw)
    json.dump(d2,open('/tmp/fit-beta-in.json','w'))
    subprocess.run([M,'predict','/tmp/fit-beta-in.json','-o','/tmp/fit-beta-out.json'],stdout=subprocess.DEVNULL,check=True)
    return json.load(open('/tmp/fit-beta-out.json'))
bws=[float(x) for x in sys.argv[2].split(",")]
for f in sorted(glob.glob(sys.argv[1])):
    d=json.load(open(f)); cm=d['model']
    res=[score(pred(d, beta_s_per_byte=1/(bw*1e9)), skip=('broadcast',)) for bw in bws]
    print(f.split('/')[-1], 'beta', round(1e-9/cm['beta_s_per_byte'],2), 'oneway', round(1e-9/cm['beta_one_way_s_per_byte'],2), 'own', score(pred(d), skip=('broadcast',)), dict(zip(bws,res)))
