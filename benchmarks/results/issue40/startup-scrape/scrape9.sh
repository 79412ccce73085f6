#!/bin/sh
BIN=$1; TAG=$2
OUT=./$TAG; rm -rf $OUT; mkdir -p $OUT
cd /work/main
GODEBUG=memprofilerate=1024 ./bin/bench -bin $BIN -sizes 9 -kills 1 -failovers 1 -loss none -live-sizes none -only-ours -steady 90s -keep -work $OUT/work -out $OUT > $OUT/bench.log 2>&1 &
BP=$!
while ! grep -q "steady state: sampling" $OUT/bench.log; do sleep 1; kill -0 $BP 2>/dev/null || exit 1; done
sleep 25
for p in $(pgrep -f "edgequorum-agent --node-name=n9-"); do
  addr=$(tr '\0' '\n' < /proc/$p/cmdline | sed -n 's/^--status-address=//p')
  l=$(curl -s http://$addr/metrics | awk '/^edgequorum_raft_is_leader /{print $2}')
  [ "$l" = 1 ] && { LP=$p; LA=$addr; }
done
echo "leader $LP $LA" > $OUT/leader.txt
curl -s -o $OUT/a.pb.gz http://$LA/debug/pprof/allocs
grep -E "VmHWM|RssAnon" /proc/$LP/status >> $OUT/leader.txt
for i in 1 2 3 4 5; do curl -s -H 'Accept-Encoding: gzip' -o $OUT/metrics$i.gz http://$LA/metrics; sleep 1; done
grep -E "VmHWM|RssAnon" /proc/$LP/status >> $OUT/leader.txt
curl -s -o $OUT/b.pb.gz http://$LA/debug/pprof/allocs
curl -s http://$LA/metrics > $OUT/metrics.txt
wait $BP
