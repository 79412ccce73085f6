import sys,struct,collections
pid=int(sys.argv[1])
maps=[l.split() for l in open(f'/proc/{pid}/maps')]
pm=open(f'/proc/{pid}/pagemap','rb'); kf=open('/proc/kpageflags','rb')
st=collections.Counter()
for m in maps:
    if len(m)<6 or not m[5].endswith('edgequorum-agent') or m[1] not in ('r-xp','r--p'): continue
    lo,hi=[int(x,16) for x in m[0].split('-')]
    n=(hi-lo)//4096
    pm.seek(lo//4096*8); data=pm.read(n*8)
    for i in range(n):
        e=struct.unpack_from('<Q',data,i*8)[0]
        if not (e>>63)&1: st[m[1],'notpresent']+=1; continue
        pfn=e&((1<<55)-1)
        kf.seek(pfn*8); f=struct.unpack('<Q',kf.read(8))[0]
        comp=(f>>15)&1 or (f>>16)&1
        ref=(f>>2)&1
        st[m[1],'large' if comp else 'small', 'ref' if ref else 'noref']+=1
for k,v in sorted(st.items()): print(k, v*4, 'KiB')
