import json,glob,collections,sys
prefix=sys.argv[1]
res=collections.defaultdict(list)
copy=collections.defaultdict(list)
for f in sorted(glob.glob(prefix+'-direct*.json')):
    d=json.load(open(f)); tag=f.split('-')[-2]
    for r in d['results']:
        res[(r['op'],r['size'],tag)].append(r['out_of_place']['time_us'])
        copy[(r['op'],r['size'],tag)].append(r.get('copy_gbs'))
keys=sorted(set((o,s) for o,s,t in res))
print("| op | size | lent (1) us | slots (0) us | lent/slots |")
print("| --- | ---: | --- | --- | --- |")
for o,s in keys:
    a=res[(o,s,'direct1')]; b=res[(o,s,'direct0')]
    print(f"| {o} | {s>>20} MiB | {', '.join('%.0f'%x for x in a)} | {', '.join('%.0f'%x for x in b)} | {', '.join('%.2f'%(x/y) for x,y in zip(a,b))} |")
