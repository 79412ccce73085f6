#!/usr/bin/env python3
"""5 s working-set windows of every agent of a bench zone, each with the number
of collections it saw, read without touching the agents (no scrape: a scrape's
allocations would start a collection in the next window).

usage: gcwindows.py WINDOW_SECONDS COUNT NUMGC_ADDRESS

NUMGC_ADDRESS is runtime.memstats.numgc in the agent binary, found once with
  gdb -p <pid> -batch -ex "p &'runtime.memstats'.numgc"
(its address moves with every build). Needs root (clear_refs, /proc/<pid>/mem).
"""
import re, struct, subprocess, sys, time

win, n, numgc_addr = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3], 0)
pids = [int(p) for p in subprocess.run(['pgrep', '-f', 'edgequorum-agent --node-name=n3-'],
                                       capture_output=True, text=True).stdout.split()]

def numgc(p):
    with open(f'/proc/{p}/mem', 'rb') as f:
        f.seek(numgc_addr)
        return struct.unpack('<I', f.read(4))[0]

def referenced(p):
    res = {'anon': 0, 'text': 0, 'ro': 0}
    hdr, tot = None, 0
    for l in open(f'/proc/{p}/smaps'):
        if re.match(r'^[0-9a-f]+-[0-9a-f]+ ', l):
            f = l.split()
            hdr = (f[1], f[5] if len(f) > 5 else '')
        elif l.startswith('Referenced:'):
            kb = int(l.split()[1])
            tot += kb
            if hdr[1] == '':
                res['anon'] += kb
            elif hdr[0] == 'r-xp':
                res['text'] += kb
            elif hdr[0] == 'r--p':
                res['ro'] += kb
    res['tot'] = tot
    return res

last = {p: numgc(p) for p in pids}
for _ in range(n):
    for p in pids:
        open(f'/proc/{p}/clear_refs', 'w').write('1')
    time.sleep(win)
    for p in pids:
        r, g = referenced(p), numgc(p)
        print(time.strftime('%T'), p, 'gcs=%d' % (g - last[p]), ' '.join(f'{k}={v}' for k, v in r.items()))
        last[p] = g
