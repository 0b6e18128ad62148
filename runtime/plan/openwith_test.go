package plan_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime/plan"
)

// OpenWith borrows a model the caller has open and identified: no second
// mapping (gguf.Opens), the lent file stays open after Close, and a lent
// identity that differs from the plan's record is ErrModelChanged.
func TestOpenWithLentModel(t *testing.T) {
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	c := compileFile(t, model, "reference")
	path, _ := writePlan(t, c.plan, nil)
	f, err := gguf.Open(model)
	require.NoError(t, err)
	defer f.Close()
	ref, err := plan.Identify(model, f)
	require.NoError(t, err)

	before := gguf.Opens()
	l, err := plan.OpenWith(path, plan.OpenOptions{Model: f, Ref: ref})
	require.NoError(t, err)
	require.Equal(t, before, gguf.Opens(), "the plan opened the model again")
	w, err := l.Weights().WeightBytes(f.Tensors[0].Name)
	require.NoError(t, err)
	require.Equal(t, f.TensorData(&f.Tensors[0]), w, "the plan serves the lent model's bytes")
	require.NoError(t, l.Close())
	require.NotNil(t, f.TensorData(&f.Tensors[0]), "Close closed the lent model")

	bad := ref
	bad.HeaderSHA256 = "00" + bad.HeaderSHA256[2:]
	_, err = plan.OpenWith(path, plan.OpenOptions{Model: f, Ref: bad})
	require.ErrorIs(t, err, plan.ErrModelChanged)
}
