#!/bin/sh
BIN=$1; TAG=$2
OUT=./$TAG; rm -rf $OUT; mkdir -p $OUT
cd /work/main
./bin/bench -bin $BIN -sizes 9 -kills 1 -failovers 1 -loss none -live-sizes none -only-ours -keep -work $OUT/work -out $OUT > $OUT/bench.log 2>&1 &
BP=$!
t0=$(date +%s.%N)
while kill -0 $BP 2>/dev/null; do
  t=$(date +%s.%N)
  for p in $(pgrep -f "edgequorum-agent --node-name=n9-"); do
    n=$(tr '\0' '\n' < /proc/$p/cmdline 2>/dev/null | sed -n 's/^--node-name=//p')
    awk -v t=$t -v t0=$t0 -v n=$n -v p=$p '/^VmHWM|^VmRSS|^RssAnon|^RssFile/{v[$1]=$2} END{printf "%.1f %s %s hwm=%d rss=%d anon=%d file=%d\n", t-t0, n, p, v["VmHWM:"], v["VmRSS:"], v["RssAnon:"], v["RssFile:"]}' /proc/$p/status 2>/dev/null
  done
  sleep 0.5
done > $OUT/rss.txt
