package cuda

// The renderer is a table: kernel family → CUDA C template. Every template
// sees a params value (cuda.go) whose fields are the shapes and attributes
// baked into that kernel; step sizes (T, and through pos the cache
// positions) arrive as arguments.
//
// Conventions every kernel follows, so that a runtime can launch any of
// them the same way:
//   - extern "C" (unmangled names, for cuModuleGetFunction);
//   - the pointer arguments first, in the order of Launch.Args;
//   - then `const u32 T`, the tokens of this step;
//   - gridDim is Launch.Grid, blockDim.x is Launch.Threads, no dynamic
//     shared memory;
//   - control flow around the warp reductions (full-mask __shfl_*_sync)
//     and barriers is uniform in a warp (no early return before them);
//   - the body begins with grid_dep_sync(), before any global memory
//     access (programmatic dependent launch), or, in a matrix-vector
//     kernel, calls it after loads of weights alone (mvIds;
//     checkGridDepSync).

// preludeSource makes the library self-contained: fixed-width names, half
// conversions as single PTX instructions (no cuda_fp16.h, so NVRTC needs no
// include path), overloaded loads/stores for f32 and f16 operands, and the
// warp reductions.
const preludeSource = `
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned short f16; // the bits of an IEEE half
typedef unsigned int u32;
typedef unsigned long long u64;

// h2f and f2h: one cvt instruction each. MINERVA_CUDA_EMU (defined only by
// the CPU emulation header, codegen/cuda/testdata/cudaemu.h) swaps in its
// C++ conversions, as inline PTX cannot run on the CPU.
__device__ __forceinline__ float h2f(f16 h) {
#ifdef MINERVA_CUDA_EMU
    return cudaemu::h2f(h);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}

__device__ __forceinline__ f16 f2h(float f) {
#ifdef MINERVA_CUDA_EMU
    return cudaemu::f2h(f);
#else
    f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
}

// ldf reads a small f32 or f16 operand (gain, bias, sink, cache) as float;
// stf stores a float into an f32 or f16 element.
__device__ __forceinline__ float ldf(float x) { return x; }
__device__ __forceinline__ float ldf(f16 x) { return h2f(x); }
__device__ __forceinline__ void stf(float* p, float v) { *p = v; }
__device__ __forceinline__ void stf(f16* p, float v) { *p = f2h(v); }

// v16 is 16 bytes of a weight row, the unit of the vector loads (uint4,
// without the CUDA headers).
struct alignas(16) v16 {
    u32 x, y, z, w;
};

// ld_nc16 loads 16 bytes (p 16-byte aligned) through the read-only,
// non-coherent path, as __ldg would: weights never change while a kernel
// runs. Under MINERVA_CUDA_EMU, a plain load that checks the alignment.
__device__ __forceinline__ v16 ld_nc16(const v16* p) {
#ifdef MINERVA_CUDA_EMU
    return cudaemu::ld_aligned(p);
#else
    v16 v;
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
#endif
}

// ld_f16 reads a little-endian IEEE half at any byte offset.
__device__ __forceinline__ float ld_f16(const u8* p) {
    return h2f(f16(u32(p[0]) | (u32(p[1]) << 8)));
}

// grid_dep_sync is the first statement of every kernel (a matrix-vector
// kernel may first load weights: mvIds): it waits until
// the grids before this one in the stream have completed and their writes
// are visible, then lets the next grid launch. A runtime that launches with
// programmatic stream serialization (sm_90 and newer: runtime/cuda) lets
// this grid's blocks start while the previous grid drains, so a launch's
// fixed cost overlaps the previous kernel's tail instead of following it; a
// decode step is some three hundred small kernels in a row. Launched the
// ordinary way, the wait returns at once, and before sm_90 (or on the CPU
// emulation) the function is empty. No kernel touches other global memory
// before it: a write could race with the previous grid's reads as surely as
// a read with its writes.
__device__ __forceinline__ void grid_dep_sync() {
#if !defined(MINERVA_CUDA_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// warp_sum and warp_max reduce over the 32 lanes of a warp (a tree of
// __shfl_down_sync into lane 0) and broadcast the result to every lane.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return __shfl_sync(0xffffffffu, v, 0);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    }
    return __shfl_sync(0xffffffffu, v, 0);
}

// dp4a is c plus the dot of a's and b's four signed bytes (dp4a.s32.s32).
__device__ __forceinline__ int dp4a(int a, int b, int c) {
#ifdef MINERVA_CUDA_EMU
    for (int i = 0; i < 4; ++i) {
        c += int((signed char)(a >> (8 * i))) * int((signed char)(b >> (8 * i)));
    }
    return c;
#else
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#endif
}

// dq8_q4_0 and dq8_q8_0 multiply unit u (one 32-element block) of a weight
// row with a Q8_0 activation block (xb: its 32 values as 8 words, xs their
// sum, xd its scale) as ggml's vec_dot_q4_0_q8_0 and vec_dot_q8_0_q8_0 do: the
// integer dot, then times the product of the two scales. A block is 2-byte
// aligned (18 or 34 bytes), so its words are read as halves.
// ld_q8 loads block b of a row that q8_quant rounded: its 32 values as 8
// words, with two 16-byte loads (the values start 16-byte aligned: the
// scratch is, and K and the row size are multiples of 16).
__device__ __forceinline__ void ld_q8(const u8* xqr, u32 b, int* xb) {
    const v16 lo = ld_nc16((const v16*)(xqr + b * 32u)), hi = ld_nc16((const v16*)(xqr + b * 32u + 16u));
    xb[0] = int(lo.x);
    xb[1] = int(lo.y);
    xb[2] = int(lo.z);
    xb[3] = int(lo.w);
    xb[4] = int(hi.x);
    xb[5] = int(hi.y);
    xb[6] = int(hi.z);
    xb[7] = int(hi.w);
}

__device__ __forceinline__ float dq8_q4_0(const u8* row, u32 u, const int* xb, int xs, float xd) {
    const u16* h = (const u16*)(row + u * 18u);
    int s = 0;
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) {
        const u32 q = u32(h[1 + 2 * i]) | (u32(h[2 + 2 * i]) << 16);
        s = dp4a(int(q & 0x0F0F0F0Fu), xb[i], s);
        s = dp4a(int((q >> 4) & 0x0F0F0F0Fu), xb[4 + i], s);
    }
    return float(s - 8 * xs) * (h2f(h[0]) * xd);
}

__device__ __forceinline__ float dq8_q8_0(const u8* row, u32 u, const int* xb, int xs, float xd) {
    (void)xs;
    const u16* h = (const u16*)(row + u * 34u);
    int s = 0;
#pragma unroll
    for (u32 i = 0; i < 8u; ++i) {
        s = dp4a(int(u32(h[1 + 2 * i]) | (u32(h[2 + 2 * i]) << 16)), xb[i], s);
    }
    return float(s) * (h2f(h[0]) * xd);
}

// dq8_q5_0 does the same for Q5_0, as ggml's vec_dot_q5_0_q8_0: the
// integer dot of the 5-bit codes, less the offset of 16 (16·xs), times the
// scales. q5_hi spreads bits 0–3 of b to bit 4 of bytes 0–3 (the multiplier
// puts bit k at bits k + 7j, all distinct, so bit k lands on 8k only for
// j = k): the fifth bits of four codes. (Q4_1 and Q5_1 keep the float path:
// ggml multiplies them with Q8_1 blocks, whose sum term it rounds to f16
// from the unrounded scale; rounding as Q8_0 here left the golden cases'
// error where the float path had it, 1.5e-2 to 1.7e-2.)
__device__ __forceinline__ u32 q5_hi(u32 b) {
    return (((b & 0xFu) * 0x00204081u) & 0x01010101u) << 4;
}

__device__ __forceinline__ float dq8_q5_0(const u8* row, u32 u, const int* xb, int xs, float xd) {
    const u16* h = (const u16*)(row + u * 22u);
    const u32 qh = u32(h[1]) | (u32(h[2]) << 16);
    int s = 0;
#pragma unroll
    for (u32 i = 0; i < 4u; ++i) {
        const u32 q = u32(h[3 + 2 * i]) | (u32(h[4 + 2 * i]) << 16);
        s = dp4a(int((q & 0x0F0F0F0Fu) | q5_hi(qh >> (4 * i))), xb[i], s);
        s = dp4a(int(((q >> 4) & 0x0F0F0F0Fu) | q5_hi(qh >> (16 + 4 * i))), xb[4 + i], s);
    }
    return float(s - 16 * xs) * (h2f(h[0]) * xd);
}
` + mmaPrelude

const dqTemplate = `
// dq_{{.Name}} decodes unit u ({{.Unit}} elements) of a {{.Name}} row into registers.
__device__ __forceinline__ void dq_{{.Name}}(const u8* row, u32 u, float* w) {{"{"}}{{.Body}}
}
`

// ids is the shared head of every kernel body.
const ids = `
    grid_dep_sync();` + idsNoWait

// idsNoWait is ids without the wait, for a kernel that waits later.
const idsNoWait = `
    const u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    (void)tid;
    (void)lane;
    (void)warp;`

// mvIds is the head of the matrix-vector kernels. One that multiplies
// Q8_0 activations on the vector path waits for the grid before it only
// after its first row's first chunks are in flight (the dot template):
// those loads read weights, which no kernel writes, and the activations
// it waits for are read from the scratch only in the chunk loop. The
// weight reads then overlap the previous kernel's tail (H100, 7B Q4_0
// decode: p50 3.35 → 3.22 ms a step).
const mvIds = `
{{- if and .Q8.On .Vec.On}}` + idsNoWait + `{{else}}` + ids + `{{end}}`

// extraParams lists the optional operands of the matrix-vector kernels.
const extraParams = `
{{- range .Extra}}
    const {{.T}}* __restrict__ {{.Name}},
{{- end}}`

// normPrologue computes the RMSNorm scale of row xr with the warp.
const normPrologue = `{{if .Q8.On}}` + q8Rows + `{{else if .XS.On}}` + xStageSource + `{{else}}{{if .Norm}}
    // RMSNorm prologue: every warp reduces the row itself (K is small
    // beside the weight rows it then streams), so no shared memory.
    float ss = 0.0f;
    for (u32 i = lane; i < {{.K}}u; i += 32) {
        ss += xr[i] * xr[i];
    }
    ss = warp_sum(ss);
    const float scale = rsqrtf(ss / {{.K}}.0f + {{.Eps}});{{end}}{{end}}`

// q8Rows points a matrix-vector kernel that multiplies 8-bit activations
// at its row of the step's scratch, where the q8_quant launch before it
// wrote the row rounded to Q8_0 blocks (q8QuantTemplate: K values, then the
// blocks' scales, then their sums), the RMSNorm and gain already applied.
const q8Rows = `
    const u8* xqr = xq + (u64)r * {{.Q8.RowBytes}}u;
    const float* xqd = (const float*)(xqr + {{.K}}u);
    const int* xqs = (const int*)(xqr + {{.K}}u + 4u * {{.Q8.Blocks}}u);`

// xStageSource copies the activation row (times the gain) into shared memory
// once per block, with one float of padding after every unit (see
// planXStage), and reduces the RMSNorm sum of squares over the block on the
// way.
const xStageSource = `
    // The activation row{{if .Gain}} times the gain{{end}}, staged once per block{{if .XS.Pad}} with a float of
    // padding per {{.Unit}}-element unit: lanes decode consecutive units, so their
    // reads of element k of their units fall in 32 distinct banks{{end}}.
    __shared__ float xs[{{.XS.Floats}}];{{if .Norm}}
    __shared__ float xss[{{.NW}}];
    float ss = 0.0f;{{end}}
    for (u32 i = tid; i < {{.K}}u; i += {{.Threads}}u) {
        const float xv = xr[i];{{if .Norm}}
        ss += xv * xv;{{end}}
        xs[i{{if .XS.Pad}} + i / {{.Unit}}u{{end}}] = xv{{if .Gain}} * ldf(gain[i]){{end}};
    }{{if .Norm}}
    ss = warp_sum(ss);
    if (lane == 0) {
        xss[warp] = ss;
    }{{end}}
    __syncthreads();{{if .Norm}}
    ss = 0.0f;
#pragma unroll
    for (u32 i = 0; i < {{.NW}}u; ++i) {
        ss += xss[i];
    }
    const float scale = rsqrtf(ss / {{.K}}.0f + {{.Eps}});{{end}}`

// stageDecl names the weight read path of a matrix-vector kernel (see
// vecload.go) in a comment the tests look for, and declares the vector
// path's stage: one chunk per warp, which the warp's dot loops (two per
// feature in swiglu and qkv_rope) reuse one after the other.
const stageDecl = `
    // {{.Vec.Why}}.{{if .Vec.On}}
    __shared__ v16 stage[{{.NW}} * {{.Vec.Words}}]; // {{.Vec.Bytes}} bytes per warp{{end}}`

// dotLoop accumulates the dot of weight row `row` with the (normalised)
// input row into the named accumulator. On the vector path the full chunks
// go through the warp's stage (copied with 16-byte loads, decoded from
// shared memory, a __syncwarp after each half so that no lane reads a
// chunk before it is whole or overwrites one still being decoded); the
// remaining units, or all of them on the direct path, are decoded straight
// from global memory, lanes striding over units.
const dotLoop = `{{define "dot"}}{{if $.Vec.On}}
        {
            const v16* wr = (const v16*)(w + (u64)({{.Row}}) * {{$.RowBytes}}u);
            v16* sw = stage + warp * {{$.Vec.Words}}u;
            // The next {{$.Vec.Depth}} chunk{{if gt $.Vec.Depth 1}}s{{end}} of the row are in flight in registers
            // (pf[0] the oldest) while the stage's chunk is decoded.
            v16 pf[{{$.Vec.Depth}}][{{$.Vec.Rounds}}];
#pragma unroll
            for (u32 d = 0; d < {{$.Vec.Depth}}u; ++d) {
#pragma unroll
                for (u32 i = 0; i < {{$.Vec.Rounds}}u; ++i) {
                    if (i * 32 + lane < {{$.Vec.Words}}u) {
                        pf[d][i] = ld_nc16(wr + d * {{$.Vec.Words}}u + i * 32 + lane);
                    }
                }
            }
{{- if and $.Q8.On .First}}
            grid_dep_sync(); // only the weights were read above (mvIds){{end}}
            for (u32 c = 0; c < {{$.Vec.Chunks}}u; ++c) {
#pragma unroll
                for (u32 i = 0; i < {{$.Vec.Rounds}}u; ++i) {
                    if (i * 32 + lane < {{$.Vec.Words}}u) {
                        sw[i * 32 + lane] = pf[0][i];
                    }
                }
#pragma unroll
                for (u32 d = 0; d + 1 < {{$.Vec.Depth}}u; ++d) {
#pragma unroll
                    for (u32 i = 0; i < {{$.Vec.Rounds}}u; ++i) {
                        pf[d][i] = pf[d + 1][i];
                    }
                }
                if (c + {{$.Vec.Depth}}u < {{$.Vec.Chunks}}u) {
#pragma unroll
                    for (u32 i = 0; i < {{$.Vec.Rounds}}u; ++i) {
                        if (i * 32 + lane < {{$.Vec.Words}}u) {
                            pf[{{$.Vec.Depth}} - 1][i] = ld_nc16(wr + (c + {{$.Vec.Depth}}u) * {{$.Vec.Words}}u + i * 32 + lane);
                        }
                    }
                }
                __syncwarp();
#pragma unroll
                for (u32 s = 0; s < {{$.Vec.Per}}u; ++s) {
                    const u32 u = s * 32 + lane, e = (c * {{$.Vec.Units}}u + u) * {{$.Unit}}u;
{{- if $.Q8.On}}
                    const u32 b = c * {{$.Vec.Units}}u + u;
                    (void)e;
                    int xb[8];
                    ld_q8(xqr, b, xb);
                    {{.Acc}} += dq8_{{$.DT}}((const u8*)sw, u, xb, xqs[b], xqd[b]);{{else}}
                    float wv[{{$.Unit}}];
                    dq_{{$.DT}}((const u8*)sw, u, wv);
#pragma unroll
                    for (u32 k = 0; k < {{$.Unit}}u; ++k) {
                        {{.Acc}} += wv[k] * {{if $.XS.On}}xs[e{{if $.XS.Pad}} + c * {{$.Vec.Units}}u + u{{end}} + k]{{else}}xr[e + k]{{if $.Gain}} * ldf(gain[e + k]){{end}}{{end}};
                    }{{end}}
                }
                __syncwarp();
            }
        }{{end}}{{if or (not $.Vec.On) $.Vec.Tail}}
        for (u32 u = {{if $.Vec.On}}{{$.Vec.TailFrom}}u + {{end}}lane; u < {{$.NU}}u; u += 32) {
{{- if $.Q8.On}}
            int xb[8];
            ld_q8(xqr, u, xb);
            {{.Acc}} += dq8_{{$.DT}}(w + (u64)({{.Row}}) * {{$.RowBytes}}u, u, xb, xqs[u], xqd[u]);{{else}}
            float wv[{{$.Unit}}];
            dq_{{$.DT}}(w + (u64)({{.Row}}) * {{$.RowBytes}}u, u, wv);
#pragma unroll
            for (u32 k = 0; k < {{$.Unit}}u; ++k) {
                {{.Acc}} += wv[k] * {{if $.XS.On}}xs[u * {{$.Unit}}u{{if $.XS.Pad}} + u{{end}} + k]{{else}}xr[u * {{$.Unit}}u + k]{{if $.Gain}} * ldf(gain[u * {{$.Unit}}u + k]){{end}}{{end}};
            }{{end}}
        }{{end}}{{end}}`

// attnSplitHead is the head of the attention split kernel: the signature,
// and for block (h, s, t) the cache rows [from, to) of its split that query
// t sees, its query row qv and its slot's first cache row.
const attnSplitHead = `
// {{.Name}}: partial attention of query t, head h over KV split s of {{.Splits}}, head_dim {{.HD}}, Dv {{.DV}}, GQA group {{.Group}}{{if .Window}}, window {{.Window}}{{end}}{{if gt .NW 1}}, {{.NW}} warps{{end}}.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ q,
    const {{.CacheT}}* __restrict__ kc,
    const {{.CacheT}}* __restrict__ vc,
    const int* __restrict__ pos,
    const int* __restrict__ base,
    float* __restrict__ part,
    const u32 T) {` + ids + `
    const u32 h = blockIdx.x, s = blockIdx.y, t = blockIdx.z, kh = h / {{.Group}}u;
    const int p = pos[t];
    int lo = 0;{{if .Window}}
    lo = p - {{.Window}} + 1 > 0 ? p - {{.Window}} + 1 : 0;{{end}}
    const int n = p + 1 - lo;
    const int from = lo + n * int(s) / {{.Splits}}, to = lo + n * (int(s) + 1) / {{.Splits}};
    const float* qv = q + (u64)t * {{.QW}}u + h * {{.HD}}u;
    const u64 row0 = (u64)base[t]; // the query's slot's first cache row`

// ropeFreqs, ropePair, ropeRotate and ropeWrite are the RoPE pieces of the
// qkv_rope kernel (its epilogue, lane 0 of the pair's warp), of rope_kv
// and of rope (one thread per pair): the frequency table, the pair's
// columns of h, the rotation of q and k pairs, and the stores into q and
// the caches. ropeStore is the rotation and the stores.
const ropeFreqs = `
// {{.Name}}_freq: θ_i = freq_scale·base^(−2i/n_rot) (YaRN: blended with base^(−2i/n_rot)) as a (hi, lo) float pair,
// computed in float64 by the compiler so that pos·θ keeps float64 accuracy.
__constant__ float {{.Name}}_freq[{{.Half}}][2] = { {{- .Freqs -}} };
`

const ropePair = `
    // Pair p: head p / {{.HalfHD}}, index i inside it; columns c0, c1 of h.
    const u32 head = p / {{.HalfHD}}u, i = p % {{.HalfHD}}u;
    u32 c0 = 2 * i, c1 = 2 * i + 1;{{if .Neox}}
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
            const float fh = {{.Name}}_freq[i][0], fl = {{.Name}}_freq[i][1];
            const float pf = float(ps);
            const float ph = pf * fh;
            const float pl = fmaf(pf, fh, -ph) + pf * fl;
            const float kq = rintf(ph * 0.15915494309189535f);
            float th = fmaf(-kq, 6.28318548202514648f, ph);
            th = fmaf(-kq, -1.7484556000744487e-07f, th) + pl;
            const float cs = cosf(th){{.MScale}}, sn = sinf(th){{.MScale}};
            const float r0 = a0 * cs - a1 * sn, r1 = a0 * sn + a1 * cs;
            a0 = r0;
            a1 = r1;
        }
`

// ropeWrite stores the rotated pair: q into out, k and v into the caches
// at row base[t] + pos[t] (the row's slot's first row, plus its position).
const ropeWrite = `        if (c0 < {{.QD}}u) {
            out[(u64)t * {{.QD}}u + c0] = a0;
            out[(u64)t * {{.QD}}u + c1] = a1;
        } else if (c0 < {{.QKD}}u) {
            const u64 row = (u64)base[t] + (u64)ps;
            stf(kcache + row * {{.KVD}}u + c0 - {{.QD}}u, a0);
            stf(kcache + row * {{.KVD}}u + c1 - {{.QD}}u, a1);
        } else {
            const u64 row = (u64)base[t] + (u64)ps;
            stf(vcache + row * {{.KVD}}u + c0 - {{.QKD}}u, a0);
            stf(vcache + row * {{.KVD}}u + c1 - {{.QKD}}u, a1);
        }
`

const ropeStore = ropeRotate + ropeWrite

var familyTemplates = map[string]string{
	// embed: one thread per unit of the output row; the table row is the token's.
	"embed": `
// {{.Name}}: out[t, :] = dequant(table[ids[t], :]), table {{.DT}}[{{.V}}, {{.D}}].
extern "C" __global__ void {{.Name}}(
    const u8* __restrict__ table,
    const int* __restrict__ idx,
    float* __restrict__ out,
    const u32 T) {` + ids + `
    const u32 t = blockIdx.y, u = blockIdx.x * {{.Threads}}u + tid;
    if (t >= T || u >= {{.NU}}u) {
        return;
    }
    const int id = idx[t];
    if (id < 0 || id >= {{.V}}) {
        return; // the runtime checks ids before the step; never read outside the table
    }
    float wv[{{.Unit}}];
    dq_{{.DT}}(table + (u64)id * {{.RowBytes}}u, u, wv);
#pragma unroll
    for (u32 k = 0; k < {{.Unit}}u; ++k) {
        out[(u64)t * {{.D}}u + u * {{.Unit}}u + k] = wv[k];
    }
}
`,
	// matvec: fused_matmul and matmul. One warp per output feature,
	// {{.NW}} per block; grid (ceil(N/NW), rows).
	"matvec": dotLoop + `
// {{.Name}}: out[r, j] = {{if .Norm}}rmsnorm(x[r]){{if .Gain}}·gain{{end}}{{else}}x[r]{{end}} · w[j]{{if .Bias}} + bias[j]{{end}}{{if .Residual}} + res[r, j]{{end}}, w {{.DT}}[{{.N}}, {{.K}}].
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    {{if .Q8.On}}const u8* __restrict__ xq{{else}}const float* __restrict__ x{{end}},
    const u8* __restrict__ w,` + extraParams + `
    float* __restrict__ out,
    const u32 T) {` + mvIds + stageDecl + `
    const u32 r = blockIdx.y, j = blockIdx.x * {{.NW}}u + warp;{{if not .Q8.On}}
    const float* xr = x + (u64)r * {{.K}}u;{{end}}` + normPrologue + `
    float acc = 0.0f;
    if (j < {{.N}}u) {{"{"}}{{template "dot" (dotArgs . "j" "acc" true)}}
    }
    acc = warp_sum(acc);
    if (j < {{.N}}u && lane == 0) {
        out[(u64)r * {{.N}}u + j] = {{if and .Norm (not .Q8.On)}}acc * scale{{else}}acc{{end}}{{if .Bias}} + ldf(bias[j]){{end}}{{if .Residual}} + res[(u64)r * {{.N}}u + j]{{end}};
    }
}
`,
	// q8_quant: the launch before a matrix-vector kernel that multiplies
	// 8-bit activations (planQ8). Warp w of block (bx, r) rounds block
	// bx·NW + w of row r of x (normalised, times the gain, when the
	// product fuses them) to Q8_0 as ggml's quantize_row_q8_0 does, lane l
	// element l: the scale is amax/127 kept as f16, each value
	// roundf(x/scale). Every block of a row reduces the row's sum of squares
	// itself (the row is read from L2 once per block), so no launch waits
	// on another. Row r of xq holds the K values, then the Blocks scales
	// (f32), then the Blocks sums of the values (i32; Q4_0's offset of 8
	// needs them): once per step instead of once per block of every
	// product that reads it.
	"q8_quant": `
// {{.Name}}: xq[r] = q8_0({{if .Norm}}rmsnorm(x[r]){{if .Gain}}·gain{{end}}{{else}}x[r]{{end}}), {{.K}} elements, {{.Q8.RowBytes}} bytes per row.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ x,` + extraParams + `
    u8* __restrict__ xq,
    const u32 T) {` + ids + `
    const u32 r = blockIdx.y, b = blockIdx.x * {{.NW}}u + warp;
    const float* xr = x + (u64)r * {{.K}}u;
    u8* q = xq{{if .Q8.Off}} + (u64){{.Q8.Off}}u * T{{end}} + (u64)r * {{.Q8.RowBytes}}u;
    float* qd = (float*)(q + {{.K}}u);
    int* qs = (int*)(q + {{.K}}u + 4u * {{.Q8.Blocks}}u);{{if .Norm}}
    __shared__ float xss[{{.NW}}];
    float ss = 0.0f;
#pragma unroll 4
    for (u32 i = tid; i < {{.K}}u; i += {{.Threads}}u) {
        const float xv = xr[i];
        ss += xv * xv;
    }
    ss = warp_sum(ss);
    if (lane == 0) {
        xss[warp] = ss;
    }
    __syncthreads();
    ss = 0.0f;
#pragma unroll
    for (u32 i = 0; i < {{.NW}}u; ++i) {
        ss += xss[i];
    }
    const float scale = rsqrtf(ss / {{.K}}.0f + {{.Eps}});{{end}}
    if (b < {{.Q8.Blocks}}u) {
        const float v = xr[b * 32u + lane]{{if .Norm}} * scale{{end}}{{if .Gain}} * ldf(gain[b * 32u + lane]){{end}};
        const float amax = warp_max(fmaxf(v, -v));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const int qv = int(roundf(v * id));
        q[b * 32u + lane] = u8(qv & 0xff);
        // |sum| ≤ 32·127: exact in a float.
        const float sum = warp_sum(float(qv));
        if (lane == 0) {
            qd[b] = h2f(f2h(d));
            qs[b] = int(sum);
        }
    }
}
`,
	// swiglu: warp j computes gate row j and up row F+j.
	"swiglu": dotLoop + `
// {{.Name}}: h = {{if .Norm}}rmsnorm(x[r]){{if .Gain}}·gain{{end}}{{else}}x[r]{{end}} · wᵀ, out[r, j] = silu(h[j]) · h[{{.F}} + j], w {{.DT}}[{{.N}}, {{.K}}].
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    {{if .Q8.On}}const u8* __restrict__ xq{{else}}const float* __restrict__ x{{end}},
    const u8* __restrict__ w,` + extraParams + `
    float* __restrict__ out,
    const u32 T) {` + mvIds + stageDecl + `
    const u32 r = blockIdx.y, j = blockIdx.x * {{.NW}}u + warp;{{if not .Q8.On}}
    const float* xr = x + (u64)r * {{.K}}u;{{end}}` + normPrologue + `
    float g = 0.0f, up = 0.0f;
    if (j < {{.F}}u) {{"{"}}{{template "dot" (dotArgs . "j" "g" true)}}{{template "dot" (dotArgs . .UpRow "up" false)}}
    }
    g = warp_sum(g);
    up = warp_sum(up);
    if (j < {{.F}}u && lane == 0) {{"{"}}{{if and .Norm (not .Q8.On)}}
        g *= scale;
        up *= scale;{{end}}
        out[(u64)r * {{.F}}u + j] = g / (1.0f + expf(-g)) * up;
    }
}
`,
	// qkv_rope: warp p computes the pair of columns RoPE rotates together,
	// rotates it (q and k blocks), and stores q into out and k, v into the
	// caches at row base[t] + pos[t].
	"qkv_rope": dotLoop + `
` + ropeFreqs + `
// {{.Name}}: h = {{if .Norm}}rmsnorm(x[t]){{if .Gain}}·gain{{end}}{{else}}x[t]{{end}} · wᵀ{{if .Bias}} + bias{{end}}; q, k, v = h's blocks of {{.QD}}, {{.KVD}}, {{.KVD}};
// rope ({{.Mode}}, n_rot {{.NRot}} of head_dim {{.HD}}) on q and k; k, v → caches row base[t] + pos[t]; out = q.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    {{if .Q8.On}}const u8* __restrict__ xq{{else}}const float* __restrict__ x{{end}},
    const u8* __restrict__ w,
    const int* __restrict__ pos,
    const int* __restrict__ base,
    {{.CacheT}}* __restrict__ kcache,
    {{.CacheT}}* __restrict__ vcache,` + extraParams + `
    float* __restrict__ out,
    const u32 T) {` + mvIds + stageDecl + `
    const u32 t = blockIdx.y, p = blockIdx.x * {{.NW}}u + warp;
    {{if .Q8.On}}const u32 r = t;{{else}}const float* xr = x + (u64)t * {{.K}}u;{{end}}
` + ropePair + normPrologue + `
    float a0 = 0.0f, a1 = 0.0f;
    if (p < {{.Pairs}}u) {{"{"}}{{template "dot" (dotArgs . "c0" "a0" true)}}{{template "dot" (dotArgs . "c1" "a1" false)}}
    }
    a0 = warp_sum(a0);
    a1 = warp_sum(a1);
    if (p < {{.Pairs}}u && lane == 0) {{"{"}}{{if and .Norm (not .Q8.On)}}
        a0 *= scale;
        a1 *= scale;{{end}}{{if .Bias}}
        a0 += ldf(bias[c0]);
        a1 += ldf(bias[c1]);{{end}}
` + ropeStore + `    }
}
`,
	// rope_kv: the second launch of a qkv_rope prefill step, after a tiled
	// product wrote h (tiled.go): thread p of token t rotates its pair as
	// the qkv_rope kernel's epilogue does and stores q, k, v.
	"rope_kv": ropeFreqs + `
// {{.Name}}: q, k, v = h[t]'s blocks of {{.QD}}, {{.KVD}}, {{.KVD}} (h[T, {{.N}}] from the tiled product); rope ({{.Mode}}, n_rot {{.NRot}}
// of head_dim {{.HD}}) on q and k; k, v → caches row base[t] + pos[t]; out = q.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ h,
    const int* __restrict__ pos,
    const int* __restrict__ base,
    {{.CacheT}}* __restrict__ kcache,
    {{.CacheT}}* __restrict__ vcache,{{if .QKNorm}}
    const {{.QNT}}* __restrict__ qnorm,
    const {{.QNT}}* __restrict__ knorm,{{end}}
    float* __restrict__ out,
    const u32 T) {
    grid_dep_sync();
    const u32 t = blockIdx.y, p = blockIdx.x * {{.Threads}}u + threadIdx.x;
    if (p >= {{.Pairs}}u) {
        return;
    }` + ropePair + `
    float a0 = h[(u64)t * {{.N}}u + c0], a1 = h[(u64)t * {{.N}}u + c1];{{if .QKNorm}}
    if (c0 < {{.QKD}}u) {
        // The head's RMSNorm (q or k), then its gain: each thread of the
        // head sums the head's squares itself (head_dim loads, from L1).
        const float* hr = h + (u64)t * {{.N}}u + head * {{.HD}}u;
        float ss = 0.0f;
        for (u32 j = 0; j < {{.HD}}u; ++j) {
            ss += hr[j] * hr[j];
        }
        const float sc = rsqrtf(ss / {{.HD}}.0f + {{.QKEps}});
        const {{.QNT}}* g = c0 < {{.QD}}u ? qnorm : knorm;
        a0 = a0 * sc * ldf(g[c0 - head * {{.HD}}u]);
        a1 = a1 * sc * ldf(g[c1 - head * {{.HD}}u]);
    }{{end}}
    {` + ropeStore + `    }
}
`,
	// rope: a standalone rotation (a graph whose projections did not fuse):
	// thread p of token t rotates column pair p of x, or copies it past
	// n_rot.
	"rope": ropeFreqs + `
// {{.Name}}: out[t] = rope(x[t]) ({{.Mode}}, n_rot {{.NRot}} of head_dim {{.HD}}), rows of {{.QD}}.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const float* __restrict__ x,
    const int* __restrict__ pos,
    float* __restrict__ out,
    const u32 T) {
    grid_dep_sync();
    const u32 t = blockIdx.y, p = blockIdx.x * {{.Threads}}u + threadIdx.x;
    if (p >= {{.Pairs}}u) {
        return;
    }` + ropePair + `
    float a0 = x[(u64)t * {{.QD}}u + c0], a1 = x[(u64)t * {{.QD}}u + c1];
    {` + ropeRotate + `    }
    out[(u64)t * {{.QD}}u + c0] = a0;
    out[(u64)t * {{.QD}}u + c1] = a1;
}
`,
	// kv_write: a standalone cache write; one thread per element.
	"kv_write": `
// {{.Name}}: cache[base[t] + pos[t], :] = x[t, :], {{.K}} elements per row.
extern "C" __global__ void __launch_bounds__(32) {{.Name}}(
    const float* __restrict__ x,
    const int* __restrict__ pos,
    const int* __restrict__ base,
    {{.CacheT}}* __restrict__ cache,
    const u32 T) {
    grid_dep_sync();
    const u32 i = blockIdx.x * 32u + threadIdx.x, t = blockIdx.y;
    if (i >= {{.K}}u) {
        return;
    }
    stf(cache + ((u64)base[t] + (u64)pos[t]) * {{.K}}u + i, x[(u64)t * {{.K}}u + i]);
}
`,
	// attn_split: NW warps per (head, KV split, query). Lane l holds the
	// query's dimensions l, l+32, … and the same dimensions of the value
	// accumulator. Warp w walks every NW-th group of attnRows of its
	// split's visible cache rows: each row's score is the lanes' partial
	// dots summed with warp_sum (the rows' sums interleave), then one
	// online softmax step (m, l, identical in every lane) rescales the
	// accumulator and adds the rows' weighted value rows. Every load of a
	// key or value row is one contiguous 32-lane read, and the loops are
	// ceil(HD/32) and ceil(Dv/32) long. With one warp the split's partial
	// (m, l, acc[Dv]) is the warp's; with several, their partials combine
	// through shared memory. A one-token step has one block per (head,
	// split), too few single warps to hide the per-row warp_sums, so it
	// takes Language.AttnDecodeWarps of them (H100, 7B at depths 512–640:
	// one warp 5.11 ms a decode step; the lane-per-row kernel before it
	// 4.25; four warps 3.46 with programmatic dependent launch).
	"attn_split": attnSplitHead + `
    // The lane's query dimensions.
    float qr[{{.QPer}}];
#pragma unroll
    for (u32 k = 0; k < {{.QPer}}u; ++k) {
        const u32 i = lane + 32u * k;
        qr[k] = i < {{.HD}}u ? qv[i] : 0.0f;
    }
    // -3e38 rather than -INFINITY: fast math may assume no infinities, and
    // exp(-3e38 - x) is 0 just the same.
    float m = -3.0e38f, l = 0.0f;
    float acc[{{.VPer}}];
#pragma unroll
    for (u32 k = 0; k < {{.VPer}}u; ++k) {
        acc[k] = 0.0f;
    }
    for (int j0 = from + int(warp) * {{.Rows}}; j0 < to; j0 += {{.NW}} * {{.Rows}}) {
        float sc[{{.Rows}}];
#pragma unroll
        for (u32 r = 0; r < {{.Rows}}u; ++r) {
            const int j = j0 + int(r) < to ? j0 + int(r) : to - 1;
            const {{.CacheT}}* kr = kc + (row0 + (u64)j) * {{.KW}}u + kh * {{.HD}}u;
            float d = 0.0f;
#pragma unroll
            for (u32 k = 0; k < {{.QPer}}u; ++k) {
                const u32 i = lane + 32u * k;
                if (i < {{.HD}}u) {
                    d += qr[k] * ldf(kr[i]);
                }
            }
            sc[r] = d;
        }
        float mn = m;
#pragma unroll
        for (u32 r = 0; r < {{.Rows}}u; ++r) {
            sc[r] = warp_sum(sc[r]) * {{.Scale}};
            if (j0 + int(r) < to) {
                mn = fmaxf(mn, sc[r]);
            }
        }
        const float rs = expf(m - mn);
        l *= rs;
#pragma unroll
        for (u32 k = 0; k < {{.VPer}}u; ++k) {
            acc[k] *= rs;
        }
        m = mn;
#pragma unroll
        for (u32 r = 0; r < {{.Rows}}u; ++r) {
            if (j0 + int(r) < to) {
                const float wt = expf(sc[r] - m);
                l += wt;
                const {{.CacheT}}* vr = vc + (row0 + (u64)(j0 + int(r))) * {{.VW}}u + kh * {{.DV}}u;
#pragma unroll
                for (u32 k = 0; k < {{.VPer}}u; ++k) {
                    const u32 d = lane + 32u * k;
                    if (d < {{.DV}}u) {
                        acc[k] += wt * ldf(vr[d]);
                    }
                }
            }
        }
    }
    float* o = part + (((u64)t * {{.H}}u + h) * {{.Splits}}u + s) * {{.PartW}}u;{{if eq .NW 1}}
#pragma unroll
    for (u32 k = 0; k < {{.VPer}}u; ++k) {
        const u32 d = lane + 32u * k;
        if (d < {{.DV}}u) {
            o[2 + d] = acc[k];
        }
    }
    if (lane == 0) {
        o[0] = m;
        o[1] = l;
    }{{else}}
    // The warps' partials combine through shared memory: thread d sums
    // dimension d over the warps, each rescaled to the block's maximum.
    __shared__ float wm[{{.NW}}], wl[{{.NW}}], wacc[{{.NW}} * {{.DV}}];
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
#pragma unroll
    for (u32 k = 0; k < {{.VPer}}u; ++k) {
        const u32 d = lane + 32u * k;
        if (d < {{.DV}}u) {
            wacc[warp * {{.DV}}u + d] = acc[k];
        }
    }
    __syncthreads();
    float mm = wm[0];
#pragma unroll
    for (u32 w = 1; w < {{.NW}}u; ++w) {
        mm = fmaxf(mm, wm[w]);
    }
    for (u32 d = tid; d < {{.DV}}u; d += {{.Threads}}u) {
        float a = 0.0f;
#pragma unroll
        for (u32 w = 0; w < {{.NW}}u; ++w) {
            a += wacc[w * {{.DV}}u + d] * expf(wm[w] - mm);
        }
        o[2 + d] = a;
    }
    if (tid == 0) {
        float ll = 0.0f;
#pragma unroll
        for (u32 w = 0; w < {{.NW}}u; ++w) {
            ll += wl[w] * expf(wm[w] - mm);
        }
        o[0] = mm;
        o[1] = ll;
    }{{end}}
}
`,
	// attn_merge: thread d of (head, query) merges the splits' partials
	// (and the sink, one more part without a value row).
	"attn_merge": `
// {{.Name}}: out[t, h·{{.DV}} + d] = merge of {{.Splits}} partials{{if .Sinks}} and sink[h]{{end}}.
extern "C" __global__ void {{.Name}}(
    const float* __restrict__ part,
{{- if .Sinks}}
    const {{.SinkT}}* __restrict__ sinks,
{{- end}}
    float* __restrict__ out,
    const u32 T) {` + ids + `
    const u32 h = blockIdx.x, t = blockIdx.y, d = tid;
    const float* pt = part + ((u64)t * {{.H}}u + h) * {{.Splits}}u * {{.PartW}}u;
    float m = -3.0e38f;
    for (u32 s = 0; s < {{.Splits}}u; ++s) {
        m = fmaxf(m, pt[s * {{.PartW}}u]);
    }{{if .Sinks}}
    m = fmaxf(m, ldf(sinks[h]));{{end}}
    float l = 0.0f, a = 0.0f;
    for (u32 s = 0; s < {{.Splits}}u; ++s) {
        const float* ps = pt + s * {{.PartW}}u;
        if (ps[1] > 0.0f) {
            const float r = expf(ps[0] - m);
            l += ps[1] * r;
            a += (d < {{.DV}}u ? ps[2 + d] : 0.0f) * r;
        }
    }{{if .Sinks}}
    l += expf(ldf(sinks[h]) - m);{{end}}
    if (d < {{.DV}}u) {
        out[(u64)t * {{.OW}}u + h * {{.DV}}u + d] = a / l;
    }
}
`,
	// rmsnorm: one warp per row.
	"rmsnorm": `
// {{.Name}}: out[r] = x[r] / sqrt(mean(x[r]²) + eps){{if .Gain}} · gain{{end}}, width {{.K}}.
extern "C" __global__ void __launch_bounds__(32) {{.Name}}(
    const float* __restrict__ x,
{{- if .Gain}}
    const {{.GainT}}* __restrict__ gain,
{{- end}}
    float* __restrict__ out,
    const u32 T) {` + ids + `
    const u32 r = blockIdx.y;
    const float* xr = x + (u64)r * {{.K}}u;
    float ss = 0.0f;
    for (u32 i = lane; i < {{.K}}u; i += 32) {
        ss += xr[i] * xr[i];
    }
    ss = warp_sum(ss);
    const float scale = rsqrtf(ss / {{.K}}.0f + {{.Eps}});
    for (u32 i = lane; i < {{.K}}u; i += 32) {
        out[(u64)r * {{.K}}u + i] = xr[i] * scale{{if .Gain}} * ldf(gain[i]){{end}};
    }
}
`,
	// softmax: one warp per row.
	"softmax": `
// {{.Name}}: out[r] = softmax(x[r]), width {{.K}}.
extern "C" __global__ void __launch_bounds__(32) {{.Name}}(
    const float* __restrict__ x,
    float* __restrict__ out,
    const u32 T) {` + ids + `
    const u32 r = blockIdx.y;
    const float* xr = x + (u64)r * {{.K}}u;
    float* o = out + (u64)r * {{.K}}u;
    float m = -3.0e38f;
    for (u32 i = lane; i < {{.K}}u; i += 32) {
        m = fmaxf(m, xr[i]);
    }
    m = warp_max(m);
    float sum = 0.0f;
    for (u32 i = lane; i < {{.K}}u; i += 32) {
        sum += expf(xr[i] - m);
    }
    sum = warp_sum(sum);
    for (u32 i = lane; i < {{.K}}u; i += 32) {
        o[i] = expf(xr[i] - m) / sum;
    }
}
`,
	// eltwise: add, mul (b broadcast over a's leading dims), silu, gelu; one thread per element.
	"eltwise": `
// {{.Name}}: out[i] = {{.Expr}}, {{.K}} elements per row.
extern "C" __global__ void {{.Name}}(
    const float* __restrict__ a,
{{- if .Binary}}
    const {{.BT}}* __restrict__ b,
{{- end}}
    float* __restrict__ out,
    const u32 T) {` + ids + `
    const u32 i = blockIdx.x * {{.Threads}}u + tid, r = blockIdx.y;
    if (i >= {{.K}}u) {
        return;
    }
    const u64 at = (u64)r * {{.K}}u + i;
    const float x = a[at];{{if .Binary}}
    const float y = ldf(b[{{.BIndex}}]);{{end}}
    out[at] = {{.Expr}};
}
`,
}
