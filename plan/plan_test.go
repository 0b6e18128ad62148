package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/plan"
)

// A plan written and opened again holds the same graph, vocabulary, config
// and defaults, and runs to the same logits, bit for bit, as the in-memory
// graph did, with referenced weights (served by the model the test has open;
// frontend.Open resolves the reference, tested there) and with embedded
// weights (served from the plan's mapping).
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		model string
		embed bool
	}{
		{"models/gguf/stories260K.gguf", false},
		{"models/gguf/stories260K.gguf", true},
		{"models/gguf/synthetic/llama-p-Q4_K.gguf", false},
		{"models/gguf/synthetic/llama-p-Q4_K.gguf", true},
	} {
		name := filepath.Base(tc.model) + map[bool]string{false: "/referenced", true: "/embedded"}[tc.embed]
		t.Run(name, func(t *testing.T) {
			c := compileFile(t, shared.Path(t, tc.model), "reference")
			var w eval.Weights
			if tc.embed {
				w = c.model.Weights
			}
			path, data := writePlan(t, c.plan, w)
			require.Equal(t, data, encode(t, c.plan, w), "writing is deterministic")

			l, err := plan.Open(path)
			require.NoError(t, err)
			defer l.Close()
			require.NoError(t, l.Check("reference"))
			var weights plan.Weights = c.model.Weights
			if tc.embed {
				weights = l.Plan.EmbeddedWeights()
			} else {
				_, err := l.Plan.EmbeddedWeights().WeightBytes(c.plan.Graph.Values[2].Name())
				require.ErrorContains(t, err, "plan does not embed its weights")
			}
			got := l.Plan
			require.Equal(t, ir.Print(c.plan.Graph), ir.Print(got.Graph))
			require.Equal(t, c.plan.Vocab, got.Vocab)
			require.Equal(t, c.plan.Config, got.Config)
			require.Equal(t, c.plan.Sampling, got.Sampling)
			require.Equal(t, c.plan.Context, got.Context)
			require.Equal(t, c.plan.Compiler, got.Compiler)
			require.Equal(t, c.plan.Target, got.Target)
			require.Equal(t, c.plan.Model, got.Model)
			require.Equal(t, tc.embed, got.Embedded)
			require.Nil(t, got.Kernels)
			require.Equal(t, c.plan.Graph.Attrs.Int("arena_bytes_per_token", -1), got.Memory.ArenaBytesPerToken)
			require.Positive(t, got.Memory.ArenaBytesPerToken)
			require.Positive(t, got.Memory.KVBytesPerPosition)
			require.Positive(t, got.Memory.WeightBytes)

			prompt := encodePrompt(t, c.model.Vocab, "Once upon a time, there was a little")
			want := logits(t, c.model.Graph, c.model.Weights, prompt)
			require.Equal(t, want, logits(t, got.Graph, weights, prompt))

			if tc.embed && (runtime.GOOS == "linux" || runtime.GOOS == "darwin") {
				// The plan is mapped at a page boundary, so aligned file
				// offsets are aligned addresses.
				for _, v := range got.Graph.Values {
					if v.Op == ir.OpWeight {
						b, err := weights.WeightBytes(v.Name())
						require.NoError(t, err)
						require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(b)))%plan.Align, "tensor %s", v.Name())
					}
				}
			}
			require.NoError(t, l.Close())
			_, err = l.Plan.EmbeddedWeights().WeightBytes(got.Graph.Values[2].Name())
			require.Error(t, err, "weights are gone after Close")
			require.Equal(t, ir.Print(c.plan.Graph), ir.Print(got.Graph), "the plan outlives Close")
		})
	}
}

// Kernels per target round-trip, and the memory plan section holds the
// pass's figures.
func TestKernelsAndMemory(t *testing.T) {
	c := compileFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), "cuda")
	c.plan.Kernels = map[string][]byte{"cuda": {1, 2, 3}, "metal": {}, "goasm": bytes.Repeat([]byte{7}, 100)}
	_, data := writePlan(t, c.plan, nil)
	p, err := plan.Parse(data, plan.ParseOptions{ExpectTarget: "cuda"})
	require.NoError(t, err)
	require.Equal(t, c.plan.Kernels, p.Kernels)
	// The pass's figures, whatever they are (passes' tests check them).
	attrs := c.plan.Graph.Attrs
	require.Positive(t, attrs.Int("arena_bytes_per_token", 0))
	require.Equal(t, plan.Memory{
		ArenaBytesPerToken:           attrs.Int("arena_bytes_per_token", 0),
		ArenaLowerBoundBytesPerToken: attrs.Int("arena_lower_bound_bytes_per_token", 0),
		NaiveBytesPerToken:           attrs.Int("naive_bytes_per_token", 0),
		KVBytesPerPosition:           5 * 2 * 32 * 4, // 5 layers, k and v, 4 kv heads × 8, f32
		WeightBytes:                  p.Memory.WeightBytes,
	}, p.Memory)
	spans, err := plan.Sections(data)
	require.NoError(t, err)
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
		if s.Name != "header" {
			require.Zero(t, s.Offset%plan.Align)
		}
	}
	require.Equal(t, []string{"header", "graph", "tokenizer", "config", "sampling", "memory", "kernels/cuda", "kernels/goasm", "kernels/metal"}, names)

	// The GPU runtimes run the kernels section as stored (the plan is what
	// runs), so an altered one must not load: one flipped bit fails the
	// section's checksum.
	for _, s := range spans {
		if s.Name == "kernels/goasm" {
			bad := bytes.Clone(data)
			bad[s.Offset+s.Length/2] ^= 0x01
			_, err := plan.Parse(bad, plan.ParseOptions{ExpectTarget: "cuda"})
			require.ErrorIs(t, err, plan.ErrChecksum)
			require.ErrorContains(t, err, `checksum mismatch in section "kernels/goasm"`)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	c := compileFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), "reference")
	for _, tc := range []struct {
		name string
		edit func(p *plan.Plan)
		want string
	}{
		{"no graph", func(p *plan.Plan) { p.Graph = nil }, "no graph"},
		{"no target", func(p *plan.Plan) { p.Target = "" }, "target"},
		{"no compiler", func(p *plan.Plan) { p.Compiler = "" }, "compiler"},
		{"no context", func(p *plan.Plan) { p.Context = 0 }, "context"},
		{"relative model path", func(p *plan.Plan) { p.Model.Path = "model.gguf" }, "must be absolute"},
		{"no header hash", func(p *plan.Plan) { p.Model.HeaderSHA256 = "" }, "header hash"},
		{"negative top-k", func(p *plan.Plan) { p.Sampling.TopK = -1 }, "top-k"},
		{"bad kernel target", func(p *plan.Plan) { p.Kernels = map[string][]byte{"a b": nil} }, "kernel target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *c.plan
			tc.edit(&p)
			var buf bytes.Buffer
			err := plan.Write(&buf, &p, nil)
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, buf.Len(), "nothing written")
		})
	}
	// Embedding needs no model file, but every weight the graph names.
	p := *c.plan
	p.Model = plan.ModelRef{}
	require.NoError(t, plan.Write(&bytes.Buffer{}, &p, c.model.Weights))
	err := plan.Write(&bytes.Buffer{}, &p, missingWeights{})
	require.ErrorContains(t, err, "embedding weights")
}

type missingWeights struct{}

func (missingWeights) WeightBytes(name string) ([]byte, error) { return nil, os.ErrNotExist }

// TestPlanSizes logs the sizes of the stories260K plans (go test -v).
func TestPlanSizes(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	c := compileFile(t, model, "reference")
	st, err := os.Stat(model)
	require.NoError(t, err)
	ref := encode(t, c.plan, nil)
	emb := encode(t, c.plan, c.model.Weights)
	t.Logf("stories260K: model %d bytes, plan %d bytes referenced, %d bytes embedded", st.Size(), len(ref), len(emb))
	require.Less(t, len(ref), 64<<10, "a referenced plan is small")
	require.Less(t, int64(len(emb)), st.Size()+64<<10, "embedding costs the weights and little more")
}
