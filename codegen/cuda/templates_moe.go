package cuda

// moeTemplates are the kernel families of the gpt-oss blocks (router
// selection and the expert block, ported from codegen/metal) and the greedy
// argmax, under templates.go's conventions.
var moeTemplates = map[string]string{
	// topk_softmax: one warp per row of {{.E}} logits. K rounds of a warp
	// arg-max (warp_max of the value, then the minimum index among the
	// lanes holding it, so equal logits pick the lower expert as ir/eval's
	// stable sort does) select the experts; the softmax is then taken over
	// the K selected logits and every other entry is 0.
	"topk_softmax": `
// {{.Name}}: out[r] = softmax over the {{.TopK}} largest of x[r] (ties → lower index), 0 elsewhere; {{.E}} experts.
extern "C" __global__ void __launch_bounds__(32) {{.Name}}(
    const float* __restrict__ x,
    float* __restrict__ out,
    const u32 T) {` + ids + `
    const u32 r = blockIdx.y;
    const float* xr = x + (u64)r * {{.E}}u;
    float sv[{{.TopK}}];
    u32 si[{{.TopK}}];
    for (u32 k = 0; k < {{.TopK}}u; ++k) {
        float best = -3.0e38f;
        u32 bi = {{.E}}u;
        for (u32 i = lane; i < {{.E}}u; i += 32) {
            bool taken = false;
            for (u32 q = 0; q < k; ++q) {
                taken = taken || si[q] == i;
            }
            if (!taken && (bi == {{.E}}u || xr[i] > best)) {
                best = xr[i];
                bi = i;
            }
        }
        const float m = warp_max(bi < {{.E}}u ? best : -3.0e38f);
        u32 c = (bi < {{.E}}u && best == m) ? bi : {{.E}}u;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const u32 oc = __shfl_xor_sync(0xffffffffu, c, o);
            c = oc < c ? oc : c;
        }
        sv[k] = m;
        si[k] = c;
    }
    float sum = 0.0f;
    for (u32 k = 0; k < {{.TopK}}u; ++k) {
        sum += expf(sv[k] - sv[0]);
    }
    for (u32 i = lane; i < {{.E}}u; i += 32) {
        float o = 0.0f;
        for (u32 k = 0; k < {{.TopK}}u; ++k) {
            if (si[k] == i) {
                o = expf(sv[k] - sv[0]) / sum;
            }
        }
        out[(u64)r * {{.E}}u + i] = o;
    }
}
`,
	// moe_up: the gate and up products of one selected expert. Block
	// (column block, slot s, token t) finds the expert of the s-th non-zero
	// route weight of token t (none: the whole block returns, uniformly), so
	// only selected experts' rows are read; warp j computes gate row j and
	// up row j and stores act(g, u) in the scratch at [t, s, j].
	"moe_up": `
// {{.Name}}_expert returns the expert of the s-th non-zero weight of a route row, or -1.
__device__ __forceinline__ int {{.Name}}_expert(const float* __restrict__ rt, u32 s) {
    u32 seen = 0;
    for (u32 i = 0; i < {{.E}}u; ++i) {
        if (rt[i] != 0.0f) {
            if (seen == s) {
                return int(i);
            }
            ++seen;
        }
    }
    return -1;
}
` + dotLoop + `
// {{.Name}}: for the s-th selected expert e of token t, h[j] = {{.Act}}(gate_e[j]·x[t]{{if .Bias}} + bg[e, j]{{end}}, up_e[j]·x[t]{{if .Bias}} + bu[e, j]{{end}}),
// stored at scratch[t, s, j]; gate, up {{.DT}}[{{.E}}, {{.F}}, {{.K}}], {{.Slots}} slots.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ x,
    const float* __restrict__ route,
    const u8* __restrict__ wg,
    const u8* __restrict__ wu,
{{- if .Bias}}
    const {{.BiasT}}* __restrict__ bg,
    const {{.BiasT}}* __restrict__ bu,
{{- end}}
    float* __restrict__ act,
    const u32 T) {` + ids + `
    const u32 j = blockIdx.x * {{.NW}}u + warp, s = blockIdx.y, t = blockIdx.z;
    const int e = {{.Name}}_expert(route + (u64)t * {{.E}}u, s);
    if (e < 0) {
        return; // fewer selected experts than slots: the same for every thread of the block
    }
    const float* xr = x + (u64)t * {{.K}}u;{{if .XS.On}}` + xStageSource + `{{end}}
    float g = 0.0f, up = 0.0f;
    if (j < {{.F}}u) {
        const u8* w = wg + (u64)e * {{.ExpBytes}}u;{{template "dot" (dotArgs . "j" "g")}}
        w = wu + (u64)e * {{.ExpBytes}}u;{{template "dot" (dotArgs . "j" "up")}}
    }
    g = warp_sum(g);
    up = warp_sum(up);
    if (j < {{.F}}u && lane == 0) {{"{"}}{{if .Bias}}
        g += ldf(bg[(u64)e * {{.F}}u + j]);
        up += ldf(bu[(u64)e * {{.F}}u + j]);{{end}}{{.ActBody}}
        act[((u64)t * {{.Slots}}u + s) * {{.F}}u + j] = h;
    }
}
`,
	// moe_down: warp j of token t sums, over the selected experts in route
	// order, route weight · (down_e[j]·h[t, s] (+ bd[e, j])).
	"moe_down": dotLoop + `
// {{.Name}}: out[t, j] = Σ over the selected experts e (slot s) of route[t, e]·(down_e[j]·h[t, s]{{if .Bias}} + bd[e, j]{{end}}),
// down {{.DT}}[{{.E}}, {{.D}}, {{.K}}], {{.Slots}} slots.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ act,
    const float* __restrict__ route,
    const u8* __restrict__ wd,
{{- if .Bias}}
    const {{.BiasT}}* __restrict__ bd,
{{- end}}
    float* __restrict__ out,
    const u32 T) {` + ids + `
    const u32 j = blockIdx.x * {{.NW}}u + warp, t = blockIdx.y;
    const float* rt = route + (u64)t * {{.E}}u;{{if .XS.On}}
    // Each selected expert's activation row is staged in shared memory
    // (padded as in the matrix-vector kernels) before its dot.
    __shared__ float xs[{{.XS.Floats}}];{{end}}
    float acc = 0.0f;
    u32 s = 0;
    // The loop bounds depend on the route row alone: uniform in the block.
    for (u32 e = 0; e < {{.E}}u && s < {{.Slots}}u; ++e) {
        const float wt = rt[e];
        if (wt == 0.0f) {
            continue;
        }
        const float* xr = act + ((u64)t * {{.Slots}}u + s) * {{.K}}u;{{if .XS.On}}
        __syncthreads(); // every warp is done with the previous slot's row
        for (u32 i = tid; i < {{.K}}u; i += {{.Threads}}u) {
            xs[i{{if .XS.Pad}} + i / {{.Unit}}u{{end}}] = xr[i];
        }
        __syncthreads();{{end}}
        float y = 0.0f;
        if (j < {{.D}}u) {
            const u8* w = wd + (u64)e * {{.ExpBytes}}u;{{template "dot" (dotArgs . "j" "y")}}
        }
        y = warp_sum(y);
        if (j < {{.D}}u) {
            acc += wt * (y{{if .Bias}} + ldf(bd[(u64)e * {{.D}}u + j]){{end}});
        }
        ++s;
    }
    if (j < {{.D}}u && lane == 0) {
        out[(u64)t * {{.D}}u + j] = acc;
    }
}
`,
	// argmax: one block of {{.Threads}} threads per logits row. Each thread
	// scans every {{.Threads}}th value keeping the first of its largest;
	// the (value, index) pairs are then reduced, larger value first and on
	// equal values the smaller index, over the warp with shuffles and over
	// the warps through shared memory. The start (-inf, {{.V}}) loses to or
	// ties with any number, and a tie goes to the smaller index, so a -inf
	// can win; a NaN never compares greater or equal, so it never wins, and
	// a row of NaNs ends at index {{.V}}, written as 0.
	"argmax": `
// {{.Name}}: out[r] = the smallest index of the largest of logits[r, 0:{{.V}}] (NaN never wins; an all-NaN row gives 0).
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ logits,
    int* __restrict__ out,
    const u32 T) {` + ids + `
    __shared__ float wv[{{.NW}}];
    __shared__ u32 wi[{{.NW}}];
    const u32 r = blockIdx.y;
    const float* xr = logits + (u64)r * {{.V}}u;
    const float ninf = __uint_as_float(0xff800000u);
    float best = ninf;
    u32 bi = {{.V}}u;
    for (u32 i = tid; i < {{.V}}u; i += {{.Threads}}u) {
        const float v = xr[i];
        if (v > best || (v == best && i < bi)) {
            best = v;
            bi = i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_down_sync(0xffffffffu, best, o);
        const u32 oi = __shfl_down_sync(0xffffffffu, bi, o);
        if (ov > best || (ov == best && oi < bi)) {
            best = ov;
            bi = oi;
        }
    }
    if (lane == 0) {
        wv[warp] = best;
        wi[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        best = lane < {{.NW}}u ? wv[lane] : ninf;
        bi = lane < {{.NW}}u ? wi[lane] : {{.V}}u;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_down_sync(0xffffffffu, best, o);
            const u32 oi = __shfl_down_sync(0xffffffffu, bi, o);
            if (ov > best || (ov == best && oi < bi)) {
                best = ov;
                bi = oi;
            }
        }
        if (lane == 0) {
            out[r] = bi < {{.V}}u ? int(bi) : 0;
        }
    }
}
`,
}
