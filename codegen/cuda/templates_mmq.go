package cuda

import (
	"bytes"
	"fmt"
	"text/template"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/ir"
)

// The integer prefill kernels of Q4_0, Q5_0 and Q8_0 weights (q8Dots with a
// block in mmqBlockBytes): matmul and swiglu tiles on the tensor cores in
// 8-bit integers (mma.sync m16n8k32 s8·s8 → s32), as llama.cpp's mmq
// multiplies these types.
//
// Why. These weights multiply activations rounded to Q8_0 at every step
// size (RoundsActivations), so a 32-element block's dot is an integer sum
// Σ q_x·q_w, exact in s32, times d_x·d_w: one mma per block per 16×8 tile,
// at twice the f16 rate, where the f16 kernel (templates_tiled.go) needs
// three f16 mmas (activation and weight split into hi and lo) over
// dequantized floats. On an H200, 7B Q4_0, a 512-token prefill: the f16
// kernels 466 of 480 ms a step (1,046 tok/s); these 41 ms of 58 (8,757
// tok/s, mmqShape 4x2x128).
//
// Numerics. The rows come from a q8_quant launch (T ≥ 2) into the step's
// scratch, rounded as at T = 1 and as the reference engines round them:
// v = x·RMSNorm scale·gain, d = amax/127 kept as f16, q = roundf(v/d);
// Q4_0 weights are their nibbles − 8, Q5_0's their 5-bit codes − 16. Each block's integer dot is exact, so
// the result differs from ir/eval on the rounded values only by the f32
// products d_x·d_w·sum and the f32 sum over blocks.
//
// Block shape (mmqShape): WM × WN warps, 32·WM tokens × TileN features
// (swiglu: TileN/2 gate and TileN/2 up rows), K in stages of 4 blocks (128
// elements). Warp (wm, wn) owns tokens 32·wm .. +31 and features
// wn·TileN/WN .. as 2 × NI m16n8 tiles per matrix.
//   - loads, one stage ahead in registers (issued before the current
//     stage's mmas): the rows' codes with 16-byte loads, their scales, and
//     pairs of weight blocks (36, 44 or 68 bytes, 4-byte aligned: K is a
//     multiple of 64) with word loads;
//   - store stage: the codes as they are, the weight codes as s8 words
//     (Q4_0: low nibbles are elements 0–15, high nibbles 16–31), the
//     scales as floats. Rows are 36 words apart (32 + 4 of padding), so
//     the 32 lanes' fragment reads — row g, word q — hit 32 distinct banks;
//   - compute: per block, one mma per 16×8 tile into zeroed s32, then each
//     element += float(sum)·d_x·d_w;
//   - epilogue: as the f16 kernel's, without its row scale.

// mmqParams are the fields mmqTemplate reads.
type mmqParams struct {
	*gpu.Params
	TileT, TileN int64
	WN           int64 // warps along the features (along the tokens: TileT/32)
	CX, CD, PN   int64 // per thread per stage: 16-byte code loads, scales, weight block pairs
	Mats         int64 // weight matrices per tile: 1, or 2 for swiglu (gate and up rows)
	Width        int64 // output features: N, or F for swiglu
	NB           int64 // 32-element blocks per row, K/32
	BB           int64 // bytes per weight block: 18 (Q4_0), 22 (Q5_0) or 34 (Q8_0)
	Nibbles      bool  // Q4_0: 16 bytes of nibble pairs; Q8_0: 32 s8 codes
	Q5           bool  // Q5_0: the fifth bits in 4 bytes before the nibbles
	QW           int64 // words of codes per weight block as stored: 4 or 8
	PairWords    int64 // words of two consecutive weight blocks, BB/2
	Hi           int64 // the word of a pair whose high half is the second block's scale
	NI           int64 // n8 tiles per warp and matrix
	Gate, Up     string
	RowScale     bool  // tileEpilogue's: acc[0] (and acc[1]), no row scale
	Stride       int64 // shared row stride in words
}

// mmqStride is the shared row stride in words: a stage of 4 blocks (32
// words) plus 4 of padding.
const mmqStride = 8*4 + 4

// mmqShape is the integer kernels' block shape, "WMxWNxN": WM × WN warps,
// warp (wm, wn) owning 32 tokens and N/WN features of a 32·WM-token ×
// N-feature matmul tile (swiglu: N/2 gate and N/2 up rows). A variable, not
// a constant, so that a device tuning run can link binaries of other shapes
// (go build -ldflags "-X .../codegen/cuda.mmqShape=2x4x128"). H200, 7B
// Q4_0 prefill of 512 tokens, one call, matmul_tiled + swiglu_tiled ms:
// 4x2x128 21.7 + 19.6, 2x2x128 24.7 + 20.4, 2x4x256 25.6 + 23.7, 2x2x64
// 26.7 + 21.1, 2x4x128 29.3 + 22.1, 1x4x128 36.5 + 31.5.
var mmqShape = "4x2x128"

// mmqTiles parses mmqShape: warps along tokens and features, matmul
// features per tile. A shape the kernel cannot take (each thread's share
// of a stage's loads must be whole) falls back to 4x2x128.
func mmqTiles() (wm, wn, tn int64) {
	if _, err := fmt.Sscanf(mmqShape, "%dx%dx%d", &wm, &wn, &tn); err == nil && wm >= 1 && wn >= 1 && wn <= 4 &&
		wm*wn <= 8 && tn%(16*wn) == 0 && (tn*2)%(32*wm*wn) == 0 {
		return wm, wn, tn
	}
	return 4, 2, 128
}

var mmqCompiled = template.Must(template.New("mmq").Parse(mmqTemplate))

// mmqBlockBytes are the weight dtypes the integer kernels decode, with
// their block sizes.
var mmqBlockBytes = map[ir.DType]int64{ir.Q4_0: 18, ir.Q8_0: 34, ir.Q5_0: 22}

// useMMQ reports whether a product of K-long rows of dtype wdt takes the
// integer kernel: a q8Dots dtype with K a multiple of 64, so that weight
// rows and block pairs are 4-byte aligned.
func useMMQ(wdt ir.DType, K int64) bool {
	return q8Dots[wdt] && mmqBlockBytes[wdt] != 0 && K%64 == 0
}

// addMMQ registers the integer kernel for tiled family ("matmul_tiled" or
// "swiglu_tiled") with the product's params; it returns the kernel's name
// and the features one block covers.
func addMMQ(e *gpu.Emitter, family string, wdt ir.DType, p *gpu.Params, width int64) (name string, tileT, tileN int64, err error) {
	wm, wn, tn := mmqTiles()
	p.NW = int(wm * wn)
	p.Threads = 32 * p.NW
	mp := &mmqParams{Params: p, TileT: 32 * wm, TileN: tn, WN: wn, Mats: 1, Width: width, NB: p.K / 32,
		BB: mmqBlockBytes[wdt], Nibbles: wdt == ir.Q4_0, Q5: wdt == ir.Q5_0, QW: 8, Stride: mmqStride, Gate: "acc[0]", Up: "acc[1]"}
	if family == "swiglu_tiled" {
		mp.Mats, mp.TileN = 2, tn/2
	}
	if mp.Nibbles {
		mp.QW = 4
	}
	mp.PairWords, mp.Hi = mp.BB/2, (mp.BB-2)/4
	mp.NI = mp.TileN / (8 * wn)
	th := int64(p.Threads)
	mp.CX, mp.CD, mp.PN = mp.TileT*8/th, mp.TileT*4/th, mp.Mats*mp.TileN*2/th
	name, err = e.Register(family, wdt.String(), p.Name, func(name string) (string, error) {
		mp.Name = name
		var b bytes.Buffer
		if err := mmqCompiled.Execute(&b, mp); err != nil {
			return "", fmt.Errorf("rendering %s (integer): %w", family, err)
		}
		return b.String(), nil
	})
	return name, mp.TileT, mp.TileN, err
}

// mmqTemplate renders the integer matmul_tiled and, with .F set,
// swiglu_tiled. It sees an mmqParams.
const mmqTemplate = `
// {{.Name}}: {{if .F}}h = xq[t] · wᵀ, out[t, j] = silu(h[j]) · h[{{.F}} + j]{{else}}out[t, j] = xq[t] · w[j]{{if .Bias}} + bias[j]{{end}}{{if .Residual}} + res[t, j]{{end}}{{end}}, w {{.DT}}[{{.N}}, {{.K}}],
// xq[t] = q8_0({{if .Norm}}rmsnorm(x[t]){{if .Gain}}·gain{{end}}{{else}}x[t]{{end}}) from the scratch{{if .Q8.Off}} at {{.Q8.Off}}·T bytes{{end}};
// prefill: a {{.TileT}}-token × {{.TileN}}-feature tile per block, mma.m16n8k32 in s8.
extern "C" __global__ void __launch_bounds__({{.Threads}}) {{.Name}}(
    const u8* __restrict__ xq,
    const u8* __restrict__ w,` + extraParams + `
    float* __restrict__ out,
    const u32 T) {` + ids + `
    __shared__ v16 xs[{{.TileT}} * {{.Stride}} / 4];          // activation codes, four s8 per word
    __shared__ float xd[{{.TileT}} * 4];                     // their blocks' scales
    __shared__ u32 ws[{{.Mats}} * {{.TileN}} * {{.Stride}}]; // weight codes as s8{{if .Nibbles}} (nibble − 8){{end}}{{if .Q5}} (code − 16){{end}}
    __shared__ float wd[{{.Mats}} * {{.TileN}} * 4];         // their blocks' scales
    const u32* xw = (const u32*)xs;
    const u32 j0 = blockIdx.x * {{.TileN}}u, t0 = blockIdx.y * {{.TileT}}u;
    const u32 g = lane >> 2, q = lane & 3u;   // the mma's groupID and threadID_in_group
    const u32 wm = warp / {{.WN}}u, wn = warp % {{.WN}}u; // the warp's 32 tokens and {{.TileN}}/{{.WN}} features
    const u8* xq0 = xq{{if .Q8.Off}} + (u64){{.Q8.Off}}u * T{{end}};
    float acc[{{.Mats}}][2][{{.NI}}][4];
#pragma unroll
    for (u32 m = 0; m < {{.Mats}}u; ++m) {
#pragma unroll
        for (u32 mi = 0; mi < 2; ++mi) {
#pragma unroll
            for (u32 ni = 0; ni < {{.NI}}u; ++ni) {
#pragma unroll
                for (u32 i = 0; i < 4; ++i) {
                    acc[m][mi][ni][i] = 0.0f;
                }
            }
        }
    }
    // A stage's global reads land in registers (cx, cd, pw) one stage
    // ahead: they are issued before the current stage's mmas.
    // cx[i]: 16 bytes of codes, row it / 8, bytes 16·(it % 8) of the stage (it = tid + {{.Threads}}i);
    // cd[i]: the scale of row it / 4, block it % 4 of the stage;
    // pw[i]: weight blocks kb + 2p, kb + 2p + 1 (p = it % 2) of row it / 2 of the tile's rows.
    v16 cx[{{.CX}}];
    float cd[{{.CD}}];
    u32 pw[{{.PN}}][{{.PairWords}}];
#define MMQ_LOAD(kb) \
    { \
        _Pragma("unroll") for (u32 i = 0; i < {{.CX}}u; ++i) { \
            const u32 it = tid + {{.Threads}}u * i, t = t0 + (it >> 3), b = (kb) + ((it & 7u) >> 1); \
            cx[i] = v16{0, 0, 0, 0}; \
            if (t < T && b < {{.NB}}u) { \
                cx[i] = ld16((const v16*)(xq0 + (u64)t * {{.Q8.RowBytes}}u + 32u * (kb) + 16u * (it & 7u))); \
            } \
        } \
        _Pragma("unroll") for (u32 i = 0; i < {{.CD}}u; ++i) { \
            const u32 it = tid + {{.Threads}}u * i, t = t0 + (it >> 2), b = (kb) + (it & 3u); \
            cd[i] = 0.0f; \
            if (t < T && b < {{.NB}}u) { \
                cd[i] = ((const float*)(xq0 + (u64)t * {{.Q8.RowBytes}}u + {{.K}}u))[b]; \
            } \
        } \
        _Pragma("unroll") for (u32 i = 0; i < {{.PN}}u; ++i) { \
            const u32 it = tid + {{.Threads}}u * i, jj = (it >> 1) % {{.TileN}}u, m = it / (2u * {{.TileN}}u), j = j0 + jj, b = (kb) + 2u * (it & 1u); \
            _Pragma("unroll") for (u32 c = 0; c < {{.PairWords}}u; ++c) { \
                pw[i][c] = 0; \
            } \
            if (j < {{.Width}}u && b < {{.NB}}u) { \
                const u32* src = (const u32*)(w + (u64)(j + m * {{.Width}}u) * {{.RowBytes}}u + (u64)b * {{.BB}}u); \
                _Pragma("unroll") for (u32 c = 0; c < {{.PairWords}}u; ++c) { \
                    pw[i][c] = ld_w32(src + c); \
                } \
            } \
        } \
    }
    MMQ_LOAD(0u)
    for (u32 kb = 0; kb < {{.NB}}u; kb += 4) {
        // Registers to shared memory: the codes as they are, the weight
        // blocks as s8 words (the first block of a pair starts at byte 0,
        // its codes at byte 2; the second at byte {{.BB}}, its codes word-aligned).
#pragma unroll
        for (u32 i = 0; i < {{.CX}}u; ++i) {
            const u32 it = tid + {{.Threads}}u * i;
            xs[(it >> 3) * ({{.Stride}}u / 4) + (it & 7u)] = cx[i];
        }
#pragma unroll
        for (u32 i = 0; i < {{.CD}}u; ++i) {
            xd[tid + {{.Threads}}u * i] = cd[i];
        }
#pragma unroll
        for (u32 i = 0; i < {{.PN}}u; ++i) {
            const u32 it = tid + {{.Threads}}u * i, p = it & 1u, r = it >> 1;
            u32* dst = ws + r * {{.Stride}}u + 16u * p;
            wd[r * 4u + 2u * p] = h2f(f16(pw[i][0] & 0xffffu));
            wd[r * 4u + 2u * p + 1] = h2f(f16(pw[i][{{.Hi}}] >> 16));
{{- if .Q5}}
            // Q5_0: d, the fifth bits (4 bytes), the nibbles (16 bytes): qh at bytes 2 and {{.BB}} + 2 of the pair.
            const u32 qh0 = (pw[i][0] >> 16) | (pw[i][1] << 16), qh1 = pw[i][{{.Hi}} + 1];
#pragma unroll
            for (u32 c = 0; c < 4u; ++c) {
                const u32 c0 = (pw[i][1 + c] >> 16) | (pw[i][2 + c] << 16), c1 = pw[i][{{.Hi}} + 2 + c];
                dst[c] = s8_q5(c0, qh0 >> (4 * c));
                dst[4 + c] = s8_q5(c0 >> 4, qh0 >> (16 + 4 * c));
                dst[8 + c] = s8_q5(c1, qh1 >> (4 * c));
                dst[12 + c] = s8_q5(c1 >> 4, qh1 >> (16 + 4 * c));
            }
{{- else}}
#pragma unroll
            for (u32 c = 0; c < {{.QW}}u; ++c) {
                const u32 c0 = (pw[i][c] >> 16) | (pw[i][c + 1] << 16), c1 = pw[i][{{.Hi}} + 1 + c];
{{- if .Nibbles}}
                dst[c] = s8_nibbles(c0);
                dst[4 + c] = s8_nibbles(c0 >> 4);
                dst[8 + c] = s8_nibbles(c1);
                dst[12 + c] = s8_nibbles(c1 >> 4);
{{- else}}
                dst[c] = c0;
                dst[8 + c] = c1;
{{- end}}
            }
{{- end}}
        }
        __syncthreads();
        if (kb + 4 < {{.NB}}u) {
            MMQ_LOAD(kb + 4)
        }
        // Per block: one mma per 16×8 tile (PTX ISA, mma.m16n8k32 .s8: A regs {row g, g+8} × {k 4q.., 16+4q..};
        // B regs k {4q.., 16+4q..} of feature g; D elements {row g, g+8} × {feature 2q, 2q+1}).
#pragma unroll
        for (u32 b = 0; b < 4u; ++b) {
            u32 a[2][4];
            float dx[2][2];
#pragma unroll
            for (u32 mi = 0; mi < 2; ++mi) {
                const u32 r = wm * 32 + mi * 16 + g, at = r * {{.Stride}}u + 8 * b + q;
                a[mi][0] = xw[at];
                a[mi][1] = xw[at + 8 * {{.Stride}}u];
                a[mi][2] = xw[at + 4];
                a[mi][3] = xw[at + 8 * {{.Stride}}u + 4];
                dx[mi][0] = xd[r * 4u + b];
                dx[mi][1] = xd[(r + 8) * 4u + b];
            }
#pragma unroll
            for (u32 m = 0; m < {{.Mats}}u; ++m) {
#pragma unroll
                for (u32 ni = 0; ni < {{.NI}}u; ++ni) {
                    const u32 f = m * {{.TileN}}u + wn * {{.NI}}u * 8 + ni * 8, at = (f + g) * {{.Stride}}u + 8 * b + q;
                    const u32 bw[2] = {ws[at], ws[at + 4]};
                    const float dw0 = wd[(f + 2 * q) * 4u + b], dw1 = wd[(f + 2 * q + 1) * 4u + b];
#pragma unroll
                    for (u32 mi = 0; mi < 2; ++mi) {
                        int s[4] = {0, 0, 0, 0};
                        mma_16832_s8(s, a[mi], bw);
                        acc[m][mi][ni][0] += float(s[0]) * (dx[mi][0] * dw0);
                        acc[m][mi][ni][1] += float(s[1]) * (dx[mi][0] * dw1);
                        acc[m][mi][ni][2] += float(s[2]) * (dx[mi][1] * dw0);
                        acc[m][mi][ni][3] += float(s[3]) * (dx[mi][1] * dw1);
                    }
                }
            }
        }
        __syncthreads(); // the next stage overwrites the tiles
    }
#undef MMQ_LOAD
` + tileEpilogue + `}
`
