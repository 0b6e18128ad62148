package cuda

// attnPrefillTemplates holds attn_prefill: attention of prefill steps
// (T ≥ 2) on the tensor cores, over an f16 cache (gpu.Emitter.attention
// chooses it where the language has it and the shapes fit; attn_split
// with one warp per query remains for the rest).
//
// Why. attn_split gives every (query, head, split) a warp that reads its
// keys and values itself and sums each score with a warp_sum: a 512-token
// 7B prefill reads each layer's cache rows once per query from L2 and
// spent 12.2 of 58 ms a step in it on an H200. Here a block of 4 warps
// takes 64 queries of one head and walks the key range in tiles of 32 rows
// staged once in shared memory for all of them; scores and the weighted
// sum of values are m16n8k16 mmas.
//
// Numerics. The cache holds f16 values, exact as mma operands. The f32
// queries go in as f16 hi + lo (two mmas; the dropped part is below 2^-22
// relative), the probabilities likewise, so scores and sums keep f32
// accuracy as ir/eval's. Softmax is online per 32-key tile (row maximum m,
// sum l), and the block writes each query's partial (m, l, acc) as split 0
// of attn_split's layout, with l = 0 (attn_merge skips such a part) for
// the other splits: the merge is unchanged.
//
// Slots. The rows of one step may belong to several sequences (batched
// steps), each with its own cache base: the block runs one pass per
// distinct base among its queries, over the key range of that pass's
// queries, the others masked out.
//
// Fragments (PTX ISA 9.7.14.5.8, as mma_16816): warp w owns queries
// 16w .. 16w+15 of the tile, lane (g, q) rows g and g + 8; the scores of a
// 16 × 32 tile come out as four n8 tiles whose C fragments are exactly the
// A fragments of the next product (keys 2q, 2q + 1 and 2q + 8, 2q + 9 of
// each k16 step), so probabilities never leave registers.
var attnPrefillTemplates = map[string]string{
	"attn_prefill": `
// {{.Name}}: attention of 64 queries × head h, head_dim {{.HD}}, Dv {{.DV}}, GQA group {{.Group}}{{if .Window}}, window {{.Window}}{{end}},
// f16 cache, on the tensor cores; the partials of split 0 of {{.Splits}} (the others empty).
extern "C" __global__ void __launch_bounds__(128) {{.Name}}(
    const float* __restrict__ q,
    const f16* __restrict__ kc,
    const f16* __restrict__ vc,
    const int* __restrict__ pos,
    const int* __restrict__ base,
    float* __restrict__ part,
    const u32 T) {` + ids + `
    const u32 h = blockIdx.x, t0 = blockIdx.y * 64u, kh = h / {{.Group}}u;
    const u32 g = lane >> 2, qi = lane & 3u;
    __shared__ v16 ksv[32 * ({{.HD}} / 2 + 4) / 4]; // key tile, f16x2 words, row stride HD/2 + 4 (16-byte aligned)
    u32* ks = (u32*)ksv;
    __shared__ u16 vt[{{.DV}} * 40];               // value tile transposed: [dv][key], row stride 40 halves
    __shared__ int rbase[64], rpos[64], rlo[64];
    __shared__ int first[64], span[2][2];
    // Per query row of the tile: its slot's base, position and first visible key.
    if (tid < 64u) {
        const u32 t = t0 + tid;
        int b = -1, p = 0, lo = 0;
        if (t < T) {
            b = base[t];
            p = pos[t];{{if .Window}}
            lo = p - {{.Window}} + 1 > 0 ? p - {{.Window}} + 1 : 0;{{end}}
        }
        rbase[tid] = b;
        rpos[tid] = p;
        rlo[tid] = lo;
    }
    __syncthreads();
    // first[r]: row r is the first row of its base (a pass starts there).
    if (tid < 64u) {
        int f = rbase[tid] >= 0;
        for (u32 r = 0; r < tid; ++r) {
            if (rbase[r] == rbase[tid]) {
                f = 0;
            }
        }
        first[tid] = f;
    }
    __syncthreads();
    for (u32 lead = 0; lead < 64u; ++lead) {
        if (!first[lead]) {
            continue;
        }
        const int B = rbase[lead];
        // The pass's key range: min lo and max pos over its rows (warps 0 and 1 reduce 32 rows each).
        if (warp < 2u) {
            const u32 r = warp * 32u + lane;
            int mn = 0x7fffffff, mx = -1;
            if (rbase[r] == B) {
                mn = rlo[r];
                mx = rpos[r];
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                const int on = int(__shfl_xor_sync(0xffffffffu, u32(mn), o));
                mn = on < mn ? on : mn;
                const int ox = int(__shfl_xor_sync(0xffffffffu, u32(mx), o));
                mx = ox > mx ? ox : mx;
            }
            if (lane == 0) {
                span[warp][0] = mn;
                span[warp][1] = mx;
            }
        }
        __syncthreads();
        const int jmin = span[0][0] < span[1][0] ? span[0][0] : span[1][0];
        const int jmax = span[0][1] > span[1][1] ? span[0][1] : span[1][1];
        // This lane's two rows: active in the pass, their key ranges.
        const u32 r0 = warp * 16u + g, r1 = r0 + 8u;
        const bool a0 = rbase[r0] == B, a1 = rbase[r1] == B;
        const int p0 = rpos[r0], p1 = rpos[r1], lo0 = rlo[r0], lo1 = rlo[r1];
        // The warp's key range (its rows' union): tiles outside it are skipped.
        int wlo = a0 ? lo0 : 0x7fffffff, whi = a0 ? p0 : -1;
        if (a1) {
            wlo = lo1 < wlo ? lo1 : wlo;
            whi = p1 > whi ? p1 : whi;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const int ol = int(__shfl_xor_sync(0xffffffffu, u32(wlo), o)), oh = int(__shfl_xor_sync(0xffffffffu, u32(whi), o));
            wlo = ol < wlo ? ol : wlo;
            whi = oh > whi ? oh : whi;
        }
        // Queries as f16 hi/lo A fragments, k16 step k: dims 16k + 2qi (+1), +8.
        u32 qh[{{.HD}} / 16][4], ql[{{.HD}} / 16][4];
#pragma unroll
        for (u32 k = 0; k < {{.HD}}u / 16u; ++k) {
#pragma unroll
            for (u32 r = 0; r < 4u; ++r) {
                const u32 row = (r & 1u) ? r1 : r0, d = 16u * k + 2u * qi + 8u * (r >> 1);
                float v0 = 0.0f, v1 = 0.0f;
                if ((r & 1u) ? a1 : a0) {
                    const float* qr = q + (u64)(t0 + row) * {{.QW}}u + h * {{.HD}}u + d;
                    v0 = qr[0];
                    v1 = qr[1];
                }
                const f16 h0 = f2h(v0), h1 = f2h(v1);
                qh[k][r] = u32(h0) | (u32(h1) << 16);
                ql[k][r] = u32(f2h(v0 - h2f(h0))) | (u32(f2h(v1 - h2f(h1))) << 16);
            }
        }
        float m[2] = {-3.0e38f, -3.0e38f}, l[2] = {0.0f, 0.0f};
        float o[{{.DV}} / 8][4];
#pragma unroll
        for (u32 n = 0; n < {{.DV}}u / 8u; ++n) {
#pragma unroll
            for (u32 i = 0; i < 4u; ++i) {
                o[n][i] = 0.0f;
            }
        }
        const u64 row0 = (u64)B;
        for (int j0 = jmin; j0 <= jmax; j0 += 32) {
            // Stage keys j0 .. j0+31 (16-byte loads) and the values transposed; rows past jmax are zeros.
            for (u32 i = tid; i < 32u * ({{.HD}}u / 8u); i += 128u) {
                const u32 jj = i / ({{.HD}}u / 8u), c = i % ({{.HD}}u / 8u);
                v16 kv = {0, 0, 0, 0};
                if (j0 + int(jj) <= jmax) {
                    kv = ld16((const v16*)(kc + (row0 + (u64)(j0 + int(jj))) * {{.KW}}u + kh * {{.HD}}u + 8u * c));
                }
                *(v16*)(ks + jj * ({{.HD}}u / 2u + 4u) + 4u * c) = kv;
            }
            for (u32 i = tid; i < 32u * ({{.DV}}u / 8u); i += 128u) {
                const u32 jj = i / ({{.DV}}u / 8u), c = i % ({{.DV}}u / 8u);
                v16 vv = {0, 0, 0, 0};
                if (j0 + int(jj) <= jmax) {
                    vv = ld16((const v16*)(vc + (row0 + (u64)(j0 + int(jj))) * {{.VW}}u + kh * {{.DV}}u + 8u * c));
                }
                const u32 w4[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
                for (u32 e = 0; e < 8u; ++e) {
                    vt[(8u * c + e) * 40u + jj] = u16(w4[e >> 1] >> (16u * (e & 1u)));
                }
            }
            __syncthreads();
            if (j0 <= whi && j0 + 31 >= wlo) {
                // Scores: 16 queries × 32 keys, four n8 tiles.
                float s[4][4];
#pragma unroll
                for (u32 n = 0; n < 4u; ++n) {
#pragma unroll
                    for (u32 i = 0; i < 4u; ++i) {
                        s[n][i] = 0.0f;
                    }
#pragma unroll
                    for (u32 k = 0; k < {{.HD}}u / 16u; ++k) {
                        const u32 at = (8u * n + g) * ({{.HD}}u / 2u + 4u) + 8u * k + qi;
                        const u32 b[2] = {ks[at], ks[at + 4u]};
                        mma_16816(s[n], ql[k], b);
                        mma_16816(s[n], qh[k], b);
                    }
                }
                // Scale, mask, online softmax per row (a row's 32 scores lie in the lanes of one quad).
                float mx[2] = {m[0], m[1]};
#pragma unroll
                for (u32 n = 0; n < 4u; ++n) {
#pragma unroll
                    for (u32 i = 0; i < 4u; ++i) {
                        const int j = j0 + int(8u * n + 2u * qi + (i & 1u));
                        const bool ok = (i >> 1) ? (a1 && j >= lo1 && j <= p1) : (a0 && j >= lo0 && j <= p0);
                        s[n][i] = ok ? s[n][i] * {{.Scale}} : -3.0e38f;
                        mx[i >> 1] = fmaxf(mx[i >> 1], s[n][i]);
                    }
                }
#pragma unroll
                for (u32 e = 0; e < 2u; ++e) {
                    mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 1));
                    mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 2));
                }
                const float rs[2] = {expf(m[0] - mx[0]), expf(m[1] - mx[1])};
                m[0] = mx[0];
                m[1] = mx[1];
                l[0] *= rs[0];
                l[1] *= rs[1];
#pragma unroll
                for (u32 n = 0; n < {{.DV}}u / 8u; ++n) {
                    o[n][0] *= rs[0];
                    o[n][1] *= rs[0];
                    o[n][2] *= rs[1];
                    o[n][3] *= rs[1];
                }
                // Probabilities as f16 hi/lo A fragments of the two k16 steps over the keys.
                u32 ph[2][4], pl[2][4];
#pragma unroll
                for (u32 n = 0; n < 4u; ++n) {
                    float pv[4];
#pragma unroll
                    for (u32 i = 0; i < 4u; ++i) {
                        pv[i] = s[n][i] > -1.0e38f ? expf(s[n][i] - m[i >> 1]) : 0.0f;
                        l[i >> 1] += pv[i];
                    }
#pragma unroll
                    for (u32 e = 0; e < 2u; ++e) {
                        // n even: keys 2qi.. of the k16 step (regs 0, 1); odd: 2qi + 8.. (regs 2, 3).
                        const f16 h0 = f2h(pv[2 * e]), h1 = f2h(pv[2 * e + 1]);
                        ph[n >> 1][2u * (n & 1u) + e] = u32(h0) | (u32(h1) << 16);
                        pl[n >> 1][2u * (n & 1u) + e] = u32(f2h(pv[2 * e] - h2f(h0))) | (u32(f2h(pv[2 * e + 1] - h2f(h1))) << 16);
                    }
                }
                // Values: o += p · v, B fragments from the transposed tile (keys 2qi (+1), +8 of dv g).
#pragma unroll
                for (u32 n = 0; n < {{.DV}}u / 8u; ++n) {
#pragma unroll
                    for (u32 k = 0; k < 2u; ++k) {
                        const u16* vr = vt + (8u * n + g) * 40u + 16u * k + 2u * qi;
                        const u32 b[2] = {u32(vr[0]) | (u32(vr[1]) << 16), u32(vr[8]) | (u32(vr[9]) << 16)};
                        mma_16816(o[n], pl[k], b);
                        mma_16816(o[n], ph[k], b);
                    }
                }
            }
            __syncthreads(); // the next tile overwrites ks and vt
        }
        // Partials: the quad's sums of l; lane (g, qi) holds dv 8n + 2qi (+1) of rows r0, r1.
#pragma unroll
        for (u32 e = 0; e < 2u; ++e) {
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 1);
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 2);
        }
#pragma unroll
        for (u32 e = 0; e < 2u; ++e) {
            if (e ? a1 : a0) {
                const u32 t = t0 + (e ? r1 : r0);
                float* pt = part + ((u64)t * {{.H}}u + h) * {{.Splits}}u * {{.PartW}}u;
#pragma unroll
                for (u32 n = 0; n < {{.DV}}u / 8u; ++n) {
                    pt[2u + 8u * n + 2u * qi] = o[n][2u * e];
                    pt[2u + 8u * n + 2u * qi + 1u] = o[n][2u * e + 1u];
                }
                if (qi == 0u) {
                    pt[0] = m[e];
                    pt[1] = l[e];
                }
                for (u32 s = 1u + qi; s < {{.Splits}}u; s += 4u) {
                    pt[s * {{.PartW}}u] = -3.0e38f;
                    pt[s * {{.PartW}}u + 1u] = 0.0f;
                }
            }
        }
        __syncthreads(); // span is reused by the next pass
    }
}
`,
}
