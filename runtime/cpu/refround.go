package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// Activation rounding of a reference engine other than ggml's. A graph
// whose attribute act_rounding is q8_2 (gpt-oss, whose goldens come from
// ik_llama.cpp) has the activations of every Q8_0 and MXFP4 matmul rounded
// with that engine's Q8_2 recipe; other graphs keep ggml's quantize_row_q8_0
// (kern.QuantizeActs), which matches llama.cpp exactly. The two differ on
// about one element in 25 by one step, which is as far from the reference
// (5e-3 relative on the gpt-oss goldens) as not rounding at all.

// actRounding reads the graph's act_rounding attribute: true for Q8_2.
func actRounding(g *ir.Graph) (bool, error) {
	switch r := g.Attrs.Str(ir.AttrActRounding, ""); r {
	case "":
		return false, nil
	case ir.ActRoundingQ8_2:
		return true, nil
	default:
		return false, fmt.Errorf("graph attribute %s %q is not supported (%s)", ir.AttrActRounding, r, ir.ActRoundingQ8_2)
	}
}

// quantizeActs encodes an activation row for the dots of a weight type
// whose activation format is t, rounding as the program's reference does.
func (p *program) quantizeActs(t ir.DType, x []float32, dst []byte) {
	if t == ir.Q8_0 && p.q82 {
		quantizeQ8_2(x, dst)
		return
	}
	p.ks.QuantizeActs(t, x, dst)
}

// quantizeQ8_2 rounds as ik_llama.cpp does before its MXFP4 and Q8_0
// matmuls (README-gptoss.md): the block scale is amax/127 rounded to
// bfloat16 (nearest even) and the quants are rint(x·(1/d)) in float32, ties
// to even. The block is written in Q8_0's layout, {f16 d; i8 q[32]}, which
// holds such a d exactly while it lies in f16's normal range (d ≥ 2^-14,
// i.e. amax ≥ 0.0078; smaller blocks contribute below float32 noise), so
// kern's Q8_0-activation dots compute the reference's integer block sums
// and only the float scale arithmetic can differ, by float32 rounding.
// |x·(1/d)| ≤ 127·(1+2^-8) < 127.5 since d is amax/127 to within half a
// bfloat16 step, so the quants fit in int8 without clamping; the clamp
// only keeps NaN and Inf input from wrapping around.
func quantizeQ8_2(x []float32, dst []byte) {
	for i := 0; i < len(x)/32; i++ {
		xb := x[i*32 : i*32+32]
		blk := dst[i*34 : i*34+34]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := quant.BF16ToF32(quant.F32ToBF16(amax / 127))
		var id float32
		if d != 0 {
			id = 1 / d
		}
		h := quant.F32ToF16(d)
		blk[0], blk[1] = byte(h), byte(h>>8)
		for j, v := range xb {
			q := math.RoundToEven(float64(v * id))
			blk[2+j] = byte(int8(max(-127, min(127, q))))
		}
	}
}

// quantizeQ8_2Packed encodes x as kern.PackedActBytes for the packed group
// kernels, rounded as quantizeQ8_2: that format is the plain Q8_0 row
// followed by {int32 8·Σq, float32 d} per block, which
// kern.QuantizePackedActs derives from its own Q8_0 row the same way.
// TestQ8_2PackedMatchesUnpacked holds the two paths together.
func quantizeQ8_2Packed(x []float32, dst []byte) {
	nb := len(x) / 32
	quantizeQ8_2(x, dst[:nb*34])
	side := dst[nb*34 : nb*42]
	for b := 0; b < nb; b++ {
		blk := dst[b*34 : (b+1)*34]
		var s int32
		for _, q := range blk[2:] {
			s += int32(int8(q))
		}
		binary.LittleEndian.PutUint32(side[8*b:], uint32(8*s))
		binary.LittleEndian.PutUint32(side[8*b+4:], math.Float32bits(quant.F16ToF32(uint16(blk[0])|uint16(blk[1])<<8)))
	}
}

// actsEncoding is what decides the bytes of an encoded activation row:
// weights with the same one read the same rows (Q4_K, Q5_K and Q6_K all
// read Q8_K), which lets a matmul reuse the rows the one before it encoded
// (actsKey).
type actsEncoding struct {
	float, q82 bool     // float rows (floatActs), rounded as Q8_2 first
	act        ir.DType // the activation type otherwise
	packedQ8   bool     // in the packed group kernels' Q8_0 format
}

// actsEncodingOf is wr's activation encoding: rounded as the program's
// reference engine does (float rows for floatActs weights, Q8_2 ones for
// its q8_2 float types), else wr's own activation type.
func actsEncodingOf(wr weightRows) actsEncoding {
	if wr.floatActs {
		return actsEncoding{float: true, q82: q82FloatTypes[wr.dt]}
	}
	return rowEncoding(wr.dt, wr.packed != nil)
}

// rowEncoding is the encoding of rows for weights of type dt, rounded as
// the program's reference engine does (quantizeActs): in the packed group
// kernels' format (kern.PackedActBytes) when the weights are packed and
// read Q8_0 activations (a packed Q4_K matrix reads plain Q8_K rows), else
// in dt's activation format. Matmuls (actsEncodingOf) and MoE experts both
// encode through it.
func rowEncoding(dt ir.DType, packed bool) actsEncoding {
	at := actType(dt)
	return actsEncoding{act: at, packedQ8: packed && at == ir.Q8_0}
}

// encodeActs writes one activation row as enc says: Q8_2 for Q8_0
// activations in a q8_2 graph (in the packed kernels' format where the
// weights are packed).
func (p *program) encodeActs(enc actsEncoding, x []float32, dst []byte) {
	switch {
	case enc.float && enc.q82:
		roundQ8_2(x, dst)
	case enc.float:
		for i, v := range x {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case !enc.packedQ8:
		p.quantizeActs(enc.act, x, dst)
	case p.q82:
		quantizeQ8_2Packed(x, dst)
	default:
		p.ks.QuantizePackedActs(x, dst)
	}
}

// q82FloatTypes are the weight types whose matmuls the reference engine's
// Q8_2 recipe rounds besides Q8_0 and MXFP4 (README-archs.md: Q4_K, Q5_K,
// Q6_K). Their kernels here read Q8_K activations, one scale per 256
// elements, which cannot hold Q8_2's scale per 32; so in a q8_2 graph their
// dots take the float path: the activations rounded to Q8_2's values and
// the weight row decoded. It is slower, and only graphs that ask to match
// that engine take it.
var q82FloatTypes = map[ir.DType]bool{ir.Q4_K: true, ir.Q5_K: true, ir.Q6_K: true}

// emulated marks wr for the float path when the program rounds as Q8_2 and
// wr's type needs it: the types above, and F16 and BF16, whose matmuls
// that engine runs on the float input (ggml's, which the kernels here
// follow otherwise, rounds it to the weight's type first).
func (p *program) emulated(wr weightRows) weightRows {
	wr.floatActs = p.q82 && (q82FloatTypes[wr.dt] || wr.dt == ir.F16 || wr.dt == ir.BF16)
	return wr
}

// roundQ8_2 writes x rounded as quantizeQ8_2 (d·q per block of 32, d the
// bfloat16-rounded scale) as float32 bytes: the values the engine's
// integer dot products multiply.
func roundQ8_2(x []float32, dst []byte) {
	var blk [34]byte
	for b := 0; b < len(x)/32; b++ {
		quantizeQ8_2(x[b*32:b*32+32], blk[:])
		d := quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
		for j := 0; j < 32; j++ {
			binary.LittleEndian.PutUint32(dst[4*(b*32+j):], math.Float32bits(d*float32(int8(blk[2+j]))))
		}
	}
}

// floatDots is dots for float activations: each weight row decoded, then a
// float64 dot with every activation row.
func (w weightRows) floatDots(j0, cnt int, acts []byte, ab, R int, dst []float32, ld int) {
	row := make([]float32, w.k)
	for j := 0; j < cnt; j++ {
		if err := quant.Dequantize(w.dt, w.data[(j0+j)*w.rb:][:w.rb], row); err != nil {
			panic(err) // the program checked the weight's size at load
		}
		for r := 0; r < R; r++ {
			a := acts[r*ab:]
			var s float64
			for i, wv := range row {
				s += float64(wv) * float64(math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:])))
			}
			dst[r*ld+j] = float32(s)
		}
	}
}
