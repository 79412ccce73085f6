#!/bin/sh
W=${1:-4}; S=${2:-30}
for i in $(seq $W); do
  pids=$(pgrep -f "edgequorum-agent --node-name=n3-")
  for p in $pids; do echo 1 > /proc/$p/clear_refs; done
  sleep $S
  for p in $pids; do
    line=$(awk -v p=$p '/^[0-9a-f]+-[0-9a-f]+ /{perm=$2; name=$6} /^Referenced:/{ if(name=="") a+=$2; else if(perm=="r-xp") t+=$2; else if(perm=="r--p") r+=$2; else o+=$2; tot+=$2} END{printf "pid=%s anon=%d text=%d ro=%d other=%d total=%d", p, a, t, r, o, tot}' /proc/$p/smaps)
    addr=$(tr '\0' '\n' < /proc/$p/cmdline | sed -n 's/^--status-address=//p')
    l=$(curl -s http://$addr/metrics | awk '/^edgequorum_raft_is_leader /{print $2}')
    echo "win leader=$l $line"
  done
done
