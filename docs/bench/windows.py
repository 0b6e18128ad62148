# How the bandwidth and decode moved within each run of a round (probe_samples and decode_step_ms, stop 54 on):
# python3 windows.py OUTDIR. For each run: the passes' range; decode efficiency stretch by stretch (the steps
# between two passes against the mean of those two, their harmonic mean: the passes read equal bytes), its median
# and range; the arithmetic samples' range; and the hypervisor's steal time over the run (all CPUs; steps, passes and settling steps) beside the steps' time.
import json, sys, glob, os, statistics
for path in sorted(glob.glob(os.path.join(sys.argv[1], '*.json'))):
    r = json.load(open(path))
    if not isinstance(r, dict):
        continue  # llama-bench's
    ps, steps = r.get('probe_samples'), r.get('decode_step_ms')
    if not ps or not steps:
        continue
    rd = r['weight_bytes_per_token'] + r['kv_bytes_per_token']
    effs = []
    for a, b in zip(ps, ps[1:]):
        st = steps[a['after_steps']:b['after_steps']]
        if not st:
            continue
        dec = rd * len(st) / (sum(st) / 1e3) / 1e9  # GB/s read by these steps
        effs.append(dec / (2 / (1 / a['gb_s'] + 1 / b['gb_s'])))
    g = [p['gb_s'] for p in ps]
    ar = [p.get('arith_gops', 0) for p in ps]
    st = [p.get('steal_ms', -1) for p in ps[1:]]
    steal = f"{sum(st):6.0f} ms" if st and min(st) >= 0 else "   n/a"
    print(f"{os.path.basename(path):22s} passes {len(g):3d} {min(g):5.1f}-{max(g):5.1f} GB/s  paired {r['decode_efficiency_paired']:.3f}"
          f"  stretches {len(effs):3d}: median {statistics.median(effs):.3f}, {min(effs):.3f}-{max(effs):.3f}"
          f"  arith {min(ar):.2f}-{max(ar):.2f}  steal {steal} (steps {sum(steps) / 1e3:.1f} s)")
