package cpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
)

// attnGraph is attention alone: q, k and v are embeddings of the tokens (no
// matmuls), H query heads over Hkv KV heads of size hd, the attention rows
// the output; window > 0 a sliding window. fused turns attention into flash_attention (tiles of
// 8192/hd rows, four KV parts per row).
func attnGraph(t testing.TB, H, Hkv, hd, window int, sinks, fused bool, cache ir.DType) (*ir.Graph, memWeights) {
	const V = 800
	r := rand.New(rand.NewPCG(uint64(H*100+hd), 3))
	b := ir.NewBuilder("attn")
	w := memWeights{}
	weight := func(name string, rows, cols int) *ir.Value {
		if rows == 1 {
			w[name] = randF32(r, cols, 1)
			return b.Weight(name, ir.Type{DType: ir.F32, Shape: ir.S(cols)})
		}
		w[name] = randF32(r, rows*cols, 1)
		return b.Weight(name, ir.Type{DType: ir.F32, Shape: ir.S(rows, cols)})
	}
	tok := b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	pos := b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	q := b.Embed(weight("q", V, H*hd), tok)
	k := b.Embed(weight("k", V, Hkv*hd), tok)
	v := b.Embed(weight("v", V, Hkv*hd), tok)
	kc := b.State("k", ir.Type{DType: ir.F32, Shape: ir.S("C", Hkv*hd)})
	vc := b.State("v", ir.Type{DType: ir.F32, Shape: ir.S("C", Hkv*hd)})
	kw := b.KVWrite(kc, k, pos)
	vw := b.KVWrite(vc, v, pos)
	var sk *ir.Value
	if sinks {
		sk = weight("sinks", 1, H)
	}
	att := ir.Attrs{"n_head": H, "n_kv_head": Hkv, "head_dim": hd, "scale": 0.125}
	if window > 0 {
		att["window"] = window
	}
	b.Output("logits", b.Attention(q, kw, vw, pos, sk, att))
	b.Output("cache.k", kw)
	b.Output("cache.v", vw)
	g, err := b.Finish()
	require.NoError(t, err)
	if fused {
		fuse(t, g)
	}
	g, err = runtime.WithCacheType(g, cache)
	require.NoError(t, err)
	return g, w
}

// attnRun steps a fresh program of g over steps (token counts) from
// position 0, returning every output row.
func attnRun(t testing.TB, g *ir.Graph, w memWeights, threads int, steps []int) [][]float32 {
	t.Helper()
	total := 0
	for _, n := range steps {
		total += n
	}
	p, err := cpu.Backend{Threads: threads}.Compile(g, w, runtime.ProgramConfig{Context: total})
	require.NoError(t, err)
	defer p.Close()
	var rows [][]float32
	at := 0
	for _, n := range steps {
		tok, pos := make([]int32, n), make([]int32, n)
		for i := range tok {
			tok[i] = int32((at + i) * 7919 % 800)
			pos[i] = int32(at + i)
		}
		r, err := p.Step(0, tok, pos)
		require.NoError(t, err)
		for _, row := range r {
			rows = append(rows, append([]float32(nil), row...))
		}
		at += n
	}
	return rows
}

// The grouped attention work items, and for groups of up to four heads the
// runs of a prompt's tokens (attentionTokenRuns), give every row exactly
// the bits of the one-head ones: f32, f16 and q8_0 caches, groups of 8, 12
// (a run of 8 and one of 4), 4, 3, 2 and 1 heads, sliding windows with
// sinks, plain attention (tiles of 64 rows) and flash attention (tiles of
// 8192/head_dim rows in four parts), prefill chunks crossing tiles, then
// decode steps.
func TestAttentionGroupedExact(t *testing.T) {
	shapes := []struct{ H, Hkv, hd, window int }{{8, 1, 128, 0}, {12, 1, 24, 0}, {6, 2, 16, 100}, {8, 2, 32, 100},
		{8, 4, 64, 0}, {4, 4, 128, 0}, {3, 3, 32, 100}}
	for _, cache := range []ir.DType{ir.F32, ir.F16, ir.Q8_0} {
		for _, sh := range shapes {
			if cache == ir.Q8_0 && sh.hd%32 != 0 {
				continue
			}
			for _, fused := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/H%d-kv%d-hd%d-w%d/fused=%v", cache, sh.H, sh.Hkv, sh.hd, sh.window, fused), func(t *testing.T) {
					g, w := attnGraph(t, sh.H, sh.Hkv, sh.hd, sh.window, sh.window > 0, fused, cache)
					steps := []int{150, 150, 1, 1} // head_dim 128: fused parts past one 64-row tile
					got := attnRun(t, g, w, 2, steps)
					restore := cpu.SetOneHeadAttention(true)
					want := attnRun(t, g, w, 2, steps)
					restore()
					require.Equal(t, len(want), len(got))
					for i := range want {
						require.Equal(t, want[i], got[i], "row %d", i)
					}
				})
			}
		}
	}
}

// Attention's results do not depend on the number of workers: a decode
// step's KV parts run in turn in one item per head when the items divide
// among the workers (2 KV heads on 1 or 2 workers; grouped and one-head)
// and are shared across the workers otherwise (3 and 4), with the same
// bits; so do prefill chunks.
func TestAttentionThreadsExact(t *testing.T) {
	for _, oneHead := range []bool{false, true} {
		t.Run(fmt.Sprintf("onehead=%v", oneHead), func(t *testing.T) {
			defer cpu.SetOneHeadAttention(oneHead)()
			g, w := attnGraph(t, 8, 2, 64, 0, false, true, ir.F16)
			steps := []int{300, 1, 1, 1}
			want := attnRun(t, g, w, 1, steps)
			for _, threads := range []int{2, 3, 4} {
				got := attnRun(t, g, w, threads, steps)
				require.Equal(t, len(want), len(got))
				for i := range want {
					require.Equal(t, want[i], got[i], "%d threads, row %d", threads, i)
				}
			}
		})
	}
}

// BenchmarkAttentionDepth times attention alone (TinyLlama's shape: 32
// query heads over 4 KV heads of 64, f16 cache, flash attention) at depth
// 1024 and 2048, a 64-token prefill chunk and a decode step, with the
// grouped work items and the one-head ones in the same run:
//
//	go test ./runtime/cpu -run '^$' -bench AttentionDepth -benchtime 20x
func BenchmarkAttentionDepth(b *testing.B) {
	g, w := attnGraph(b, 32, 4, 64, 0, false, true, ir.F16)
	for _, depth := range []int{1024, 2048} {
		p, err := cpu.Backend{Threads: 2}.Compile(g, w, runtime.ProgramConfig{Context: depth + 64})
		require.NoError(b, err)
		steps := func(at, n int) ([]int32, []int32) {
			tok, pos := make([]int32, n), make([]int32, n)
			for i := range tok {
				tok[i] = int32((at + i) * 7919 % 800)
				pos[i] = int32(at + i)
			}
			return tok, pos
		}
		for at := 0; at < depth; at += 512 {
			tok, pos := steps(at, 512)
			_, err := p.Step(0, tok, pos)
			require.NoError(b, err)
		}
		for _, n := range []int{64, 1} {
			for _, oneHead := range []bool{false, true} {
				name := map[bool]string{false: "grouped", true: "onehead"}[oneHead]
				b.Run(fmt.Sprintf("depth%d/T%d/%s", depth, n, name), func(b *testing.B) {
					defer cpu.SetOneHeadAttention(oneHead)()
					tok, pos := steps(depth, n)
					for b.Loop() {
						if _, err := p.Step(0, tok, pos); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
				})
			}
		}
		p.Close()
	}
}

// BenchmarkAttentionPrompt times attention alone on a 512-token prompt
// from position 0 in the shapes of Llama-2 7B (32 heads of 128, no grouped
// heads) and Llama-3 8B (32 heads over 8 KV heads), f16 cache, flash
// attention (tiles of 64 rows), with the runs of tokens
// (attentionTokenRuns) and the items they replace (one-head, or grouped:
// oneHeadAttention turns both off) in the same run:
//
//	go test ./runtime/cpu -run '^$' -bench AttentionPrompt -benchtime 10x
func BenchmarkAttentionPrompt(b *testing.B) {
	const T = 512
	for _, sh := range []struct {
		name   string
		H, Hkv int
	}{{"llama2-7b", 32, 32}, {"llama3-8b", 32, 8}} {
		g, w := attnGraph(b, sh.H, sh.Hkv, 128, 0, false, true, ir.F16)
		p, err := cpu.Backend{Threads: 2}.Compile(g, w, runtime.ProgramConfig{Context: T})
		require.NoError(b, err)
		tok, pos := make([]int32, T), make([]int32, T)
		for i := range tok {
			tok[i], pos[i] = int32(i*7919%800), int32(i)
		}
		_, err = p.Step(0, tok, pos) // the cache and arena's first touch
		require.NoError(b, err)
		for _, runs := range []bool{true, false} {
			name := map[bool]string{true: "runs", false: "without"}[runs]
			b.Run(sh.name+"/"+name, func(b *testing.B) {
				if !runs {
					if sh.H == sh.Hkv {
						defer cpu.SetOneHeadAttention(true)()
					} else {
						defer cpu.SetTokenRuns(false)()
					}
				}
				for b.Loop() {
					if _, err := p.Step(0, tok, pos); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(T*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
		p.Close()
	}
}

// The cache keeps each KV head's rows together, one position after another
// (what decode's attention reads densely): after a prefill and a decode
// step in slot 1 of two, head h of position p holds the slice of the
// key (value) row that the kvwrite was given for that head, for every
// head, position and slot row written, and slot 0 stays zero.
func TestCacheHeadMajor(t *testing.T) {
	const H, Hkv, hd, ctx = 8, 4, 16, 40
	g, w := attnGraph(t, H, Hkv, hd, 0, false, false, ir.F32)
	p, err := cpu.Backend{Threads: 2}.Compile(g, w, runtime.ProgramConfig{Context: ctx, Slots: 2})
	require.NoError(t, err)
	defer p.Close()
	tok := []int32{5, 17, 333, 42, 7}
	pos := []int32{0, 1, 2, 3, 4}
	_, err = p.Step(1, tok[:4], pos[:4])
	require.NoError(t, err)
	_, err = p.Step(1, tok[4:], pos[4:])
	require.NoError(t, err)
	f32 := func(b []byte) []float32 {
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	for st, table := range []string{"k", "v"} {
		tab := f32(w[table])
		for i, id := range tok {
			row := tab[int(id)*Hkv*hd:][:Hkv*hd]
			for h := range Hkv {
				require.Equal(t, row[h*hd:(h+1)*hd], cpu.CacheRow(p, st, 1, int(pos[i]), h), "%s pos %d head %d", table, pos[i], h)
				require.Equal(t, make([]float32, hd), cpu.CacheRow(p, st, 0, int(pos[i]), h), "slot 0 untouched")
			}
		}
	}
}
