# Prints one round of round.sh as the markdown table of docs/PERFORMANCE.md: python3 table.py OUTDIR
import json, sys, os, re
d = sys.argv[1]
names = {'tl-q4_0':'TinyLlama Q4_0','tl-q4_k':'TinyLlama Q4_K','tl-q4_k_m':'TinyLlama Q4_K_M','tl-q5_k':'TinyLlama Q5_K','tl-q6_k':'TinyLlama Q6_K','tl-q8_0':'TinyLlama Q8_0','l7-q4km':'Llama-7B-shaped Q4_K_M'}
def bb(path):
    best=None
    try:
        for line in open(path):
            if line.startswith('|') and re.match(r'\|\s+\d', line):
                c=[x.strip() for x in line.strip().strip('|').split('|')]
                tg=float(c[7]); best=tg if best is None or tg>best else best
    except FileNotFoundError: pass
    return best
print('| file | prefill tok/s (llama.cpp) | decode at 512 (llama.cpp) | efficiency, GB/s sampled | decode from 1 (llama.cpp `tg128`) | efficiency, GB/s sampled |')
print('|---|---|---|---|---|---|')
for f in names:
    o=json.load(open(f'{d}/{f}.ours512.json')); o1=json.load(open(f'{d}/{f}.ours1.json'))
    lb=json.load(open(f'{d}/{f}.lb.json'))
    pp=[r['avg_ts'] for r in lb if r['n_prompt']>0][0]; tg=[r['avg_ts'] for r in lb if r['n_gen']>0][0]
    b=max(x for x in (bb(f'{d}/{f}.bb.txt'), bb(f'{d}/{f}.bbfa.txt')) if x)
    print(f"| {names[f]} | {o['prefill_tokens_s']:.1f} ({pp:.1f}) | {o['decode_tokens_s']:.1f} ({b:.1f}) | {o['decode_efficiency_paired']:.3f}, {o['decode_bandwidth_gb_s']:.1f} | {o1['decode_tokens_s']:.1f} ({tg:.1f}) | {o1['decode_efficiency_paired']:.3f}, {o1['decode_bandwidth_gb_s']:.1f} |")
