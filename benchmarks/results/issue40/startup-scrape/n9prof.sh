#!/bin/sh
cd /work/main
for i in 1 2; do
for tag in sampling nosampling; do
  OUT=./n9p-$tag-$i; rm -rf $OUT; mkdir -p $OUT
  if [ $tag = nosampling ]; then export GODEBUG=memprofilerate=0; else unset GODEBUG; fi
  ./bin/bench -bin /tmp/noalias -sizes 9 -kills 1 -failovers 1 -loss none -live-sizes none -only-ours -out $OUT > $OUT/bench.log 2>&1
  echo "$tag $i $(grep '| 9 | ours: leader' $OUT/results.md | head -1) $(grep '| 9 | ours: largest follower' $OUT/results.md | head -1)"
done
done
