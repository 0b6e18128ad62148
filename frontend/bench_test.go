package frontend_test

import (
	"testing"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir/eval"
)

// BenchmarkOpen measures opening a stories260K plan: map, check every
// checksum, decode the graph, tokenizer and the rest, and (referenced) open
// the model file and hash its header.
func BenchmarkOpen(b *testing.B) {
	c := compileFile(b, shared.Path(b, "models/gguf/stories260K.gguf"))
	for _, tc := range []struct {
		name    string
		weights eval.Weights
	}{{"referenced", nil}, {"embedded", c.model.Weights}} {
		b.Run(tc.name, func(b *testing.B) {
			path, data := writePlan(b, c.plan, tc.weights)
			b.ReportMetric(float64(len(data)), "plan-bytes")
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				s, err := frontend.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}
