package cpu_test

import (
	"bytes"
	"fmt"
	"math"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/synth"
)

// trace is what a greedy run of one sequence saw: the logits of its last
// prompt row and of every decode step, and the tokens it chose.
type trace struct {
	logits [][]float32
	tokens []int32
}

// soloTrace runs prompt alone in a one-slot program, the whole prompt in one
// step, then n greedy decode steps.
func soloTrace(t *testing.T, b runtime.Backend, g *ir.Graph, w eval.Weights, prompt []int32, n int) trace {
	t.Helper()
	p, err := b.Compile(g, w, runtime.ProgramConfig{Context: 64})
	require.NoError(t, err)
	defer p.Close()
	pos := make([]int32, len(prompt))
	for i := range pos {
		pos[i] = int32(i)
	}
	rows, err := p.Step(0, prompt, pos)
	require.NoError(t, err)
	var tr trace
	last := rows[len(rows)-1]
	for i := 0; i < n; i++ {
		tr.logits = append(tr.logits, last)
		id := runtime.Argmax(last)
		tr.tokens = append(tr.tokens, id)
		rows, err = p.Step(0, []int32{id}, []int32{int32(len(prompt) + i)})
		require.NoError(t, err)
		last = rows[0]
	}
	return tr
}

// batchedTraces runs every prompt at once in a program of len(prompts)
// slots, as a continuous-batching scheduler does: each step carries the
// decode row of every sequence past its prompt and a chunk of at most
// chunk rows of each prompt still being read, the sequences starting at
// staggered steps (sequence i joins at step i), so that each sequence's
// rows share steps with different neighbours and different row counts.
func batchedTraces(t *testing.T, b runtime.Backend, g *ir.Graph, w eval.Weights, prompts [][]int32, n, chunk int) []trace {
	t.Helper()
	p, err := b.Compile(g, w, runtime.ProgramConfig{Context: 64, Slots: len(prompts)})
	require.NoError(t, err)
	defer p.Close()
	bp, ok := p.(runtime.BatchProgram)
	require.True(t, ok, "%s programs step rows of several slots", b.Name())
	traces := make([]trace, len(prompts))
	read := make([]int, len(prompts)) // prompt tokens evaluated
	next := make([]int32, len(prompts))
	for step := 0; ; step++ {
		r := runtime.Rows{Logits: []int{}} // not nil: no rows until a prompt is read
		var owner []int                    // the sequence whose logits each wanted row gives
		active := false
		for s, pr := range prompts {
			if s > step || len(traces[s].tokens) == n {
				continue
			}
			active = true
			if read[s] < len(pr) {
				k := min(chunk, len(pr)-read[s])
				for j := 0; j < k; j++ {
					r.Add(s, pr[read[s]+j], int32(read[s]+j))
				}
				read[s] += k
				if read[s] == len(pr) {
					r.Logits = append(r.Logits, r.Len()-1)
					owner = append(owner, s)
				}
				continue
			}
			r.Add(s, next[s], int32(len(pr)+len(traces[s].tokens)-1))
			r.Logits = append(r.Logits, r.Len()-1)
			owner = append(owner, s)
		}
		if !active {
			break
		}
		if r.Len() == 0 {
			continue
		}
		rows, err := bp.StepRows(r)
		require.NoError(t, err)
		require.Len(t, rows, len(owner))
		for i, s := range owner {
			tr := &traces[s]
			tr.logits = append(tr.logits, rows[i])
			next[s] = runtime.Argmax(rows[i])
			tr.tokens = append(tr.tokens, next[s])
		}
	}
	return traces
}

// requireBits holds two logits traces to the same float32 bits.
func requireBits(t *testing.T, want, got trace, what string) {
	t.Helper()
	require.Equal(t, want.tokens, got.tokens, "%s: tokens", what)
	require.Len(t, got.logits, len(want.logits), what)
	for i := range want.logits {
		for j, x := range want.logits[i] {
			if math.Float32bits(x) != math.Float32bits(got.logits[i][j]) {
				t.Fatalf("%s: step %d logit %d: solo %v, batched %v", what, i, j, x, got.logits[i][j])
			}
		}
	}
}

// Batch invariance: eight sequences stepped together — prompts read in
// chunks of three rows beside other sequences' decode rows, in steps of
// varying row counts — give every sequence the logits (bit for bit) and
// greedy tokens of its solo run, which reads its whole prompt in one step.
// The weight types cover the packed group kernels (Q4_0, Q8_0: one, four
// and eight activation rows), the four-row dot kernels (Q4_1), the K-quant
// and float dots, and f16 caches.
func TestBatchInvariance(t *testing.T) {
	prompts := [][]int32{
		{1, 5, 9}, {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49}, {1, 7}, {1, 100, 3, 100, 3, 100, 3},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {1}, {1, 60, 61, 62, 63}, {1, 9, 9, 9, 9, 9},
	}
	const n = 6
	for _, c := range []struct {
		dt    ir.DType
		cache ir.DType
	}{{ir.F32, ir.F32}, {ir.Q4_0, ir.F32}, {ir.Q8_0, ir.F16}, {ir.Q4_1, ir.F32}, {ir.Q4_K, ir.F16}} {
		t.Run(fmt.Sprintf("%s-%s", c.dt, c.cache), func(t *testing.T) {
			m := synth.Default()
			m.Matrix = c.dt
			m.NEmbd, m.NFF = 256, 512
			m.NHead, m.NHeadKV = 8, 4
			am := synthModel(t, m)
			fuse(t, am.Graph)
			g, err := runtime.WithCacheType(am.Graph, c.cache)
			require.NoError(t, err)
			b := cpu.Backend{Threads: 2}
			got := batchedTraces(t, b, g, am.Weights, prompts, n, 3)
			for i, pr := range prompts {
				requireBits(t, soloTrace(t, b, g, am.Weights, pr, n), got[i], fmt.Sprintf("sequence %d", i))
			}
		})
	}
}

// The same for gpt-oss (gpt-oss-tiny, MXFP4 experts): the moe op gathers
// each expert's tokens across the step's rows, so the rows an expert
// multiplies depend on the neighbours; sinks, sliding windows and the q8_2
// activation rounding come along.
func TestBatchInvarianceMoE(t *testing.T) {
	spec, err := synth.GPTOSSPreset("gpt-oss-tiny", ir.MXFP4, 1)
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = spec.Write(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	am, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	fuse(t, am.Graph)
	prompts := [][]int32{{1, 5, 9}, {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49}, {1, 7}, {1, 100, 3, 100, 3, 100, 3},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {1}, {1, 60, 61, 62, 63}, {1, 9, 9, 9, 9, 9}}
	b := cpu.Backend{Threads: 2}
	got := batchedTraces(t, b, am.Graph, am.Weights, prompts, 5, 3)
	for i, pr := range prompts {
		requireBits(t, soloTrace(t, b, am.Graph, am.Weights, pr, 5), got[i], fmt.Sprintf("sequence %d", i))
	}
}

// The reference interpreter steps the same rows (one step per slot) with
// the same per-sequence results as its solo steps.
func TestReferenceStepRows(t *testing.T) {
	am := synthModel(t, synth.Default())
	b := reference(t)
	prompts := [][]int32{{1, 5, 9, 4}, {1, 7}, {1, 30, 31, 32, 33}}
	got := batchedTraces(t, b, am.Graph, am.Weights, prompts, 3, 2)
	for i, pr := range prompts {
		requireBits(t, soloTrace(t, b, am.Graph, am.Weights, pr, 3), got[i], fmt.Sprintf("sequence %d", i))
	}
}

// Bad batched steps fail with one clear error, on both backends, and leave
// the program usable; a program without StepRows is stepped a slot at a
// time by runtime.StepRows.
func TestStepRowsErrors(t *testing.T) {
	am := synthModel(t, synth.Default())
	fuse(t, am.Graph)
	for _, b := range []runtime.Backend{cpu.Backend{Threads: 2}, reference(t)} {
		p, err := b.Compile(am.Graph, am.Weights, runtime.ProgramConfig{Context: 8, Slots: 2})
		require.NoError(t, err)
		bp := p.(runtime.BatchProgram)
		for _, c := range []struct {
			r    runtime.Rows
			want string
		}{
			{runtime.Rows{}, "no tokens"},
			{runtime.Rows{Slots: []int32{0}, Tokens: []int32{1, 2}, Pos: []int32{0, 1}}, "one of each per row"},
			{runtime.Rows{Slots: []int32{2}, Tokens: []int32{1}, Pos: []int32{0}}, "slot 2 is out of range"},
			{runtime.Rows{Slots: []int32{0}, Tokens: []int32{-1}, Pos: []int32{0}}, "outside the vocabulary"},
			{runtime.Rows{Slots: []int32{1}, Tokens: []int32{1}, Pos: []int32{8}}, "outside the context of 8"},
			{runtime.Rows{Slots: []int32{1, 0, 1}, Tokens: []int32{1, 2, 3}, Pos: []int32{3, 3, 3}}, "rows 0 and 2 both write position 3 of slot 1"},
			{runtime.Rows{Slots: []int32{1, 0}, Tokens: []int32{1, 2}, Pos: []int32{0, 0}, Logits: []int{1, 0}}, "not ascending"},
			{runtime.Rows{Slots: []int32{1, 0}, Tokens: []int32{1, 2}, Pos: []int32{0, 0}, Logits: []int{2}}, "not ascending"},
		} {
			_, err := bp.StepRows(c.r)
			require.ErrorContains(t, err, c.want, "%s", b.Name())
		}
		_, err = bp.StepRows(runtime.Rows{Slots: []int32{1}, Tokens: []int32{1}, Pos: []int32{8}})
		require.ErrorIs(t, err, runtime.ErrContextFull)
		r := runtime.Rows{Slots: []int32{1, 0, 1}, Tokens: []int32{1, 1, 5}, Pos: []int32{0, 0, 1}}
		all, err := bp.StepRows(r)
		require.NoError(t, err)
		require.Len(t, all, 3)
		require.Equal(t, all[0], all[1], "%s: the same token at the same position of two slots", b.Name())
		// The same step through a program that only has Step.
		require.NoError(t, p.ResetSlot(0))
		require.NoError(t, p.ResetSlot(1))
		r.Logits = []int{2}
		one, err := runtime.StepRows(stepOnly{p}, r)
		require.NoError(t, err)
		require.Equal(t, [][]float32{all[2]}, one, b.Name())
		require.NoError(t, p.Close())
		_, err = bp.StepRows(r)
		require.ErrorIs(t, err, runtime.ErrClosed)
	}
}

// stepOnly hides a program's StepRows.
type stepOnly struct{ runtime.Program }

// A step that asks for some rows' logits computes only those rows of the
// output matmul (the counter), and they are bit for bit the rows of a step
// that computes all of them; the caches it leaves are the same too (the
// next decode step agrees). Fused graphs (the final norm in the matmul's
// prologue) and unfused ones (a plain matmul after a separate rmsnorm).
func TestLogitsOnlyAskedRows(t *testing.T) {
	prompt := []int32{1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51}
	for _, c := range []struct {
		dt    ir.DType
		fused bool
	}{{ir.F32, true}, {ir.Q4_0, true}, {ir.Q4_0, false}, {ir.Q8_0, true}} {
		t.Run(fmt.Sprintf("%s-fused=%v", c.dt, c.fused), func(t *testing.T) {
			m := synth.Default()
			m.Matrix = c.dt
			am := synthModel(t, m)
			if c.fused {
				fuse(t, am.Graph)
			}
			b := cpu.Backend{Threads: 2}
			full := soloTrace(t, b, am.Graph, am.Weights, prompt, 2)
			p, err := b.Compile(am.Graph, am.Weights, runtime.ProgramConfig{Context: 64})
			require.NoError(t, err)
			defer p.Close()
			bp := p.(runtime.BatchProgram)
			r := runtime.Rows{Logits: []int{len(prompt) - 1}}
			for i, id := range prompt {
				r.Add(0, id, int32(i))
			}
			before := cpu.LogitRowsDone(p)
			got, err := bp.StepRows(r)
			require.NoError(t, err)
			require.Equal(t, int64(1), cpu.LogitRowsDone(p)-before, "the output matmul computed only the last row")
			require.Len(t, got, 1)
			require.Equal(t, full.logits[0], got[0], "the last row's logits")
			s, err := runtime.NewProgramSession(p, 0)
			require.NoError(t, err)
			last, err := s.EvalLast(prompt)
			require.NoError(t, err)
			require.Equal(t, full.logits[0], last, "Session.EvalLast")
			next, err := s.EvalLast([]int32{full.tokens[0]})
			require.NoError(t, err)
			require.Equal(t, full.logits[1], next, "the decode step after it")
			// Two rows, and none.
			require.NoError(t, p.ResetSlot(0))
			r.Logits = []int{2, len(prompt) - 1}
			before = cpu.LogitRowsDone(p)
			got, err = bp.StepRows(r)
			require.NoError(t, err)
			require.Equal(t, int64(2), cpu.LogitRowsDone(p)-before)
			require.Equal(t, full.logits[0], got[1])
			require.NoError(t, p.ResetSlot(0))
			r.Logits = []int{}
			before = cpu.LogitRowsDone(p)
			got, err = bp.StepRows(r)
			require.NoError(t, err)
			require.Empty(t, got)
			require.Equal(t, int64(0), cpu.LogitRowsDone(p)-before)
		})
	}
}

// A compiled (fused, memory-planned) graph keeps every activation of a step
// but the logits in one arena of T × the plan's bytes per token, the same for 2 and 6
// layers: activation memory grows with the step's tokens, not the depth of
// the model. An unplanned graph gives each value a buffer of its own.
func TestActivationsInArena(t *testing.T) {
	prompt := []int32{1, 5, 9, 4, 7, 3, 8, 2, 6, 10, 11, 12}
	per := map[int]int64{}
	for _, layers := range []int{2, 6} {
		m := synth.Default()
		m.NLayer = layers
		am := synthModel(t, m)
		fuse(t, am.Graph)
		p, err := cpu.Backend{Threads: 2}.Compile(am.Graph, am.Weights, runtime.ProgramConfig{Context: 64})
		require.NoError(t, err)
		_, err = p.Step(0, prompt, positions(len(prompt)))
		require.NoError(t, err)
		arena, own := cpu.ActivationMemory(p)
		require.Equal(t, am.Graph.Attrs.Int("arena_bytes_per_token", 0), 4*arena)
		require.Equal(t, 1, own, "%d layers: every activation but the logits (a buffer of the rows a step asks for) is in the arena", layers)
		require.Less(t, 4*arena, am.Graph.Attrs.Int("naive_bytes_per_token", 0))
		per[layers] = arena
		require.NoError(t, p.Close())
	}
	require.Equal(t, per[2], per[6], "the arena does not grow with the layers")
	am := synthModel(t, synth.Default())
	p, err := cpu.Backend{Threads: 2}.Compile(am.Graph, am.Weights, runtime.ProgramConfig{Context: 64})
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Step(0, prompt, positions(len(prompt)))
	require.NoError(t, err)
	arena, own := cpu.ActivationMemory(p)
	require.Zero(t, arena)
	require.Positive(t, own)
}

func positions(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i)
	}
	return p
}

// TestCacheOffHeap: a program's KV cache and step arena are mapped outside
// the Go heap, so a long context does not raise the collector's goal (and
// the garbage it lets stay resident) with them; the heap grows by a small
// part of the cache's size, and the program steps as before.
func TestCacheOffHeap(t *testing.T) {
	if goruntime.GOOS != "linux" && goruntime.GOOS != "darwin" {
		t.Skipf("anonymous mappings are on the heap on %s", goruntime.GOOS)
	}
	am := synthModel(t, synth.Default())
	fuse(t, am.Graph)
	prompt := []int32{1, 5, 9, 4, 7, 3, 8, 2, 6, 10, 11, 12}
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	p, err := cpu.Backend{Threads: 2}.Compile(am.Graph, am.Weights, runtime.ProgramConfig{Context: 512, Slots: 64})
	require.NoError(t, err)
	defer p.Close()
	want, err := p.Step(63, prompt, positions(len(prompt)))
	require.NoError(t, err)
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	kv := cpu.StateBytes(p)
	require.GreaterOrEqual(t, kv, int64(8<<20), "the cache must dwarf the program's other allocations")
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	require.Less(t, grew, kv/8, "heap grew %d bytes for a %d-byte cache", grew, kv)

	require.NoError(t, p.ResetSlot(63))
	got, err := p.Step(63, prompt, positions(len(prompt)))
	require.NoError(t, err)
	require.Equal(t, want, got, "a reset slot steps as a fresh one")
}
