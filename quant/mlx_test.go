package quant

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// exactAffine is scale·q + bias in exact arithmetic, rounded once to
// float32: the definition the MLX dtypes decode to.
func exactAffine(scale float32, q int, bias float32) float32 {
	x := new(big.Float).SetPrec(256).SetFloat64(float64(scale))
	x.Mul(x, new(big.Float).SetPrec(256).SetInt64(int64(q)))
	x.Add(x, new(big.Float).SetPrec(256).SetFloat64(float64(bias)))
	f, _ := x.Float32()
	return f
}

// randFloat32 draws a float32 of any sign, exponent in [lo, hi) and a
// random mantissa; with short set, only the top 7 mantissa bits (a bf16).
func randFloat32(r *rand.Rand, lo, hi int, short bool) float32 {
	m := r.Uint32() & 0x7fffff
	if short {
		m &^= 0xffff
	}
	e := uint32(127 + lo + r.IntN(hi-lo))
	return math.Float32frombits(r.Uint32()&0x80000000 | e<<23 | m)
}

func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(a, b, c float32) {
		x := new(big.Float).SetPrec(256).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(256).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(256).SetFloat64(float64(c)))
		want, _ := x.Float32()
		got := FMA32(a, b, c)
		require.Equal(t, math.Float32bits(want), math.Float32bits(got), "fma(%g, %g, %g)", a, b, c)
	}
	for i := 0; i < 200000; i++ {
		a := randFloat32(r, -20, 20, false)
		b := randFloat32(r, -20, 20, false)
		// c near -a·b makes the sum cancel; c far below it makes the
		// product's low bits decide the rounding.
		var c float32
		switch i % 3 {
		case 0:
			c = -float32(a * b)
		case 1:
			c = float32(a*b) * float32(math.Ldexp(1, -25-r.IntN(40)))
		default:
			c = randFloat32(r, -40, 20, false)
		}
		check(a, b, c)
	}
	// Products exactly halfway between two floats, nudged by a tiny c:
	// double rounding through float64 would tie them to even.
	half := math.Float32frombits(0x3f800001) // 1 + 2^-23
	check(half, 1.5, math.SmallestNonzeroFloat32)
	check(half, 1.5, -math.SmallestNonzeroFloat32)
	check(1, 1, 0)
}

// TestMLXDequantExact: every MLX dtype decodes each element to the exact
// scale·q + bias rounded once, for scales of 16 significant bits (the fast
// path) and of 24 (the FMA path), signs and magnitudes mixed.
func TestMLXDequantExact(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, bits := range []int{4, 8} {
		for _, group := range []int{32, 64, 128} {
			d, ok := ir.MLXAffine(bits, group)
			require.True(t, ok)
			require.Equal(t, group, d.BlockSize())
			require.Equal(t, 8+group*bits/8, d.BlockBytes())
			b, g, ok := d.MLXAffineParams()
			require.True(t, ok)
			require.Equal(t, [2]int{bits, group}, [2]int{b, g})
			const blocks = 200
			src := make([]byte, blocks*d.BlockBytes())
			qs := make([]int, blocks*group)
			for i := 0; i < blocks; i++ {
				blk := src[i*d.BlockBytes():]
				scale := randFloat32(r, -12, 2, i%2 == 0)
				bias := randFloat32(r, -12, 2, i%3 == 0)
				if i%7 == 0 {
					bias = 0
				}
				binary.LittleEndian.PutUint32(blk, math.Float32bits(scale))
				binary.LittleEndian.PutUint32(blk[4:], math.Float32bits(bias))
				for j := 0; j < group; j++ {
					q := r.IntN(1 << bits)
					qs[i*group+j] = q
					blk[8+j*bits/8] |= byte(q << (j * bits % 8))
				}
			}
			dst := make([]float32, blocks*group)
			require.NoError(t, Dequantize(d, src, dst))
			for i := 0; i < blocks; i++ {
				blk := src[i*d.BlockBytes():]
				scale := math.Float32frombits(binary.LittleEndian.Uint32(blk))
				bias := math.Float32frombits(binary.LittleEndian.Uint32(blk[4:]))
				for j := 0; j < group; j++ {
					want := exactAffine(scale, qs[i*group+j], bias)
					require.Equal(t, math.Float32bits(want), math.Float32bits(dst[i*group+j]), "%s block %d element %d", d, i, j)
				}
			}
			require.Error(t, Dequantize(d, src[:len(src)-1], dst))
		}
	}
}

// TestMLXQuantize: Quantize is MLX's affine_quantize: the group's edge of
// larger magnitude decodes exactly (up to the bf16 rounding of the stored
// scale and bias), every value is within about one and a half steps, and
// a constant group is exact.
func TestMLXQuantize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []ir.DType{ir.MLXQ4G32, ir.MLXQ4G64, ir.MLXQ4G128, ir.MLXQ8G32, ir.MLXQ8G64, ir.MLXQ8G128} {
		bits, group, _ := d.MLXAffineParams()
		const n = 4096
		src := make([]float32, n)
		for i := range src {
			src[i] = BF16ToF32(F32ToBF16(float32(r.NormFloat64() * 0.02)))
		}
		for i := 0; i < group; i++ {
			src[i] = 0.5 // one constant group
		}
		buf := make([]byte, n/group*d.BlockBytes())
		require.NoError(t, Quantize(d, src, buf))
		back := make([]float32, n)
		require.NoError(t, Dequantize(d, buf, back))
		for gi := 0; gi < n/group; gi++ {
			w := src[gi*group : (gi+1)*group]
			lo, hi := w[0], w[0]
			for _, x := range w {
				lo, hi = min(lo, x), max(hi, x)
			}
			step := float64(hi-lo) / float64(int(1)<<bits-1)
			for j, x := range w {
				e := math.Abs(float64(back[gi*group+j] - x))
				require.LessOrEqual(t, e, 1.6*step+1e-6*math.Abs(float64(x)), "%s group %d element %d: %g decodes to %g", d, gi, j, x, back[gi*group+j])
			}
		}
		for i := 0; i < group; i++ {
			require.Equal(t, float32(0.5), back[i], "%s: a constant group", d)
		}
	}
}

// TestPackMLXAffine: the repack of MLX's tensors (U32 words, scales and
// biases in f32, f16 or bf16) decodes to scale·q + bias with the q of the
// words, least significant bits first, and refuses wrong lengths.
func TestPackMLXAffine(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, n = 3, 128
	for _, d := range []ir.DType{ir.MLXQ4G32, ir.MLXQ8G64, ir.MLXQ4G128} {
		bits, group, _ := d.MLXAffineParams()
		words := make([]uint32, rows*n*bits/32)
		for i := range words {
			words[i] = r.Uint32()
		}
		wb := make([]byte, 4*len(words))
		for i, w := range words {
			binary.LittleEndian.PutUint32(wb[4*i:], w)
		}
		groups := rows * n / group
		for _, st := range []MLXScaleType{MLXScaleF32, MLXScaleF16, MLXScaleBF16} {
			sb := make([]byte, groups*st.size())
			bb := make([]byte, groups*st.size())
			scales := make([]float32, groups)
			biases := make([]float32, groups)
			for g := 0; g < groups; g++ {
				s, b := float32(r.NormFloat64()*0.01), float32(r.NormFloat64()*0.1)
				switch st {
				case MLXScaleF32:
					binary.LittleEndian.PutUint32(sb[4*g:], math.Float32bits(s))
					binary.LittleEndian.PutUint32(bb[4*g:], math.Float32bits(b))
				case MLXScaleF16:
					s, b = F16ToF32(F32ToF16(s)), F16ToF32(F32ToF16(b))
					binary.LittleEndian.PutUint16(sb[2*g:], F32ToF16(s))
					binary.LittleEndian.PutUint16(bb[2*g:], F32ToF16(b))
				case MLXScaleBF16:
					s, b = BF16ToF32(F32ToBF16(s)), BF16ToF32(F32ToBF16(b))
					binary.LittleEndian.PutUint16(sb[2*g:], F32ToBF16(s))
					binary.LittleEndian.PutUint16(bb[2*g:], F32ToBF16(b))
				}
				scales[g], biases[g] = s, b
			}
			packed, err := PackMLXAffine(d, rows, n, wb, sb, st, bb, st)
			require.NoError(t, err)
			out := make([]float32, rows*n)
			require.NoError(t, Dequantize(d, packed, out))
			per := 32 / bits
			for i := range out {
				q := int(words[i/per]>>(bits*(i%per))) & (1<<bits - 1)
				g := i / group
				require.Equal(t, exactAffine(scales[g], q, biases[g]), out[i], "%s element %d", d, i)
			}
			_, err = PackMLXAffine(d, rows, n, wb[:len(wb)-4], sb, st, bb, st)
			require.ErrorContains(t, err, "weight is")
			_, err = PackMLXAffine(d, rows, n, wb, sb[:len(sb)-2], st, bb, st)
			require.ErrorContains(t, err, "scales are")
			_, err = PackMLXAffine(d, rows, n+1, wb, sb, st, bb, st)
			require.ErrorContains(t, err, "whole number of groups")
			require.ErrorContains(t, PackMLXAffineInto(packed[1:], d, rows, n, wb, sb, st, bb, st), "the output is")
		}
	}
	_, err := PackMLXAffine(ir.Q4_0, 1, 32, nil, nil, MLXScaleF32, nil, MLXScaleF32)
	require.ErrorContains(t, err, "not an MLX affine dtype")
}

// TestMXFP4FromHF: the Hugging Face layout (element 2b in the low nibble of
// byte b) repacks into ggml blocks holding the same values.
func TestMXFP4FromHF(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const nb = 64
	blocks := make([]byte, 16*nb)
	scales := make([]byte, nb)
	for i := range blocks {
		blocks[i] = byte(r.Uint32())
	}
	for i := range scales {
		scales[i] = byte(100 + r.IntN(50))
	}
	dst := make([]byte, 17*nb)
	require.NoError(t, MXFP4FromHF(dst, blocks, scales))
	got := make([]float32, 32*nb)
	require.NoError(t, Dequantize(ir.MXFP4, dst, got))
	e2m1 := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	for i := range got {
		code := blocks[i/2] >> (4 * (i % 2)) & 15
		want := e2m1[code&7] * math.Ldexp(1, int(scales[i/32])-127)
		if code&8 != 0 {
			want = -want
		}
		require.Equal(t, float32(want), got[i], "element %d", i)
	}
	require.Error(t, MXFP4FromHF(dst[:17], blocks, scales))
}
