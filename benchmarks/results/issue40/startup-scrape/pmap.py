import sys, struct, subprocess, re
pid=int(sys.argv[1]); binpath=sys.argv[2]; out=sys.argv[3]
maps=[l.split() for l in open('/proc/%d/maps'%pid)]
present=set()
with open('/proc/%d/pagemap'%pid,'rb') as pm:
    for m in maps:
        if len(m)<6 or m[5]!=binpath: continue
        a,b=[int(x,16) for x in m[0].split('-')]
        pm.seek(a//4096*8); data=pm.read((b-a)//4096*8)
        for i in range((b-a)//4096):
            e=struct.unpack_from('<Q',data,i*8)[0]
            if e>>63: present.add(a//4096+i)
open(out,'w').write('\n'.join(str(p) for p in sorted(present)))
print('present pages', len(present), len(present)*4/1024, 'MiB')
