package plan_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/plan"
	"github.com/minerva-llm/minerva/tokenizer"
)

// FuzzPlan: Parse never panics, with checksums checked or skipped (so that
// mutated sections reach the decoders), and whatever it accepts writes back
// to a plan that parses to the same thing.
//
// The seeds are real plans of several kilobytes, and the fuzzer minimizes
// every new interesting input for up to a minute by default, reporting
// 0 execs/sec meanwhile; run it with a short minimization budget:
//
//	go test ./plan -run '^$' -fuzz FuzzPlan -fuzzminimizetime 2s
func FuzzPlan(f *testing.F) {
	c := compileFile(f, shared.Path(f, "models/gguf/stories260K.gguf"), "reference")
	ref := encode(f, c.plan, nil)
	f.Add(ref)
	f.Add(tinyEmbedded(f))
	// Broken variants of the referenced plan.
	spans, err := plan.Sections(ref)
	require.NoError(f, err)
	for _, s := range spans {
		f.Add(bytes.Clone(ref[:s.Offset+s.Length/2]))
		d := bytes.Clone(ref)
		d[s.Offset+s.Length/2] ^= 0x20
		f.Add(d)
	}
	for _, n := range []int{0, 5, 12, 23, 24} {
		f.Add(bytes.Clone(ref[:n]))
	}
	v2 := bytes.Clone(ref)
	v2[8] = 2
	f.Add(v2)
	f.Add([]byte("MNRVPLAN\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"))

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte) (*plan.Plan, error){
			func(b []byte) (*plan.Plan, error) { return plan.Parse(b, plan.ParseOptions{}) },
			plan.ParseUnchecked,
		} {
			p, err := parse(data)
			if err != nil {
				require.NotContains(t, err.Error(), "\n")
				continue
			}
			var w eval.Weights
			if p.Embedded {
				w = p.EmbeddedWeights()
			}
			var buf bytes.Buffer
			require.NoError(t, plan.Write(&buf, p, w), "an accepted plan writes back")
			q, err := plan.Parse(buf.Bytes(), plan.ParseOptions{})
			require.NoError(t, err, "a written plan parses")
			require.Equal(t, ir.Print(p.Graph), ir.Print(q.Graph))
			requireSameVocab(t, p.Vocab, q.Vocab)
			require.Equal(t, p.Config, q.Config)
			require.Equal(t, p.Model, q.Model)
			require.Equal(t, p.Memory, q.Memory)
			require.Equal(t, p.Kernels, q.Kernels)
		}
	})
}

// requireSameVocab compares vocabularies with scores compared bit for bit
// (a NaN score round-trips, but is not equal to itself).
func requireSameVocab(t *testing.T, a, b tokenizer.Vocab) {
	t.Helper()
	bits := func(s []float32) []uint32 {
		if s == nil {
			return nil
		}
		out := make([]uint32, len(s))
		for i, f := range s {
			out[i] = math.Float32bits(f)
		}
		return out
	}
	require.Equal(t, bits(a.Scores), bits(b.Scores))
	a.Scores, b.Scores = nil, nil
	require.Equal(t, a, b)
}
