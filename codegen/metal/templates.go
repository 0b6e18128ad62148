package metal

// The renderer is a table: kernel family → MSL template. Every template
// sees a params value (see kernels.go) whose fields are the shapes and
// attributes baked into that kernel; step sizes (T, and through pos the
// cache positions) arrive as arguments.
//
// Conventions every kernel follows, so that a runtime (and the CPU
// emulation in the tests) can launch any of them the same way:
//   - buffers come first, numbered from 0 in the order of Kernel.Params;
//   - then `constant uint& T`, the tokens of this step;
//   - then the thread-position built-ins, always the same four;
//   - control flow around simd_* calls and barriers is uniform in a
//     threadgroup (no early return before them), as Metal requires of
//     simdgroup functions and as the emulation's barriers need.

const preludeSource = `#include <metal_stdlib>
using namespace metal;

// ld_f16 reads a little-endian IEEE half at any even byte offset.
inline float ld_f16(device const uchar* p) {
    return float(as_type<half>(ushort(uint(p[0]) | (uint(p[1]) << 8))));
}
`

const dqTemplate = `
// dq_{{.Name}} decodes unit u ({{.Unit}} elements) of a {{.Name}} row into registers.
inline void dq_{{.Name}}(device const uchar* row, uint u, thread float* w) {{"{"}}{{.Body}}
}
`

// kernelSig is the shared tail of every kernel's parameter list.
const sigTail = `    constant uint& T [[buffer({{.TSlot}})]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tiitg [[thread_index_in_threadgroup]],
    uint tiisg [[thread_index_in_simdgroup]],
    uint sgitg [[simdgroup_index_in_threadgroup]])`

// normPrologue computes the RMSNorm scale of row xr with the simdgroup.
const normPrologue = `{{if .Norm}}
    // RMSNorm prologue: every simdgroup reduces the row itself (K is small
    // beside the weight rows it then streams), so no threadgroup memory.
    float ss = 0.0f;
    for (uint i = tiisg; i < {{.K}}u; i += 32) {
        ss += xr[i] * xr[i];
    }
    ss = simd_sum(ss);
    const float scale = rsqrt(ss / {{.K}}.0f + {{.Eps}});{{end}}`

// dotLoop accumulates the dot of weight row `row` with the (normalised)
// input row into the named accumulator; lanes stride over units.
const dotLoop = `{{define "dot"}}
        for (uint u = tiisg; u < {{$.NU}}u; u += 32) {
            float wv[{{$.Unit}}];
            dq_{{$.DT}}(w + (ulong)({{.Row}}) * {{$.RowBytes}}u, u, wv);
            for (uint k = 0; k < {{$.Unit}}u; ++k) {
                {{.Acc}} += wv[k] * xr[u * {{$.Unit}}u + k]{{if $.Gain}} * gain[u * {{$.Unit}}u + k]{{end}};
            }
        }{{end}}`

// ropeFreqs, ropePair, ropeRotate and ropeWrite are the RoPE pieces of the
// qkv_rope kernel (its epilogue, lane 0 of the pair's simdgroup), of
// rope_kv and of rope (one thread per pair): the frequency table, the
// pair's columns of h, the rotation of q and k pairs, and the stores into
// q and the caches. ropeStore is the rotation and the stores.
const ropeFreqs = `
// {{.Name}}_freq: θ_i = freq_scale·base^(−2i/n_rot) as a (hi, lo) float pair,
// computed in float64 by the compiler so that pos·θ keeps float64 accuracy.
constant float2 {{.Name}}_freq[{{.Half}}] = { {{- .Freqs -}} };
`

const ropePair = `
    // Pair p: head p / {{.HalfHD}}, index i inside it; columns c0, c1 of h.
    const uint head = p / {{.HalfHD}}u, i = p % {{.HalfHD}}u;
    uint c0 = 2 * i, c1 = 2 * i + 1;{{if .Neox}}
    if (i < {{.Half}}u) {
        c0 = i;
        c1 = i + {{.Half}}u;
    }{{end}}
    c0 += head * {{.HD}}u;
    c1 += head * {{.HD}}u;`

const ropeRotate = `
        const int ps = pos[t];
        if (c0 < {{.QKD}}u && i < {{.Half}}u) {
            // θ = ps·freq[i] reduced modulo 2π in extended precision
            // (Cody–Waite with fma): cos and sin then see |θ| ≤ π.
            const float2 f = {{.Name}}_freq[i];
            const float pf = float(ps);
            const float ph = pf * f.x;
            const float pl = fma(pf, f.x, -ph) + pf * f.y;
            const float kq = rint(ph * 0.15915494309189535f);
            float th = fma(-kq, 6.28318548202514648f, ph);
            th = fma(-kq, -1.7484556000744487e-07f, th) + pl;
            const float cs = cos(th){{.MScale}}, sn = sin(th){{.MScale}};
            const float r0 = a0 * cs - a1 * sn, r1 = a0 * sn + a1 * cs;
            a0 = r0;
            a1 = r1;
        }
`

const ropeWrite = `        if (c0 < {{.QD}}u) {
            out[(ulong)t * {{.QD}}u + c0] = a0;
            out[(ulong)t * {{.QD}}u + c1] = a1;
        } else if (c0 < {{.QKD}}u) {
            const ulong row = (ulong)base[t] + (ulong)ps;
            kcache[row * {{.KVD}}u + c0 - {{.QD}}u] = {{.CacheT}}(a0);
            kcache[row * {{.KVD}}u + c1 - {{.QD}}u] = {{.CacheT}}(a1);
        } else {
            const ulong row = (ulong)base[t] + (ulong)ps;
            vcache[row * {{.KVD}}u + c0 - {{.QKD}}u] = {{.CacheT}}(a0);
            vcache[row * {{.KVD}}u + c1 - {{.QKD}}u] = {{.CacheT}}(a1);
        }
`

const ropeStore = ropeRotate + ropeWrite

var familyTemplates = map[string]string{
	"matmul_tiled": tiledTemplate,
	"swiglu_tiled": tiledTemplate,
	// embed: one thread per unit of the output row; the table row is the token's.
	"embed": `
// {{.Name}}: out[t, :] = dequant(table[ids[t], :]), table {{.DT}}[{{.V}}, {{.D}}].
kernel void {{.Name}}(
    device const uchar* table [[buffer(0)]],
    device const int* ids [[buffer(1)]],
    device float* out [[buffer(2)]],
` + sigTail + ` {
    const uint t = tgpig.y, u = tgpig.x * {{.Threads}}u + tiitg;
    if (t >= T || u >= {{.NU}}u) {
        return;
    }
    const int id = ids[t];
    if (id < 0 || id >= {{.V}}) {
        return; // the runtime checks ids before the step; never read outside the table
    }
    float wv[{{.Unit}}];
    dq_{{.DT}}(table + (ulong)id * {{.RowBytes}}u, u, wv);
    for (uint k = 0; k < {{.Unit}}u; ++k) {
        out[(ulong)t * {{.D}}u + u * {{.Unit}}u + k] = wv[k];
    }
}
`,
	// matvec: fused_matmul and matmul. One simdgroup per output feature,
	// {{.NW}} per threadgroup; grid (ceil(N/NSG), rows).
	"matvec": dotLoop + `
// {{.Name}}: out[r, j] = {{if .Norm}}rmsnorm(x[r]){{if .Gain}}·gain{{end}}{{else}}x[r]{{end}} · w[j]{{if .Bias}} + bias[j]{{end}}{{if .Residual}} + res[r, j]{{end}}, w {{.DT}}[{{.N}}, {{.K}}].
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device const uchar* w [[buffer(1)]],
{{- range .Extra}}
    device const {{.T}}* {{.Name}} [[buffer({{.Slot}})]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint r = tgpig.y, j = tgpig.x * {{.NW}}u + sgitg;
    device const float* xr = x + (ulong)r * {{.K}}u;` + normPrologue + `
    float acc = 0.0f;
    if (j < {{.N}}u) {{"{"}}{{template "dot" (dotArgs . "j" "acc")}}
    }
    acc = simd_sum(acc);
    if (j < {{.N}}u && tiisg == 0) {
        out[(ulong)r * {{.N}}u + j] = {{if .Norm}}acc * scale{{else}}acc{{end}}{{if .Bias}} + bias[j]{{end}}{{if .Residual}} + res[(ulong)r * {{.N}}u + j]{{end}};
    }
}
`,
	// swiglu: simdgroup j computes gate row j and up row F+j.
	"swiglu": dotLoop + `
// {{.Name}}: h = {{if .Norm}}rmsnorm(x[r]){{if .Gain}}·gain{{end}}{{else}}x[r]{{end}} · wᵀ, out[r, j] = silu(h[j]) · h[{{.F}} + j], w {{.DT}}[{{.N}}, {{.K}}].
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device const uchar* w [[buffer(1)]],
{{- range .Extra}}
    device const {{.T}}* {{.Name}} [[buffer({{.Slot}})]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint r = tgpig.y, j = tgpig.x * {{.NW}}u + sgitg;
    device const float* xr = x + (ulong)r * {{.K}}u;` + normPrologue + `
    float g = 0.0f, up = 0.0f;
    if (j < {{.F}}u) {{"{"}}{{template "dot" (dotArgs . "j" "g")}}{{template "dot" (dotArgs . .UpRow "up")}}
    }
    g = simd_sum(g);
    up = simd_sum(up);
    if (j < {{.F}}u && tiisg == 0) {{"{"}}{{if .Norm}}
        g *= scale;
        up *= scale;{{end}}
        out[(ulong)r * {{.F}}u + j] = g / (1.0f + exp(-g)) * up;
    }
}
`,
	// qkv_rope: simdgroup p computes the pair of columns RoPE rotates
	// together, rotates it (q and k blocks), and stores q into out and k, v
	// into the caches at row base[t] + pos[t].
	"qkv_rope": dotLoop + `` + ropeFreqs + `
// {{.Name}}: h = {{if .Norm}}rmsnorm(x[t]){{if .Gain}}·gain{{end}}{{else}}x[t]{{end}} · wᵀ{{if .Bias}} + bias{{end}}; q, k, v = h's blocks of {{.QD}}, {{.KVD}}, {{.KVD}};
// rope ({{.Mode}}, n_rot {{.NRot}} of head_dim {{.HD}}) on q and k; k, v → caches row base[t] + pos[t]; out = q.
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device const uchar* w [[buffer(1)]],
    device const int* pos [[buffer(2)]],
    device const int* base [[buffer(3)]],
    device {{.CacheT}}* kcache [[buffer(4)]],
    device {{.CacheT}}* vcache [[buffer(5)]],
{{- range .Extra}}
    device const {{.T}}* {{.Name}} [[buffer({{.Slot}})]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint t = tgpig.y, p = tgpig.x * {{.NW}}u + sgitg;
    device const float* xr = x + (ulong)t * {{.K}}u;` + normPrologue + `` + ropePair + `
    float a0 = 0.0f, a1 = 0.0f;
    if (p < {{.Pairs}}u) {{"{"}}{{template "dot" (dotArgs . "c0" "a0")}}{{template "dot" (dotArgs . "c1" "a1")}}
    }
    a0 = simd_sum(a0);
    a1 = simd_sum(a1);
    if (p < {{.Pairs}}u && tiisg == 0) {{"{"}}{{if .Norm}}
        a0 *= scale;
        a1 *= scale;{{end}}{{if .Bias}}
        a0 += bias[c0];
        a1 += bias[c1];{{end}}` + ropeStore + `    }
}
`,
	// rope_kv: the second launch of a qkv_rope whose q and k heads are
	// normalised (Qwen3), after the product wrote h into the scratch:
	// thread p of token t normalises its head (each thread sums its head's
	// squares itself), rotates its pair as qkv_rope's epilogue does and
	// stores q, k, v.
	"rope_kv": ropeFreqs + `
// {{.Name}}: q, k, v = h[t]'s blocks of {{.QD}}, {{.KVD}}, {{.KVD}} (h[T, {{.N}}]){{if .QKNorm}}; q and k heads RMS-normalised and scaled{{end}};
// rope ({{.Mode}}, n_rot {{.NRot}} of head_dim {{.HD}}) on q and k; k, v → caches row base[t] + pos[t]; out = q.
kernel void {{.Name}}(
    device const float* h [[buffer(0)]],
    device const int* pos [[buffer(1)]],
    device const int* base [[buffer(2)]],
    device {{.CacheT}}* kcache [[buffer(3)]],
    device {{.CacheT}}* vcache [[buffer(4)]],{{if .QKNorm}}
    device const {{.QNT}}* qnorm [[buffer(5)]],
    device const {{.QNT}}* knorm [[buffer(6)]],{{end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint t = tgpig.y, p = tgpig.x * {{.Threads}}u + tiitg;
    if (p >= {{.Pairs}}u) {
        return;
    }` + ropePair + `
    float a0 = h[(ulong)t * {{.N}}u + c0], a1 = h[(ulong)t * {{.N}}u + c1];{{if .QKNorm}}
    if (c0 < {{.QKD}}u) {
        device const float* hr = h + (ulong)t * {{.N}}u + head * {{.HD}}u;
        float ss = 0.0f;
        for (uint j = 0; j < {{.HD}}u; ++j) {
            ss += hr[j] * hr[j];
        }
        const float sc = rsqrt(ss / {{.HD}}.0f + {{.QKEps}});
        device const {{.QNT}}* g = c0 < {{.QD}}u ? qnorm : knorm;
        a0 = a0 * sc * float(g[c0 - head * {{.HD}}u]);
        a1 = a1 * sc * float(g[c1 - head * {{.HD}}u]);
    }{{end}}
    {` + ropeStore + `    }
}
`,
	// rope: a standalone rotation (a graph whose projections did not fuse):
	// thread p of token t rotates column pair p of x, or copies it past
	// n_rot.
	"rope": ropeFreqs + `
// {{.Name}}: out[t] = rope(x[t]) ({{.Mode}}, n_rot {{.NRot}} of head_dim {{.HD}}), rows of {{.QD}}.
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device const int* pos [[buffer(1)]],
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint t = tgpig.y, p = tgpig.x * {{.Threads}}u + tiitg;
    if (p >= {{.Pairs}}u) {
        return;
    }` + ropePair + `
    float a0 = x[(ulong)t * {{.QD}}u + c0], a1 = x[(ulong)t * {{.QD}}u + c1];
    {` + ropeRotate + `    }
    out[(ulong)t * {{.QD}}u + c0] = a0;
    out[(ulong)t * {{.QD}}u + c1] = a1;
}
`,
	// kv_write: a standalone cache write; one thread per element.
	"kv_write": `
// {{.Name}}: cache[base[t] + pos[t], :] = x[t, :], {{.K}} elements per row.
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device const int* pos [[buffer(1)]],
    device const int* base [[buffer(2)]],
    device {{.CacheT}}* cache [[buffer(3)]],
` + sigTail + ` {
    const uint i = tgpig.x * 32u + tiitg, t = tgpig.y;
    if (i >= {{.K}}u) {
        return;
    }
    cache[((ulong)base[t] + (ulong)pos[t]) * {{.K}}u + i] = {{.CacheT}}(x[(ulong)t * {{.K}}u + i]);
}
`,
	// attn_split: one simdgroup per (head, KV split, query). Each lane
	// walks every 32nd visible cache row of its split with its own online
	// softmax (m, l, acc); the lanes are then merged with simd_max/simd_sum
	// and the split's partial (m, l, acc[DV]) is stored for attn_merge.
	"attn_split": `
// {{.Name}}: partial attention of query t, head h over KV split s of {{.Splits}}, head_dim {{.HD}}, Dv {{.DV}}, GQA group {{.Group}}{{if .Window}}, window {{.Window}}{{end}}.
kernel void {{.Name}}(
    device const float* q [[buffer(0)]],
    device const {{.CacheT}}* kc [[buffer(1)]],
    device const {{.CacheT}}* vc [[buffer(2)]],
    device const int* pos [[buffer(3)]],
    device const int* base [[buffer(4)]],
    device float* part [[buffer(5)]],
` + sigTail + ` {
    const uint h = tgpig.x, s = tgpig.y, t = tgpig.z, kh = h / {{.Group}}u;
    const int p = pos[t];
    int lo = 0;{{if .Window}}
    lo = max(0, p - {{.Window}} + 1);{{end}}
    const int n = p + 1 - lo;
    const int from = lo + n * int(s) / {{.Splits}}, to = lo + n * (int(s) + 1) / {{.Splits}};
    device const float* qv = q + (ulong)t * {{.QW}}u + h * {{.HD}}u;
    const ulong row0 = (ulong)base[t]; // the query's slot's first cache row
    // -3e38 rather than -INFINITY: fast math may assume no infinities, and
    // exp(-3e38 - x) is 0 just the same.
    float m = -3.0e38f, l = 0.0f;
    float acc[{{.DV}}];
    for (uint d = 0; d < {{.DV}}u; ++d) {
        acc[d] = 0.0f;
    }
    for (int j = from + int(tiisg); j < to; j += 32) {
        device const {{.CacheT}}* kr = kc + (row0 + (ulong)j) * {{.KW}}u + kh * {{.HD}}u;
        float dot = 0.0f;
        for (uint i = 0; i < {{.HD}}u; ++i) {
            dot += qv[i] * float(kr[i]);
        }
        const float sc = dot * {{.Scale}};
        if (sc > m) {
            const float rs = exp(m - sc);
            l *= rs;
            for (uint d = 0; d < {{.DV}}u; ++d) {
                acc[d] *= rs;
            }
            m = sc;
        }
        const float wt = exp(sc - m);
        l += wt;
        device const {{.CacheT}}* vr = vc + (row0 + (ulong)j) * {{.VW}}u + kh * {{.DV}}u;
        for (uint d = 0; d < {{.DV}}u; ++d) {
            acc[d] += wt * float(vr[d]);
        }
    }
    const float mm = simd_max(m);
    const float rs = exp(m - mm);
    l = simd_sum(l * rs);
    device float* o = part + (((ulong)t * {{.H}}u + h) * {{.Splits}}u + s) * {{.PartW}}u;
    for (uint d = 0; d < {{.DV}}u; ++d) {
        const float a = simd_sum(acc[d] * rs);
        if (tiisg == 0) {
            o[2 + d] = a;
        }
    }
    if (tiisg == 0) {
        o[0] = mm;
        o[1] = l;
    }
}
`,
	// attn_merge: thread d of (head, query) merges the splits' partials
	// (and the sink, one more part without a value row).
	"attn_merge": `
// {{.Name}}: out[t, h·{{.DV}} + d] = merge of {{.Splits}} partials{{if .Sinks}} and sink[h]{{end}}.
kernel void {{.Name}}(
    device const float* part [[buffer(0)]],
{{- if .Sinks}}
    device const {{.SinkT}}* sinks [[buffer(1)]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint h = tgpig.x, t = tgpig.y, d = tiitg;
    device const float* pt = part + ((ulong)t * {{.H}}u + h) * {{.Splits}}u * {{.PartW}}u;
    float m = -3.0e38f;
    for (uint s = 0; s < {{.Splits}}u; ++s) {
        m = max(m, pt[s * {{.PartW}}u]);
    }{{if .Sinks}}
    m = max(m, float(sinks[h]));{{end}}
    float l = 0.0f, a = 0.0f;
    for (uint s = 0; s < {{.Splits}}u; ++s) {
        device const float* ps = pt + s * {{.PartW}}u;
        if (ps[1] > 0.0f) {
            const float r = exp(ps[0] - m);
            l += ps[1] * r;
            a += ps[2 + d] * r;
        }
    }{{if .Sinks}}
    l += exp(float(sinks[h]) - m);{{end}}
    if (d < {{.DV}}u) {
        out[(ulong)t * {{.OW}}u + h * {{.DV}}u + d] = a / l;
    }
}
`,
	// topk_softmax: one simdgroup per row of {{.E}} logits. K rounds of a
	// simdgroup arg-max (simd_max of the value, then simd_min of the index
	// among the lanes holding it, so equal logits pick the lower expert as
	// ir/eval's stable sort does) select the experts; the softmax is then
	// taken over the K selected logits and every other entry is 0.
	"topk_softmax": `
// {{.Name}}: out[r] = softmax over the {{.TopK}} largest of x[r] (ties → lower index), 0 elsewhere; {{.E}} experts.
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device float* out [[buffer(1)]],
` + sigTail + ` {
    const uint r = tgpig.y;
    device const float* xr = x + (ulong)r * {{.E}}u;
    float sv[{{.TopK}}];
    uint si[{{.TopK}}];
    for (uint k = 0; k < {{.TopK}}u; ++k) {
        float best = -3.0e38f;
        uint bi = {{.E}}u;
        for (uint i = tiisg; i < {{.E}}u; i += 32) {
            bool taken = false;
            for (uint q = 0; q < k; ++q) {
                taken = taken || si[q] == i;
            }
            if (!taken && (bi == {{.E}}u || xr[i] > best)) {
                best = xr[i];
                bi = i;
            }
        }
        const float m = simd_max(bi < {{.E}}u ? best : -3.0e38f);
        // Indices are below 2^24, so they travel through float exactly.
        const float cand = (bi < {{.E}}u && best == m) ? float(bi) : {{.E}}.0f;
        sv[k] = m;
        si[k] = uint(simd_min(cand));
    }
    float sum = 0.0f;
    for (uint k = 0; k < {{.TopK}}u; ++k) {
        sum += exp(sv[k] - sv[0]);
    }
    for (uint i = tiisg; i < {{.E}}u; i += 32) {
        float o = 0.0f;
        for (uint k = 0; k < {{.TopK}}u; ++k) {
            if (si[k] == i) {
                o = exp(sv[k] - sv[0]) / sum;
            }
        }
        out[(ulong)r * {{.E}}u + i] = o;
    }
}
`,
	// moe_up: the gate and up products of one selected expert. Threadgroup
	// (column block, slot s, token t) finds the expert of the s-th non-zero
	// route weight of token t (none: the whole group returns, uniformly), so
	// only selected experts' rows are read; simdgroup j computes gate row j
	// and up row j and stores act(g, u) in the scratch at [t, s, j].
	"moe_up": `
// {{.Name}}_expert returns the expert of the s-th non-zero weight of a route row, or -1.
inline int {{.Name}}_expert(device const float* rt, uint s) {
    uint seen = 0;
    for (uint i = 0; i < {{.E}}u; ++i) {
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
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device const float* route [[buffer(1)]],
    device const uchar* wg [[buffer(2)]],
    device const uchar* wu [[buffer(3)]],
{{- if .Bias}}
    device const {{.BiasT}}* bg [[buffer(4)]],
    device const {{.BiasT}}* bu [[buffer(5)]],
{{- end}}
    device float* act [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint j = tgpig.x * {{.NW}}u + sgitg, s = tgpig.y, t = tgpig.z;
    const int e = {{.Name}}_expert(route + (ulong)t * {{.E}}u, s);
    if (e < 0) {
        return; // fewer selected experts than slots: the same for every thread of the group
    }
    device const float* xr = x + (ulong)t * {{.K}}u;
    float g = 0.0f, up = 0.0f;
    if (j < {{.F}}u) {
        device const uchar* w = wg + (ulong)e * {{.ExpBytes}}u;{{template "dot" (dotArgs . "j" "g")}}
        w = wu + (ulong)e * {{.ExpBytes}}u;{{template "dot" (dotArgs . "j" "up")}}
    }
    g = simd_sum(g);
    up = simd_sum(up);
    if (j < {{.F}}u && tiisg == 0) {{"{"}}{{if .Bias}}
        g += float(bg[(ulong)e * {{.F}}u + j]);
        up += float(bu[(ulong)e * {{.F}}u + j]);{{end}}{{.ActBody}}
        act[((ulong)t * {{.Slots}}u + s) * {{.F}}u + j] = h;
    }
}
`,
	// moe_down: simdgroup j of token t sums, over the selected experts in
	// route order, route weight · (down_e[j]·h[t, s]{{if .Bias}} + bd[e, j]{{end}}).
	"moe_down": dotLoop + `
// {{.Name}}: out[t, j] = Σ over the selected experts e (slot s) of route[t, e]·(down_e[j]·h[t, s]{{if .Bias}} + bd[e, j]{{end}}),
// down {{.DT}}[{{.E}}, {{.D}}, {{.K}}], {{.Slots}} slots.
kernel void {{.Name}}(
    device const float* act [[buffer(0)]],
    device const float* route [[buffer(1)]],
    device const uchar* wd [[buffer(2)]],
{{- if .Bias}}
    device const {{.BiasT}}* bd [[buffer(3)]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint j = tgpig.x * {{.NW}}u + sgitg, t = tgpig.y;
    device const float* rt = route + (ulong)t * {{.E}}u;
    float acc = 0.0f;
    uint s = 0;
    // The loop bounds depend on the route row alone: uniform in the group.
    for (uint e = 0; e < {{.E}}u && s < {{.Slots}}u; ++e) {
        const float wt = rt[e];
        if (wt == 0.0f) {
            continue;
        }
        device const float* xr = act + ((ulong)t * {{.Slots}}u + s) * {{.K}}u;
        float y = 0.0f;
        if (j < {{.D}}u) {
            device const uchar* w = wd + (ulong)e * {{.ExpBytes}}u;{{template "dot" (dotArgs . "j" "y")}}
        }
        y = simd_sum(y);
        if (j < {{.D}}u) {
            acc += wt * (y{{if .Bias}} + float(bd[(ulong)e * {{.D}}u + j]){{end}});
        }
        ++s;
    }
    if (j < {{.D}}u && tiisg == 0) {
        out[(ulong)t * {{.D}}u + j] = acc;
    }
}
`,
	// rmsnorm: one simdgroup per row.
	"rmsnorm": `
// {{.Name}}: out[r] = x[r] / sqrt(mean(x[r]²) + eps){{if .Gain}} · gain{{end}}, width {{.K}}.
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
{{- if .Gain}}
    device const {{.GainT}}* gain [[buffer(1)]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint r = tgpig.y;
    device const float* xr = x + (ulong)r * {{.K}}u;` + `
    float ss = 0.0f;
    for (uint i = tiisg; i < {{.K}}u; i += 32) {
        ss += xr[i] * xr[i];
    }
    ss = simd_sum(ss);
    const float scale = rsqrt(ss / {{.K}}.0f + {{.Eps}});
    for (uint i = tiisg; i < {{.K}}u; i += 32) {
        out[(ulong)r * {{.K}}u + i] = xr[i] * scale{{if .Gain}} * gain[i]{{end}};
    }
}
`,
	// softmax: one simdgroup per row.
	"softmax": `
// {{.Name}}: out[r] = softmax(x[r]), width {{.K}}.
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device float* out [[buffer(1)]],
` + sigTail + ` {
    const uint r = tgpig.y;
    device const float* xr = x + (ulong)r * {{.K}}u;
    device float* o = out + (ulong)r * {{.K}}u;
    float m = -3.0e38f;
    for (uint i = tiisg; i < {{.K}}u; i += 32) {
        m = max(m, xr[i]);
    }
    m = simd_max(m);
    float sum = 0.0f;
    for (uint i = tiisg; i < {{.K}}u; i += 32) {
        sum += exp(xr[i] - m);
    }
    sum = simd_sum(sum);
    for (uint i = tiisg; i < {{.K}}u; i += 32) {
        o[i] = exp(xr[i] - m) / sum;
    }
}
`,
	// eltwise: add, mul (b broadcast over a's leading dims), silu, gelu; one thread per element.
	"eltwise": `
// {{.Name}}: out[i] = {{.Expr}}, {{.K}} elements per row.
kernel void {{.Name}}(
    device const float* a [[buffer(0)]],
{{- if .Binary}}
    device const {{.BT}}* b [[buffer(1)]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    const uint i = tgpig.x * {{.Threads}}u + tiitg, r = tgpig.y;
    if (i >= {{.K}}u) {
        return;
    }
    const ulong at = (ulong)r * {{.K}}u + i;
    const float x = a[at];{{if .Binary}}
    const float y = b[{{.BIndex}}];{{end}}
    out[at] = {{.Expr}};
}
`,
}

// tiledTemplate is the prefill matrix-matrix kernel of fused_matmul/matmul
// (matmul_tiled) and, with .F set, of swiglu (swiglu_tiled). Threadgroup
// (feature block, token block) computes out[t0 : t0+TileT, j0 : j0+TileN]:
//   - prologue: the RMSNorm scale of each of its TileT token rows (one
//     simdgroup per row, rows strided over the simdgroups);
//   - per K chunk of TileK: load stage, where the threads decode the TileN weight
//     rows' units of the chunk in registers (the dtype table's dq_*) into
//     threadgroup memory, transposed (sw[k·TileN + j]), and copy the activation
//     chunk (times the gain) into sx[t·TileK + k], zero past T, N and K; then
//     simdgroup s multiplies 8×8 tiles: acc[i] += sx[8i.., k..] · sw[k.., 8s..];
//   - the accumulators go through threadgroup memory (so) to the epilogue,
//     which applies the scale, bias and residual (or SiLU(gate)·up) to the
//     elements inside [T, N].
//
// Control flow around simd_sum, the simdgroup_matrix operations and the
// barriers is uniform in the threadgroup.
const tiledTemplate = `
// {{.Name}}: {{if .F}}h = {{if .Norm}}rmsnorm(x[t]){{if .Gain}}·gain{{end}}{{else}}x[t]{{end}} · wᵀ, out[t, j] = silu(h[j]) · h[{{.F}} + j]{{else}}out[t, j] = {{if .Norm}}rmsnorm(x[t]){{if .Gain}}·gain{{end}}{{else}}x[t]{{end}} · w[j]{{if .Bias}} + bias[j]{{end}}{{if .Residual}} + res[t, j]{{end}}{{end}}, w {{.DT}}[{{.N}}, {{.K}}];
// prefill: a {{.TileN}}-feature × {{.TileT}}-token tile per threadgroup, simdgroup_float8x8 products.
kernel void {{.Name}}(
    device const float* x [[buffer(0)]],
    device const uchar* w [[buffer(1)]],
{{- range .Extra}}
    device const {{.T}}* {{.Name}} [[buffer({{.Slot}})]],
{{- end}}
    device float* out [[buffer({{.OutSlot}})]],
` + sigTail + ` {
    threadgroup float sw[{{.TileK}} * {{.TileN}}]; // weight chunk, transposed: sw[k * {{.TileN}} + j]{{if .F}}
    threadgroup float su[{{.TileK}} * {{.TileN}}]; // up rows, likewise{{end}}
    threadgroup float sx[{{.TileT}} * {{.TileK}}]; // activation chunk: sx[t * {{.TileK}} + k]
    threadgroup float so[{{.TileT}} * {{.TileN}}]; // output tile: so[t * {{.TileN}} + j]{{if .F}}
    threadgroup float sv[{{.TileT}} * {{.TileN}}]; // up output tile{{end}}{{if .Norm}}
    threadgroup float sscale[{{.TileT}}];{{end}}
    const uint j0 = tgpig.x * {{.TileN}}u, t0 = tgpig.y * {{.TileT}}u;{{if .Norm}}
    // RMSNorm prologue: simdgroup s reduces token rows s, s + {{.NW}}, ...
    for (uint tt = sgitg; tt < {{.TileT}}u; tt += {{.NW}}u) {
        float ss = 0.0f;
        if (t0 + tt < T) {
            device const float* xr = x + (ulong)(t0 + tt) * {{.K}}u;
            for (uint i = tiisg; i < {{.K}}u; i += 32) {
                ss += xr[i] * xr[i];
            }
        }
        ss = simd_sum(ss);
        if (tiisg == 0) {
            sscale[tt] = rsqrt(ss / {{.K}}.0f + {{.Eps}});
        }
    }{{end}}
    simdgroup_float8x8 acc[{{.TileT}} / 8];{{if .F}}
    simdgroup_float8x8 accu[{{.TileT}} / 8];{{end}}
    for (uint i = 0; i < {{.TileT}}u / 8; ++i) {
        acc[i] = make_filled_simdgroup_matrix<float, 8>(0.0f);{{if .F}}
        accu[i] = make_filled_simdgroup_matrix<float, 8>(0.0f);{{end}}
    }
    for (uint k0 = 0; k0 < {{.K}}u; k0 += {{.TileK}}u) {
        // Load stage: weight units decoded in registers, stored transposed.
        for (uint i = tiitg; i < {{.TileN}}u * {{.UPC}}u; i += {{.Threads}}u) {
            const uint jj = i / {{.UPC}}u, uu = i % {{.UPC}}u, j = j0 + jj, u = k0 / {{.Unit}}u + uu;
            float wv[{{.Unit}}];{{if .F}}
            float uv[{{.Unit}}];{{end}}
            if (j < {{if .F}}{{.F}}{{else}}{{.N}}{{end}}u && u < {{.NU}}u) {
                dq_{{.DT}}(w + (ulong)j * {{.RowBytes}}u, u, wv);{{if .F}}
                dq_{{.DT}}(w + (ulong)(j + {{.F}}u) * {{.RowBytes}}u, u, uv);{{end}}
            } else {
                for (uint k = 0; k < {{.Unit}}u; ++k) {
                    wv[k] = 0.0f;{{if .F}}
                    uv[k] = 0.0f;{{end}}
                }
            }
            for (uint k = 0; k < {{.Unit}}u; ++k) {
                sw[(uu * {{.Unit}}u + k) * {{.TileN}}u + jj] = wv[k];{{if .F}}
                su[(uu * {{.Unit}}u + k) * {{.TileN}}u + jj] = uv[k];{{end}}
            }
        }
        for (uint i = tiitg; i < {{.TileT}}u * {{.TileK}}u; i += {{.Threads}}u) {
            const uint t = t0 + i / {{.TileK}}u, k = k0 + i % {{.TileK}}u;
            sx[i] = (t < T && k < {{.K}}u) ? x[(ulong)t * {{.K}}u + k]{{if .Gain}} * gain[k]{{end}} : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < {{.TileK}}u; kk += 8) {
            simdgroup_float8x8 b;
            simdgroup_load(b, sw + kk * {{.TileN}}u + sgitg * 8, {{.TileN}});{{if .F}}
            simdgroup_float8x8 bu;
            simdgroup_load(bu, su + kk * {{.TileN}}u + sgitg * 8, {{.TileN}});{{end}}
            for (uint i = 0; i < {{.TileT}}u / 8; ++i) {
                simdgroup_float8x8 a;
                simdgroup_load(a, sx + i * 8 * {{.TileK}}u + kk, {{.TileK}});
                simdgroup_multiply_accumulate(acc[i], a, b, acc[i]);{{if .F}}
                simdgroup_multiply_accumulate(accu[i], a, bu, accu[i]);{{end}}
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup); // the next load overwrites sw and sx
    }
    for (uint i = 0; i < {{.TileT}}u / 8; ++i) {
        simdgroup_store(acc[i], so + i * 8 * {{.TileN}}u + sgitg * 8, {{.TileN}});{{if .F}}
        simdgroup_store(accu[i], sv + i * 8 * {{.TileN}}u + sgitg * 8, {{.TileN}});{{end}}
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Epilogue over the tile's elements inside [T, {{if .F}}{{.F}}{{else}}{{.N}}{{end}}].
    for (uint i = tiitg; i < {{.TileT}}u * {{.TileN}}u; i += {{.Threads}}u) {
        const uint tt = i / {{.TileN}}u, t = t0 + tt, j = j0 + i % {{.TileN}}u;
{{- if .F}}
        if (t < T && j < {{.F}}u) {
            float g = so[i], up = sv[i];{{if .Norm}}
            g *= sscale[tt];
            up *= sscale[tt];{{end}}
            out[(ulong)t * {{.F}}u + j] = g / (1.0f + exp(-g)) * up;
        }
{{- else}}
        if (t < T && j < {{.N}}u) {
            out[(ulong)t * {{.N}}u + j] = {{if .Norm}}so[i] * sscale[tt]{{else}}so[i]{{end}}{{if .Bias}} + bias[j]{{end}}{{if .Residual}} + res[(ulong)t * {{.N}}u + j]{{end}};
        }
{{- end}}
    }
}
`
