package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

var kquantTypes = []ir.DType{ir.Q4_K, ir.Q6_K, ir.Q5_K, ir.Q3_K, ir.Q2_K}

// kquantBlocks are the super-block counts the k-quant kernels are checked at.
var kquantBlocks = []int{1, 2, 3, 11, 5632 / 256, 11008 / 256}

// kqBlock is one decoded k-quant super-block: the stored (unsigned) quants,
// the scale of each element's 16-element group, and for Q4_K/Q5_K the minima
// of the eight 32-element sub-blocks. Q6_K values are q-32, Q3_K's q-4
// (kqOffset).
type kqBlock struct {
	q     [256]int32
	sc    [16]int32
	mn    [8]int32
	mn16  [16]int32 // Q2_K's minima, per 16 elements
	d, dm float32   // f16 d and dmin of the weights
}

func decodeKQ(wt ir.DType, x []byte) (b kqBlock) {
	switch wt {
	case ir.Q4_K, ir.Q5_K:
		for s := 0; s < 8; s++ {
			sc, mn := k4scale(x[4:16], s)
			b.sc[2*s], b.sc[2*s+1], b.mn[s] = sc, sc, mn
		}
		qs := x[16:]
		if wt == ir.Q5_K {
			qs = x[48:]
		}
		for e := range b.q {
			g, r := e/64, e%64
			v := int32(qs[32*g+r%32])
			if r < 32 {
				v &= 15
			} else {
				v >>= 4
			}
			if wt == ir.Q5_K {
				v |= int32(x[16+r%32]>>(2*g+r/32)&1) << 4
			}
			b.q[e] = v
		}
		b.d, b.dm = h16(x[0:]), h16(x[2:])
	case ir.Q6_K:
		for e := range b.q {
			n, k, l := e/128, e%128/32, e%32
			lo := int32(x[64*n+32*(k&1)+l]>>(4*(k>>1))) & 15
			hi := int32(x[128+32*n+l]>>(2*k)) & 3
			b.q[e] = lo | hi<<4
		}
		for j := range b.sc {
			b.sc[j] = int32(int8(x[192+j]))
		}
		b.d = h16(x[208:])
	case ir.Q3_K:
		for e := range b.q {
			n, k, l := e/128, e%128/32, e%32
			lo := int32(x[32+32*n+l]>>(2*k)) & 3
			hi := int32(x[l]>>(4*n+k)) & 1
			b.q[e] = lo | hi<<2
		}
		var sc [16]int32
		q3Scales((*[12]byte)(x[96:]), &sc)
		b.sc = sc
		b.d = h16(x[108:])
	case ir.Q2_K:
		for e := range b.q {
			n, k, l := e/128, e%128/32, e%32
			b.q[e] = int32(x[16+32*n+l]>>(2*k)) & 3
		}
		for j := range b.sc {
			b.sc[j], b.mn16[j] = int32(x[j]&15), int32(x[j]>>4)
		}
		b.d, b.dm = h16(x[80:]), h16(x[82:])
	default:
		panic(wt)
	}
	return b
}

// kqOffset is what a k-quant without minima subtracts from its stored
// quants (Q6_K 32, Q3_K 4); 0 for Q2_K, Q4_K and Q5_K, which have minima.
func kqOffset(wt ir.DType) int32 {
	switch wt {
	case ir.Q6_K:
		return 32
	case ir.Q3_K:
		return 4
	}
	return 0
}

// hsum8 is hsum_float_8.
func hsum8(acc *[8]float32) float32 {
	var r [4]float32
	for k := range r {
		r[k] = acc[k+4] + acc[k]
	}
	return (r[0] + r[2]) + (r[1] + r[3])
}

// emulateKQuant computes what gemvQ{2..6}_KAVX2 compute, in scalar Go (the
// order described in codegen/goasm/gen/kerndot/kquants.go): per super-block
// eight exact int32 lanes (lane k: elements ≡ 4k..4k+3 mod 32, each times
// its scale; Q6_K and Q3_K less kqOffset·(sc[2k]·bs[2k] +
// sc[2k+1]·bs[2k+1])) FMA'd with d_y·d_w into eight float lanes; Q4_K/Q5_K
// minima per pair of sub-blocks FMA'd with -(d_y·dmin_w) into four float
// lanes; Q2_K's minima (lane k: groups 2k, 2k+1) FMA'd with -(d_y·dmin_w)
// into the eight lanes before the sums. It also returns Σ|terms| for
// tolerance bounds.
func emulateKQuant(wt ir.DType, nb int, w, a []byte) (float32, float64) {
	bb := wt.BlockBytes()
	var acc [8]float32
	var accm [4]float32
	var mag float64
	for i := 0; i < nb; i++ {
		b := decodeKQ(wt, w[i*bb:])
		y := (*[292]byte)(a[i*292:])
		yd := q8kD(y)
		d := yd * b.d
		var lanes [8]int64
		var sumAbs int64
		for e, q := range b.q {
			p := int64(b.sc[e/16]) * int64(q) * int64(i8(y[4+e]))
			lanes[e%32/4] += p
			v := q - kqOffset(wt)
			p = int64(b.sc[e/16]) * int64(v) * int64(i8(y[4+e]))
			sumAbs += max(p, -p)
		}
		mag += math.Abs(float64(d)) * float64(sumAbs)
		if wt == ir.Q2_K {
			// Minima first, lane k from groups 2k and 2k+1, into acc.
			dmin := yd * b.dm
			var mAbs int64
			for k := range acc {
				prod := b.mn16[2*k]*bsum(y, 2*k) + b.mn16[2*k+1]*bsum(y, 2*k+1)
				acc[k] = fma32(-dmin, float32(prod), acc[k])
			}
			for e := 0; e < 256; e++ {
				p := int64(b.mn16[e/16]) * int64(i8(y[4+e]))
				mAbs += max(p, -p)
			}
			mag += math.Abs(float64(dmin)) * float64(mAbs)
		} else if off := int64(kqOffset(wt)); off != 0 {
			for k := range lanes {
				lanes[k] -= off * (int64(b.sc[2*k])*int64(bsum(y, 2*k)) + int64(b.sc[2*k+1])*int64(bsum(y, 2*k+1)))
			}
		} else {
			dmin := yd * b.dm
			var mAbs int64
			for j := range accm {
				prod := int32(0)
				for s := 2 * j; s < 2*j+2; s++ {
					prod += b.mn[s] * (bsum(y, 2*s) + bsum(y, 2*s+1))
				}
				accm[j] = fma32(-dmin, float32(prod), accm[j])
			}
			for e := 0; e < 256; e++ {
				p := int64(b.mn[e/32]) * int64(i8(y[4+e]))
				mAbs += max(p, -p)
			}
			mag += math.Abs(float64(dmin)) * float64(mAbs)
		}
		for k, l := range lanes {
			if l != int64(int32(l)) {
				panic("lane overflows int32")
			}
			acc[k] = fma32(d, float32(int32(l)), acc[k])
		}
	}
	r := hsum8(&acc)
	if kqOffset(wt) == 0 && wt != ir.Q2_K {
		r += (accm[0] + accm[2]) + (accm[1] + accm[3])
	}
	return r, mag
}

// kquantVariants are the variants with k-quant kernels; each gives the
// emulated order bit for bit (skipKQuant skips a type a variant has no
// kernel for).
var kquantVariants = []string{"avx2", "avx512", "neon"}

// skipKQuant skips a type the active variant has no k-quant kernel for.
func skipKQuant(t *testing.T, wt ir.DType) {
	if f, _ := Current().v.kquantGemv(wt); f == nil {
		t.Skipf("no %s kernel", wt)
	}
}

func TestAVX2KQuantMatchesGeneric(t *testing.T) {
	for _, v := range kquantVariants {
		t.Run(v, func(t *testing.T) { testKQuantMatchesGeneric(t, v) })
	}
}

func testKQuantMatchesGeneric(t *testing.T, v string) {
	useVariant(t, v)
	for _, wt := range kquantTypes {
		for _, nb := range kquantBlocks {
			t.Run(fmt.Sprintf("%s/%d", wt, nb), func(t *testing.T) {
				skipKQuant(t, wt)
				n := 256 * nb
				for trial := range 3 {
					seed := uint64(nb)*977 + uint64(wt)*13 + uint64(trial)
					w, _ := makeWeights(t, wt, n, seed)
					x := randRow(n, []float64{1, 0.01, 40}[trial], seed+1)
					a := make([]byte, ActBytes(wt, n))
					QuantizeActs(ActType(wt), x, a)

					got := Dot(wt, n, w, a)
					gen := dotWith("generic", wt, n, w, a)
					emu, mag := emulateKQuant(wt, nb, w, a)
					require.Equal(t, math.Float32bits(emu), math.Float32bits(got), "%s %v, emulated %v", v, got, emu)
					require.LessOrEqual(t, math.Abs(float64(got)-float64(gen)), 1e-5*mag, "%s %v generic %v Σ|terms| %v", v, got, gen, mag)
				}
			})
		}
	}
}

// TestAVX2KQuantExactInts: with d_y = d_w = dmin_w = 1 every float step is
// exact as long as Σ|terms| < 2^24, so both the AVX2 and the generic kernels
// must return the integer dot. Random scale bytes cover all scales and
// minima; the first super-block has an extreme sub-block (largest quants
// and scales against ±127), the second a zero activation block.
func TestAVX2KQuantExactInts(t *testing.T) {
	for _, v := range kquantVariants {
		t.Run(v, func(t *testing.T) { testKQuantExactInts(t, v) })
	}
}

func testKQuantExactInts(t *testing.T, v string) {
	useVariant(t, v)
	for _, wt := range kquantTypes {
		for _, nb := range kquantBlocks {
			t.Run(fmt.Sprintf("%s/%d", wt, nb), func(t *testing.T) {
				skipKQuant(t, wt)
				r := rand.New(rand.NewPCG(uint64(nb), uint64(wt)))
				n := 256 * nb
				bb := wt.BlockBytes()
				// |activation| bound keeping Σ|terms| < 2^24.
				ymax := map[ir.DType]int{ir.Q4_K: 200, ir.Q5_K: 90, ir.Q6_K: 50, ir.Q3_K: 600, ir.Q2_K: 600}[wt] / nb
				ymax = max(1, min(127, ymax))
				w := make([]byte, nb*bb)
				a := make([]byte, ActBytes(wt, n))
				for i := 0; i < nb; i++ {
					x, y := w[i*bb:(i+1)*bb], a[i*292:(i+1)*292]
					for j := range x {
						x[j] = byte(r.IntN(256))
					}
					const one = 0x3c00 // f16 1.0
					switch wt {
					case ir.Q6_K:
						binary.LittleEndian.PutUint16(x[208:], one)
					case ir.Q3_K:
						binary.LittleEndian.PutUint16(x[108:], one)
					case ir.Q2_K:
						binary.LittleEndian.PutUint16(x[80:], one)
						binary.LittleEndian.PutUint16(x[82:], one)
					default:
						binary.LittleEndian.PutUint16(x[0:], one)
						binary.LittleEndian.PutUint16(x[2:], one)
					}
					binary.LittleEndian.PutUint32(y, math.Float32bits(1))
					for j := 0; j < 256; j++ {
						y[4+j] = byte(int8(r.IntN(2*ymax+1) - ymax))
					}
				}
				if nb <= 3 {
					x, y := w, a
					switch wt {
					case ir.Q4_K, ir.Q5_K: // sub-block 0: scale 63, quants 15 (31), acts 127
						x[4] |= 63
						for l := 0; l < 32; l++ {
							x[bb-128+l] |= 15
							y[4+l] = 127
						}
						if wt == ir.Q5_K {
							for l := 0; l < 32; l++ {
								x[16+l] |= 1
							}
						}
					case ir.Q6_K: // group 0: scale -128, quants 0 (value -32), acts -127
						x[192] = 0x80
						for l := 0; l < 16; l++ {
							x[l] &^= 15
							x[128+l] &^= 3
							y[4+l] = 0x81 // -127
						}
					case ir.Q2_K: // group 0: scale 15, min 15, quants 3, acts 127
						x[0] = 0xff
						for l := 0; l < 16; l++ {
							x[16+l] |= 3
							y[4+l] = 127
						}
					case ir.Q3_K: // group 0: scale -32, quants 0 (value -4), acts -127
						x[96] &^= 15
						x[104] &^= 3
						for l := 0; l < 16; l++ {
							x[l] &^= 1
							x[32+l] &^= 3
							y[4+l] = 0x81
						}
					}
				}
				if nb >= 2 {
					clear(a[292+4 : 2*292])
				}
				// bsums of the activations as built.
				for i := 0; i < nb; i++ {
					y := a[i*292:]
					for j := 0; j < 16; j++ {
						var s int32
						for l := 0; l < 16; l++ {
							s += i8(y[4+16*j+l])
						}
						binary.LittleEndian.PutUint16(y[260+2*j:], uint16(int16(s)))
					}
				}
				var want, mag int64
				for i := 0; i < nb; i++ {
					b := decodeKQ(wt, w[i*bb:])
					for e, q := range b.q {
						yv := int64(i8(a[i*292+4+e]))
						q -= kqOffset(wt)
						p := int64(b.sc[e/16]) * int64(q) * yv
						want += p
						mag += max(p, -p)
						switch {
						case wt == ir.Q2_K:
							p = int64(b.mn16[e/16]) * yv
							want -= p
							mag += max(p, -p)
						case kqOffset(wt) == 0:
							p = int64(b.mn[e/32]) * yv
							want -= p
							mag += max(p, -p)
						}
					}
				}
				require.Less(t, mag, int64(1<<24))
				require.Equal(t, float32(want), Dot(wt, n, w, a), "integer dot")
				require.Equal(t, float32(want), dotWith("generic", wt, n, w, a), "generic integer dot")
				emu, _ := emulateKQuant(wt, nb, w, a)
				require.Equal(t, float32(want), emu, "emulated integer dot")
			})
		}
	}
}

// TestAVX2KQuantZeroActs: a zero activation row gives 0, and Dot does not
// allocate.
func TestAVX2KQuantZeroActs(t *testing.T) {
	for _, v := range kquantVariants {
		t.Run(v, func(t *testing.T) { testKQuantZeroActs(t, v) })
	}
}

func testKQuantZeroActs(t *testing.T, v string) {
	useVariant(t, v)
	for _, wt := range kquantTypes {
		n := 1024
		w, _ := makeWeights(t, wt, n, 5)
		a := make([]byte, ActBytes(wt, n))
		QuantizeActs(ActType(wt), make([]float32, n), a)
		require.Zero(t, Dot(wt, n, w, a), "%s", wt)
		x := randRow(n, 1, 10)
		allocs := testing.AllocsPerRun(10, func() {
			QuantizeActs(ActType(wt), x, a)
			_ = Dot(wt, n, w, a)
		})
		require.Zero(t, allocs, "%s", wt)
	}
}

// TestKQuantMatVec: MatVec over many rows gives each row's Dot bit for bit,
// for every variant (the SIMD kernels loop over the rows themselves), and
// the generic MatVec matches the generic Dot.
func TestKQuantMatVec(t *testing.T) {
	for _, v := range append([]string{"generic"}, kquantVariants...) {
		t.Run(v, func(t *testing.T) {
			useVariant(t, v)
			for _, wt := range []ir.DType{ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K} {
				for _, k := range []int{256, 2048} {
					const rows = 37
					rb := mustRowBytes(t, wt, k)
					w := make([]byte, rows*rb)
					for j := 0; j < rows; j++ {
						row, _ := makeWeights(t, wt, k, uint64(100*j+k))
						copy(w[j*rb:], row)
					}
					a := make([]byte, ActBytes(wt, k))
					QuantizeActs(ActType(wt), randRow(k, 1, uint64(k)), a)
					dst := make([]float32, rows+1)
					dst[rows] = 12345 // not written
					Current().MatVec(wt, k, w, a, dst[:rows])
					for j := 0; j < rows; j++ {
						want := Dot(wt, k, w[j*rb:][:rb], a)
						require.NotZero(t, want)
						require.Equal(t, math.Float32bits(want), math.Float32bits(dst[j]), "%s k=%d row %d", wt, k, j)
					}
					require.Equal(t, float32(12345), dst[rows])
					Current().MatVec(wt, k, w, a, dst[:0]) // no rows: nothing read or written
				}
			}
		})
	}
}

// BenchmarkDotKQuant: weight bytes per second of the k-quant kernels; compare
// each type's avx2 with its generic.
func BenchmarkDotKQuant(b *testing.B) {
	for _, wt := range kquantTypes {
		for _, v := range []string{"generic", "avx2", "avx512"} {
			for _, n := range []int{4096, 11008} {
				b.Run(fmt.Sprintf("%s_%s/%d", wt, v, n), func(b *testing.B) {
					useVariant(b, v)
					w, _ := makeWeights(b, wt, n, 1)
					x := randRow(n, 1, 2)
					a := make([]byte, ActBytes(wt, n))
					QuantizeActs(ActType(wt), x, a)
					b.SetBytes(int64(len(w)))
					var s float32
					for b.Loop() {
						s += Dot(wt, n, w, a)
					}
					_ = s
					b.ReportMetric(float64(len(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}
