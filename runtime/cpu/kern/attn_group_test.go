package kern

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/quant"
)

// The grouped kernels give every head exactly the bits of the one-head
// kernels over the same rows, in every variant, for every group size, odd
// head sizes (the Go fallback), padded head and row strides, and tiles
// longer than the generic variant's 256-row blocks; unused lanes score 0.
// q8_0 caches (the one-head kernels head by head) likewise.
func TestGroupedAttentionKernelsExact(t *testing.T) {
	for _, v := range Variants() {
		for _, hd := range []int{8, 12, 64, 96} {
			for _, n := range []int{1, 7, 70, 300} {
				t.Run(fmt.Sprintf("%s/hd%d/n%d", v, hd, n), func(t *testing.T) {
					useVariant(t, v)
					ks := Current()
					c := newAttnCache(t, n, hd, uint64(hd*7000+n))
					f32 := make([]float32, n*c.f16Stride)
					for j, row := range c.f16Vals {
						copy(f32[j*c.f16Stride:], row)
					}
					qs, as := hd+5, hd+3
					q := randRow(GroupLanes*qs, 1, 11)
					w := randRow(GroupLanes*n, 1, 12)
					acc0 := randRow(GroupLanes*as, 1, 13)
					for G := 1; G <= GroupLanes; G++ {
						got16, got32 := make([]float32, GroupLanes*n), make([]float32, GroupLanes*n)
						ks.ScoresF16G(q, qs, hd, G, c.f16, c.f16Stride, got16)
						ks.ScoresG(q, qs, hd, G, f32, c.f16Stride, got32)
						acc16 := append([]float32(nil), acc0...)
						acc32 := append([]float32(nil), acc0...)
						ks.AxpyRowsF16G(acc16, as, hd, G, w, c.f16, c.f16Stride)
						ks.AxpyRowsG(acc32, as, hd, G, w, f32, c.f16Stride)
						one := make([]float32, n)
						wg := make([]float32, n)
						for g := range GroupLanes {
							if g >= G {
								for j := range n {
									require.Zero(t, got16[GroupLanes*j+g], "G=%d lane %d", G, g)
									require.Zero(t, got32[GroupLanes*j+g], "G=%d lane %d", G, g)
								}
								require.Equal(t, acc0[g*as:], acc16[g*as:], "G=%d head %d untouched", G, g)
								continue
							}
							qg := q[g*qs : g*qs+hd]
							ks.ScoresF16(qg, c.f16, c.f16Stride, one)
							for j := range n {
								require.Equal(t, one[j], got16[GroupLanes*j+g], "f16 G=%d head %d row %d", G, g, j)
							}
							ks.Scores(qg, f32, c.f16Stride, one)
							for j := range n {
								require.Equal(t, one[j], got32[GroupLanes*j+g], "f32 G=%d head %d row %d", G, g, j)
							}
							for j := range n {
								wg[j] = w[GroupLanes*j+g]
							}
							want := append([]float32(nil), acc0[g*as:g*as+hd]...)
							ks.AxpyRowsF16(want, wg, c.f16, c.f16Stride)
							require.Equal(t, want, acc16[g*as:g*as+hd], "f16 values G=%d head %d", G, g)
							require.Equal(t, acc0[g*as+hd:g*as+as], acc16[g*as+hd:g*as+as], "f16 padding G=%d head %d", G, g)
							want = append(want[:0], acc0[g*as:g*as+hd]...)
							ks.AxpyRows(want, wg, f32, c.f16Stride)
							require.Equal(t, want, acc32[g*as:g*as+hd], "f32 values G=%d head %d", G, g)
						}
						if hd%Q8Block != 0 {
							continue
						}
						got8 := make([]float32, GroupLanes*n)
						ks.ScoresQ8G(q, qs, hd, G, c.q8, c.q8St, got8)
						acc8 := append([]float32(nil), acc0...)
						ks.AxpyRowsQ8G(acc8, as, hd, G, w, c.q8, c.q8St)
						for g := range GroupLanes {
							if g >= G {
								require.Equal(t, acc0[g*as:], acc8[g*as:], "q8_0 G=%d head %d untouched", G, g)
								continue
							}
							ks.ScoresQ8(q[g*qs:g*qs+hd], c.q8, c.q8St, one)
							for j := range n {
								require.Equal(t, one[j], got8[GroupLanes*j+g], "q8_0 G=%d head %d row %d", G, g, j)
								wg[j] = w[GroupLanes*j+g]
							}
							want := append([]float32(nil), acc0[g*as:g*as+hd]...)
							ks.AxpyRowsQ8(want, wg, c.q8, c.q8St)
							require.Equal(t, want, acc8[g*as:g*as+hd], "q8_0 values G=%d head %d", G, g)
						}
					}
				})
			}
		}
	}
}

// ScaleMax8 and ExpSubSum8 give every lane (and ScaleMax a whole tile)
// what attention's one-head softmax steps give it: the scaled scores, Go's max of them (+0 over −0,
// NaN when one is NaN), ExpSub's weights over a tile of that length and
// their sum in row order from the running sum.
func TestGroupedSoftmaxExact(t *testing.T) {
	for _, v := range Variants() {
		for _, n := range []int{1, 8, 13, 64, 70} {
			t.Run(fmt.Sprintf("%s/n%d", v, n), func(t *testing.T) {
				useVariant(t, v)
				ks := Current()
				x := randRow(GroupLanes*n, 3, uint64(n))
				// Lane 5 all zeros of both signs, lane 6 a NaN, lane 7 all −0.
				for j := range n {
					x[GroupLanes*j+5] = float32(math.Copysign(0, float64(j%2)-0.5))
					x[GroupLanes*j+7] = float32(math.Copysign(0, -1))
				}
				x[GroupLanes*(n/2)+6] = float32(math.NaN())
				scale := float32(0.125)
				sc := append([]float32(nil), x...)
				var mx [GroupLanes]float32
				ks.ScaleMax8(sc, scale, &mx)
				var m, l0 [GroupLanes]float32
				for g := range GroupLanes {
					lane := make([]float32, n)
					tm := float32(math.Inf(-1))
					for j := range n {
						lane[j] = x[GroupLanes*j+g] * scale
						tm = max(tm, lane[j])
						if lane[j] == lane[j] {
							require.Equal(t, math.Float32bits(lane[j]), math.Float32bits(sc[GroupLanes*j+g]), "scaled %d,%d", j, g)
						}
					}
					if tm != tm {
						require.True(t, mx[g] != mx[g], "lane %d max is NaN", g)
						m[g] = 0.5
					} else {
						require.Equal(t, math.Float32bits(tm), math.Float32bits(mx[g]), "lane %d max", g)
						m[g] = tm
					}
					l0[g] = float32(g) + 0.25
				}
				// ScaleMax over the n·8 values as one tile, and over each
				// lane alone (no NaN but in lane 6): Go's scale and max.
				flat := append([]float32(nil), x...)
				fm := ks.ScaleMax(flat, scale)
				require.Equal(t, math.Float32bits(sc[0]), math.Float32bits(flat[0]))
				require.True(t, fm != fm, "one NaN makes the tile's max NaN")
				for _, g := range []int{0, 5, 7} {
					lane := make([]float32, n)
					want := float32(math.Inf(-1))
					for j := range n {
						lane[j] = x[GroupLanes*j+g]
						want = max(want, lane[j]*scale)
					}
					got := ks.ScaleMax(lane, scale)
					require.Equal(t, math.Float32bits(want), math.Float32bits(got), "ScaleMax lane %d", g)
					for j := range n {
						require.Equal(t, math.Float32bits(sc[GroupLanes*j+g]), math.Float32bits(lane[j]))
					}
				}
				mixed := randRow(n*GroupLanes+5, 2, uint64(n)+99) // not a whole number of rows
				want := float32(math.Inf(-1))
				for _, v := range mixed {
					want = max(want, v*scale)
				}
				require.Equal(t, math.Float32bits(want), math.Float32bits(ks.ScaleMax(mixed, scale)), "ScaleMax odd length")

				sc[GroupLanes*(n/2)+6] = -1 // the weights' test wants numbers
				wt := make([]float32, GroupLanes*n)
				l := l0
				ks.ExpSubSum8(wt, sc, &m, &l)
				for g := range GroupLanes {
					lane, one := make([]float32, n), make([]float32, n)
					for j := range n {
						lane[j] = sc[GroupLanes*j+g]
					}
					ks.ExpSub(one, lane, m[g])
					s := l0[g]
					for j := range n {
						require.Equal(t, one[j], wt[GroupLanes*j+g], "weight %d,%d", j, g)
						s += one[j]
					}
					require.Equal(t, s, l[g], "lane %d sum", g)
				}
			})
		}
	}
}

// BenchmarkGroupedAttention: one 128-row f16 tile of TinyLlama's shape
// (eight heads of 64 per KV head, rows 256 halves apart) scored and
// weighted by the grouped kernels and by eight calls of the one-head ones,
// in each SIMD variant, in one run:
//
//	go test ./runtime/cpu/kern -run '^$' -bench GroupedAttention
func BenchmarkGroupedAttention(b *testing.B) {
	const G, hd, n, stride = 8, 64, 128, 256
	k := make([]uint16, n*stride)
	for i, x := range randRow(len(k), 1, 5) {
		k[i] = quant.F32ToF16(x)
	}
	q := randRow(G*hd, 1, 6)
	w := randRow(GroupLanes*n, 0.1, 7)
	acc := make([]float32, G*hd)
	out := make([]float32, GroupLanes*n)
	one := make([]float32, n)
	cases := []struct {
		name string
		run  func(ks Kernels)
	}{
		{"scores/grouped", func(ks Kernels) { ks.ScoresF16G(q, hd, hd, G, k, stride, out) }},
		{"scores/onehead", func(ks Kernels) {
			for g := range G {
				ks.ScoresF16(q[g*hd:(g+1)*hd], k, stride, one)
			}
		}},
		{"values/grouped", func(ks Kernels) { ks.AxpyRowsF16G(acc, hd, hd, G, w, k, stride) }},
		{"values/onehead", func(ks Kernels) {
			for g := range G {
				ks.AxpyRowsF16(acc[g*hd:(g+1)*hd], w[:n], k, stride)
			}
		}},
	}
	for _, v := range []string{"avx2", "avx512"} {
		for _, c := range cases {
			b.Run(v+"/"+c.name, func(b *testing.B) {
				useVariant(b, v)
				ks := Current()
				for b.Loop() {
					c.run(ks)
				}
			})
		}
	}
}
