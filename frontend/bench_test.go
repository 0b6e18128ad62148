package plan_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime/plan"
)

// BenchmarkOpen measures loading a stories260K plan: map, check every
// checksum, decode the graph, tokenizer and the rest, and (referenced) open
// and hash the model file's header.
func BenchmarkOpen(b *testing.B) {
	c := compileFile(b, shared.Path(b, "models/gguf/stories260K.gguf"), "reference")
	for _, tc := range []struct {
		name    string
		weights eval.Weights
	}{{"referenced", nil}, {"embedded", c.model.Weights}} {
		b.Run(tc.name, func(b *testing.B) {
			path, data := writePlan(b, c.plan, tc.weights)
			b.ReportMetric(float64(len(data)), "plan-bytes")
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				l, err := plan.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
		})
	}
}

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
