#!/bin/sh
cd /work/main
for i in 1 2; do
for tag in base noalias; do
  [ $tag = base ] && B=/work/main/bin || B=/tmp/noalias  # make build BIN=/tmp/noalias of the tree without the aliases
  OUT=./n9-$tag-$i; rm -rf $OUT; mkdir -p $OUT
  ./bin/bench -bin $B -sizes 9 -kills 1 -failovers 1 -loss none -live-sizes none -only-ours -out $OUT > $OUT/bench.log 2>&1
  echo "$tag $i $(grep '| 9 | ours: leader' $OUT/results.md | head -1) $(grep '| 9 | ours: largest follower' $OUT/results.md | head -1)"
done
done
