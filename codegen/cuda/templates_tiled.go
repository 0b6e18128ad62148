package cuda

// The prefill kernels: tiled matrix-matrix products on the tensor cores
// (mma.sync m16n8k16, f16 inputs, f32 accumulators), for steps of T ≥ 2
// tokens. The matrix-vector kernels read every weight once per token; these
// read each weight tile once per tileT tokens.
//
// Precision. ir/eval multiplies f32 activations by the f32 dequantized
// weights, and the golden tests demand the same tokens for F32 and F16
// models, so one f16 rounding of the activations (2^-11 relative) is not
// good enough. Each activation a goes in as two f16 values, hi = f16(a) and
// lo = f16(a − hi), and the tensor cores compute hi·w + lo·w: a product of
// f16 values is exact in f32, so the only errors left are lo's own rounding
// (2^-22 relative to a), the f32 accumulation (as in the matrix-vector
// kernels) and the weight's conversion to f16:
//   - F16 weights: exact; BF16 (8 significant bits) and MXFP4 (≤ 2
//     significant bits times a power of two): exact inside f16's range;
//   - the other quantized weights: the dequantized value d·q (+ m) in f32
//     has up to 24 significant bits (a Q4_0 d·q: 11 + 3), so f16 rounds it
//     by up to 2^-11 relative (measured: 1.5e-4 to 3e-4 of max |ref|, above
//     even the matrix-vector tolerance); the weights are split like the
//     activations (w = hi + lo) and a third product hi_a·lo_w added, which
//     makes them exact to 2^-22 as well;
//   - F32 weights: the same split.
// The dropped lo_a·lo_w is below 2^-22 of a·w. So F16, BF16 and MXFP4 cost
// two mmas per tile and the rest three (splitWeights). A cheaper exact
// scheme for the block-quantized dtypes would feed the small integer codes
// (exact in f16) to the mma and apply each sub-block's scale and min to a
// per-k16 partial sum, as llama.cpp's mmq does — two mmas, but a second
// decoder per dtype; not done yet.
//
// Rounding. For Q4_0 and Q8_0 weights (RoundQ8) the activations are first
// rounded to Q8_0 blocks as the matrix-vector kernels' q8_quant launch and
// the reference engines round them — a chunk is one block, its 16 pairs on
// 16 lanes — and the rounded values q·d (7 + 11 significant bits) go
// through the split exactly: a prefill step multiplies what a one-token
// step multiplies, and the row scale s then comes from the normalised row
// (the RMSNorm scale applied before the rounding, not in the epilogue).
// Emulated golden case, llama-p-Q4_0's 13-token prompt as one batch: 1.7e-2
// of max |ref| at every position before, 7e-7 at positions 0–7 after, and
// up to 1.1e-2 from position 8 on, where the batched and one-token
// attention kernels first sum in different orders and a rounding can flip.
//
// Range. f16 overflows past 65504 and loses relative precision below 2^-14
// (subnormals, absolute spacing 2^-24). The activations are therefore scaled
// per token row by a power of two s (exact) that brings the row's largest
// |x·gain| into [2^13, 2^14): hi never overflows, and lo's subnormal spacing
// is 2^-38 of the row's largest element. The epilogue multiplies by 1/s
// (exact), folded with the RMSNorm scale unless the rows were rounded. The
// weights are not scaled: a weight's lo part is subnormal below |w| < 2^-3,
// where its absolute error is at most 2^-25 — relative to typical LLM weight
// magnitudes (0.01 to 1) a few 1e-7 of a dot product; weights of magnitude
// ≥ 65504 would overflow to inf (none in practice). Alternatives: 3×TF32
// (m16n8k8) has f32's range and needs no scaling, but tf32 runs at half the
// f16 rate, so it costs twice as much; bf16 (8 bits) needs three terms per
// operand for 24 bits. The f16 split with a row scale is the cheapest that
// meets the tolerances.
//
// Block shape: 128 threads (4 warps) per block, a tile of tileT = 64 tokens ×
// tileN = 64 features, K in chunks of tileK = 32 (one quantized block per
// weight row). Warp w owns tokens 32·(w >> 1) .. +31 and features
// 32·(w & 1) .. +31 as 2 × 4 m16n8 accumulator tiles.
//   - prologue: per token row of the tile, the RMSNorm sum of squares and
//     the row scale s (one warp per row, rows strided over the warps);
//   - load stage, per K chunk: the activations (× gain × s) split into f16
//     hi/lo pairs in shared memory (xh, xl: [64 rows][16 f16x2 words], row
//     stride 20 words so that the 32 lanes' fragment reads — row g, word q —
//     hit 32 distinct banks), and the weights dequantized by the dtype's
//     dq_* decoder in registers, converted (hi, and lo where split) and
//     stored the same way per feature row (wh, wl; uh, ul for swiglu's up
//     rows), zero past T, N and K;
//   - compute: two k16 steps of mmas per chunk;
//   - epilogue: each lane's accumulator elements (token, feature) straight
//     from registers to out, times the row's 1/s·RMSNorm scale, plus bias
//     and residual (or SiLU(gate)·up: the gate and up accumulators of a
//     feature sit in the same lane).
// Control flow around the barriers and mmas is uniform in the block.

// mmaPrelude goes at the end of the library prelude: the tensor-core mma and
// the f16x2 packing the tiled kernels use.
const mmaPrelude = `
// mma_16816 is D = A·B + C on the tensor cores: A 16×16 f16 (row-major), B
// 16×8 f16 (col-major), C and D 16×8 f32, each lane holding the fragments
// the PTX ISA lays out for mma.m16n8k16 (section 9.7.14.5.8); c is C in and
// D out. Needs sm_80. The emulation (cudaemu.h) implements it for the CPU.
__device__ __forceinline__ void mma_16816(float* c, const u32* a, const u32* b) {
#ifdef MINERVA_CUDA_EMU
    cudaemu::mma_16816(c, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// mma_16832_s8 is D = A·B + C on the tensor cores in integers: A 16×32 s8
// (row-major), B 32×8 s8 (col-major), C and D 16×8 s32, the fragments
// those of the PTX ISA for mma.m16n8k32 with .s8 operands: A register r
// holds row g + 8·(r & 1), k 4q + 16·(r >> 1) + byte; B register r holds k
// 4q + 16r + byte of column g; C and D as mma_16816's. Exact (no
// saturation: |Σ| ≤ 32·128·128). Needs sm_80; cudaemu.h implements it for
// the CPU.
__device__ __forceinline__ void mma_16832_s8(int* c, const u32* a, const u32* b) {
#ifdef MINERVA_CUDA_EMU
    cudaemu::mma_16832_s8(c, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// s8_nibbles turns the low nibbles n of w's four bytes into the s8 values
// n − 8 (Q4_0's codes): each byte (n | 0x80) − 8 borrows from nothing, and
// flipping bit 7 back gives n − 8 in two's complement.
__device__ __forceinline__ u32 s8_nibbles(u32 w) {
    return (((w & 0x0F0F0F0Fu) | 0x80808080u) - 0x08080808u) ^ 0x80808080u;
}

// s8_q5 turns the low nibbles n of w's four bytes, with fifth bits from bits
// 0–3 of hb (q5_hi), into the s8 values n + 16·bit − 16 (Q5_0's codes), as
// s8_nibbles does with 8.
__device__ __forceinline__ u32 s8_q5(u32 w, u32 hb) {
    return ((((w & 0x0F0F0F0Fu) | q5_hi(hb)) | 0x80808080u) - 0x10101010u) ^ 0x80808080u;
}

// ld16 loads 16 bytes (p 16-byte aligned) of an activation row; ld_w32 a
// 4-byte aligned word of a weight row. Under MINERVA_CUDA_EMU both check
// the alignment.
__device__ __forceinline__ v16 ld16(const v16* p) {
#ifdef MINERVA_CUDA_EMU
    return cudaemu::ld_aligned(p);
#else
    return *p;
#endif
}

__device__ __forceinline__ u32 ld_w32(const u32* p) {
#ifdef MINERVA_CUDA_EMU
    return cudaemu::ld_aligned(p);
#else
    return *p;
#endif
}

// half_warp_max is the largest v over the 16 lanes of the calling lane's
// half of the warp (lanes 0–15 or 16–31), in every lane of that half.
__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}

// st_f16x2 stores v0, v1 (consecutive in K) as one f16x2 word of an mma
// operand in shared memory, v0 in the low half; st_f16x2_split also stores
// the rounding remainders (lo = f16(v − f16(v))) at the same place of lo.
__device__ __forceinline__ void st_f16x2(u32* hi, u32 at, float v0, float v1) {
    hi[at] = u32(f2h(v0)) | (u32(f2h(v1)) << 16);
}

__device__ __forceinline__ void st_f16x2_split(u32* hi, u32* lo, u32 at, float v0, float v1) {
    const f16 h0 = f2h(v0), h1 = f2h(v1);
    hi[at] = u32(h0) | (u32(h1) << 16);
    lo[at] = u32(f2h(v0 - h2f(h0))) | (u32(f2h(v1 - h2f(h1))) << 16);
}
`

// Tile sizes of the prefill kernels (see above); tileStride is the shared
// row stride in f16x2 words (tileK/2 plus 4 words of padding).
const (
	tileT      = 64
	tileN      = 64
	tileK      = 32
	tileStride = tileK/2 + 4
)

// tiledTemplate renders matmul_tiled and, with .F set, swiglu_tiled. It
// sees a tiledParams.
const tiledTemplate = `
// {{.Name}}: {{if .F}}h = {{if .Norm}}rmsnorm(x[t]){{if .Gain}}·gain{{end}}{{else}}x[t]{{end}} · wᵀ, out[t, j] = silu(h[j]) · h[{{.F}} + j]{{else}}out[t, j] = {{if .Norm}}rmsnorm(x[t]){{if .Gain}}·gain{{end}}{{else}}x[t]{{end}} · w[j]{{if .Bias}} + bias[j]{{end}}{{if .Residual}} + res[t, j]{{end}}{{end}}, w {{.DT}}[{{.N}}, {{.K}}];
// prefill: a {{.TileT}}-token × {{.TileN}}-feature tile per block, mma.m16n8k16 with split f16 activations{{if .SplitW}} and weights{{end}}.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ x,
    const u8* __restrict__ w,` + extraParams + `
    float* __restrict__ out,
    const u32 T) {` + ids + `
    __shared__ u32 xh[{{.TileT}} * {{.Stride}}], xl[{{.TileT}} * {{.Stride}}]; // activations, f16x2 hi and lo
    __shared__ u32 wh[{{.TileN}} * {{.Stride}}];{{if .SplitW}}
    __shared__ u32 wl[{{.TileN}} * {{.Stride}}];{{end}}{{if .F}}
    __shared__ u32 uh[{{.TileN}} * {{.Stride}}];{{if .SplitW}}
    __shared__ u32 ul[{{.TileN}} * {{.Stride}}];{{end}}{{end}}
    __shared__ float xs[{{.TileT}}]; // per token row: the power of two s the activations are scaled by
    __shared__ float rs[{{.TileT}}]; // and the epilogue's 1/s{{if and .Norm (not .RoundQ8)}} · RMSNorm scale{{end}}{{if and .Norm .RoundQ8}}
    __shared__ float ns[{{.TileT}}]; // the RMSNorm scale, applied before the rounding{{end}}
    const u32 j0 = blockIdx.x * {{.TileN}}u, t0 = blockIdx.y * {{.TileT}}u;
    const u32 g = lane >> 2, q = lane & 3u;      // the mma's groupID and threadID_in_group
    const u32 wm = warp >> 1, wn = warp & 1u;    // the warp's 32 tokens and 32 features
    // Prologue: warp w reduces token rows w, w + {{.NW}}, ...
    for (u32 r = warp; r < {{.TileT}}u; r += {{.NW}}u) {
        float mx = 0.0f;{{if .Norm}}
        float ss = 0.0f;{{end}}
        if (t0 + r < T) {
            const float* xr = x + (u64)(t0 + r) * {{.K}}u;
            for (u32 i = lane; i < {{.K}}u; i += 32) {
                const float v = xr[i]{{if .Gain}} * ldf(gain[i]){{end}};
                mx = fmaxf(mx, fmaxf(v, -v));{{if .Norm}}
                ss += xr[i] * xr[i];{{end}}
            }
        }
        mx = warp_max(mx);{{if .Norm}}
        ss = warp_sum(ss);{{end}}
        if (lane == 0) {
            // mx in [2^(e-127), 2^(e-126)): s = 2^(140-e) puts it in [2^13, 2^14).
            // e ≥ 14 keeps s and 1/s normal (rows below 2^-113 are zeros in effect).
{{- if and .RoundQ8 .Norm}}
            // The rounded row is the normalised one: s from its largest value.
            const float nsc = rsqrtf(ss / {{.K}}.0f + {{.Eps}});
            ns[r] = nsc;
            mx *= nsc;{{end}}
            u32 e = (__float_as_uint(mx) >> 23) & 255u;
            e = e < 14u ? 14u : e;
            xs[r] = __uint_as_float((267u - e) << 23);
            rs[r] = __uint_as_float((e - 13u) << 23){{if and .Norm (not .RoundQ8)}} * rsqrtf(ss / {{.K}}.0f + {{.Eps}}){{end}};
        }
    }
    float acc[2][4][4];{{if .F}}
    float accu[2][4][4];{{end}}
#pragma unroll
    for (u32 mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (u32 ni = 0; ni < 4; ++ni) {
#pragma unroll
            for (u32 i = 0; i < 4; ++i) {
                acc[mi][ni][i] = 0.0f;{{if .F}}
                accu[mi][ni][i] = 0.0f;{{end}}
            }
        }
    }
    __syncthreads(); // xs is ready
    for (u32 k0 = 0; k0 < {{.K}}u; k0 += {{.TileK}}u) {
        // Load stage: activations (× gain) × s as f16 hi/lo pairs.
        for (u32 i = tid; i < {{.TileT}}u * {{.Half}}u; i += {{.Threads}}u) {
            const u32 r = i / {{.Half}}u, c = i % {{.Half}}u, t = t0 + r, k = k0 + 2 * c;
            float v0 = 0.0f, v1 = 0.0f;
            if (t < T) {
                const float* xr = x + (u64)t * {{.K}}u;
                if (k < {{.K}}u) {
                    v0 = xr[k]{{if and .RoundQ8 .Norm}} * ns[r]{{end}}{{if .Gain}} * ldf(gain[k]){{end}};
                }
                if (k + 1 < {{.K}}u) {
                    v1 = xr[k + 1]{{if and .RoundQ8 .Norm}} * ns[r]{{end}}{{if .Gain}} * ldf(gain[k + 1]){{end}};
                }
            }{{if .RoundQ8}}
            // The chunk is one Q8_0 block of the row, its {{.Half}} pairs on
            // {{.Half}} consecutive lanes: rounded as q8_quant rounds it (the
            // matrix-vector kernels' activations, and the reference's), then
            // the rounded values q·d go in, exact in the hi/lo split.
            const float amax = half_warp_max(fmaxf(fmaxf(v0, -v0), fmaxf(v1, -v1)));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f, dq = h2f(f2h(d));
            v0 = roundf(v0 * id) * dq;
            v1 = roundf(v1 * id) * dq;{{end}}
            st_f16x2_split(xh, xl, r * {{.Stride}}u + c, v0 * xs[r], v1 * xs[r]);
        }
        // Load stage: weight rows dequantized in registers (dq_{{.DT}}), stored as f16{{if .SplitW}} hi/lo{{end}}.
{{- if eq .Unit 1}}
        for (u32 i = tid; i < {{.Mats}}u * {{.TileN}}u * {{.Half}}u; i += {{.Threads}}u) {
            const u32 m = i / ({{.TileN}}u * {{.Half}}u), jj = i / {{.Half}}u % {{.TileN}}u, c = i % {{.Half}}u;
            const u32 j = j0 + jj, k = k0 + 2 * c;
            float wv[2] = {0.0f, 0.0f};
            if (j < {{.Width}}u) {
                const u8* row = w + (u64)(j + m * {{.Width}}u) * {{.RowBytes}}u;
                if (k < {{.K}}u) {
                    dq_{{.DT}}(row, k, wv);
                }
                if (k + 1 < {{.K}}u) {
                    dq_{{.DT}}(row, k + 1, wv + 1);
                }
            }
            const u32 at = jj * {{.Stride}}u + c;
            const float v0 = wv[0], v1 = wv[1];
            {{template "store" .}}
        }
{{- else}}
        for (u32 i = tid; i < {{.Mats}}u * {{.TileN}}u; i += {{.Threads}}u) {
            const u32 m = i / {{.TileN}}u, jj = i % {{.TileN}}u, j = j0 + jj;
            float wv[{{.Unit}}];
            if (j < {{.Width}}u) {
                dq_{{.DT}}(w + (u64)(j + m * {{.Width}}u) * {{.RowBytes}}u, k0 / {{.Unit}}u, wv);
            } else {
#pragma unroll
                for (u32 k = 0; k < {{.Unit}}u; ++k) {
                    wv[k] = 0.0f;
                }
            }
#pragma unroll
            for (u32 c = 0; c < {{.Half}}u; ++c) {
                const u32 at = jj * {{.Stride}}u + c;
                const float v0 = wv[2 * c], v1 = wv[2 * c + 1];
                {{template "store" .}}
            }
        }
{{- end}}
        __syncthreads();
        // Two k16 steps: fragments from shared memory (PTX ISA 9.7.14.5.8:
        // A regs {row g, g+8} × {k 2q.., 2q+8..}; B regs k {2q.., 2q+8..} of feature g).
#pragma unroll
        for (u32 kw = 0; kw < {{.Half}}u; kw += 8) {
            u32 ah[2][4], al[2][4];
#pragma unroll
            for (u32 mi = 0; mi < 2; ++mi) {
                const u32 at = (wm * 32 + mi * 16 + g) * {{.Stride}}u + kw + q;
                ah[mi][0] = xh[at];
                ah[mi][1] = xh[at + 8 * {{.Stride}}u];
                ah[mi][2] = xh[at + 4];
                ah[mi][3] = xh[at + 8 * {{.Stride}}u + 4];
                al[mi][0] = xl[at];
                al[mi][1] = xl[at + 8 * {{.Stride}}u];
                al[mi][2] = xl[at + 4];
                al[mi][3] = xl[at + 8 * {{.Stride}}u + 4];
            }
#pragma unroll
            for (u32 ni = 0; ni < 4; ++ni) {
                const u32 at = (wn * 32 + ni * 8 + g) * {{.Stride}}u + kw + q;
                {{template "mmas" (tiledMMA . "w" "acc")}}{{if .F}}
                {{template "mmas" (tiledMMA . "u" "accu")}}{{end}}
            }
        }
        __syncthreads(); // the next load stage overwrites the tiles
    }
` + tileEpilogue + `}
`

// tileEpilogue stores a prefill tile's accumulators, in the f16 kernels and
// the integer ones (templates_mmq.go): lane element i of tile (mi, ni) is
// token row g (+8 for i ≥ 2), feature 2q + (i & 1) of the warp's NI n8
// tiles. .Gate names the accumulators (and .Up swiglu's up ones), each
// [2][NI][4]; .RowScale multiplies by the row's rs (the f16 kernels' 1/s).
const tileEpilogue = `
    // Epilogue: lane element i of tile (mi, ni) is token row g (+8 for i ≥ 2), feature 2q + (i & 1).
#pragma unroll
    for (u32 mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (u32 ni = 0; ni < {{.NI}}u; ++ni) {
#pragma unroll
            for (u32 i = 0; i < 4; ++i) {
                const u32 r = wm * 32 + mi * 16 + g + 8 * (i >> 1), t = t0 + r;
                const u32 j = j0 + wn * {{.NI}}u * 8 + ni * 8 + 2 * q + (i & 1);
{{- if .F}}
                if (t < T && j < {{.F}}u) {
                    const float gt = {{.Gate}}[mi][ni][i]{{if .RowScale}} * rs[r]{{end}}, up = {{.Up}}[mi][ni][i]{{if .RowScale}} * rs[r]{{end}};
                    out[(u64)t * {{.F}}u + j] = gt / (1.0f + expf(-gt)) * up;
                }
{{- else}}
                if (t < T && j < {{.N}}u) {
                    out[(u64)t * {{.N}}u + j] = {{.Gate}}[mi][ni][i]{{if .RowScale}} * rs[r]{{end}}{{if .Bias}} + ldf(bias[j]){{end}}{{if .Residual}} + res[(u64)t * {{.N}}u + j]{{end}};
                }
{{- end}}
            }
        }
    }
`

// tiledParts are the sub-templates of tiledTemplate: "store" stores a weight
// word v0, v1 at word at of the tile of matrix m (0: the weight or gate rows,
// 1: swiglu's up rows); "mmas" issues one accumulator tile's products, the
// small ones first.
const tiledParts = `
{{- define "store"}}{{if .SplitW}}st_f16x2_split({{if .F}}m ? uh : wh, m ? ul : wl{{else}}wh, wl{{end}}, at, v0, v1);
{{- else}}st_f16x2({{if .F}}m ? uh : wh{{else}}wh{{end}}, at, v0, v1);{{end}}{{end}}
{{- define "mmas"}}{
                    const u32 bh[2] = { {{- .M}}h[at], {{.M}}h[at + 4]};{{if .SplitW}}
                    const u32 bl[2] = { {{- .M}}l[at], {{.M}}l[at + 4]};{{end}}
#pragma unroll
                    for (u32 mi = 0; mi < 2; ++mi) {
                        mma_16816({{.Acc}}[mi][ni], al[mi], bh);{{if .SplitW}}
                        mma_16816({{.Acc}}[mi][ni], ah[mi], bl);{{end}}
                        mma_16816({{.Acc}}[mi][ni], ah[mi], bh);
                    }
                }{{end}}`
