#!/bin/bash
# One alternating round: for each file, ours at depth 512 and depth 1, llama.cpp's llama-bench (pp512/tg128)
# and llama-batched-bench at depth 512 (with and without -fa).
# Files: minervac synth --preset tinyllama-1.1b --quant Q -o $MODELS/tl-Q.gguf (q4_0 q4_k q4_k_m q5_k q6_k q8_0),
# and --preset llama-7b --quant q4_k_m -o $MODELS/l7-q4km.gguf. Tables: python3 table.py OUTDIR (docs/PERFORMANCE.md).
set -u
OUTDIR=${OUTDIR:?output directory}; MB=${MB:?minervac binary}; FILES=${FILES:-tl-q4_0 tl-q4_k tl-q4_k_m tl-q5_k tl-q6_k tl-q8_0 l7-q4km}
LB=${LLAMA_BIN:?llama.cpp build/bin directory}
mkdir -p "$OUTDIR"
for f in $FILES; do
  g=${MODELS:?directory of the synth files}/$f.gguf
  n=128; [ "$f" = l7-q4km ] && n=32
  "$MB" bench "$g" -p 512 -n $n --threads 2 --json > "$OUTDIR/$f.ours512.json" 2>"$OUTDIR/$f.ours512.err"
  $LB/llama-bench -m "$g" -p 512 -n $n -t 2 -r 3 -o json > "$OUTDIR/$f.lb.json" 2>/dev/null
  "$MB" bench "$g" -p 1 -n $n --threads 2 --json > "$OUTDIR/$f.ours1.json" 2>"$OUTDIR/$f.ours1.err"
  $LB/llama-batched-bench -m "$g" -c 1024 -b 2048 -ub 512 -npp 512 -ntg $n -npl 1 -t 2 > "$OUTDIR/$f.bb.txt" 2>/dev/null
  $LB/llama-batched-bench -m "$g" -c 1024 -b 2048 -ub 512 -npp 512 -ntg $n -npl 1 -t 2 -fa > "$OUTDIR/$f.bbfa.txt" 2>/dev/null
done
echo roundend > "$OUTDIR/DONE"
