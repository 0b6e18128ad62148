package frontend_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/plan"
)

// Open tells a GGUF model from a plan by the first bytes, whatever the
// file's name, and opens each file once: the model; the plan and the model
// it refers to; an embedded plan alone.
func TestOpenRecognizesEachFormat(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.bin") // no .gguf: the magic decides
	copyFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), model)
	c := compileFile(t, model)
	ref, _ := writePlan(t, c.plan, nil)
	emb, _ := writePlan(t, c.plan, c.model.Weights)
	name := c.model.Graph.Values[2].Name() // a weight
	want, err := c.model.Weights.WeightBytes(name)
	require.NoError(t, err)

	var src *frontend.Source
	open := func(path string) map[string]int {
		return opened(func() {
			src, err = frontend.Open(path)
			require.NoError(t, err)
		})
	}
	require.Equal(t, map[string]int{model: 1}, open(model))
	require.Equal(t, frontend.FormatGGUF, src.Format)
	require.Equal(t, []string{model}, src.Files())
	m, err := src.Build(arch.Options{})
	require.NoError(t, err)
	require.Equal(t, c.plan.Config, m.Config)
	v, err := src.Vocab()
	require.NoError(t, err)
	require.Equal(t, c.plan.Vocab, v)
	got, err := src.Weights().WeightBytes(name)
	require.NoError(t, err)
	require.Equal(t, want, got)
	id1, err := src.Identity()
	require.NoError(t, err)
	require.Equal(t, c.plan.Model, id1)
	require.NoError(t, src.Close())

	require.Equal(t, map[string]int{ref: 1, model: 1}, open(ref))
	require.Equal(t, frontend.FormatPlan, src.Format)
	require.Equal(t, []string{ref, model}, src.Files())
	require.NotNil(t, src.Model)
	got, err = src.Weights().WeightBytes(name)
	require.NoError(t, err)
	require.Equal(t, want, got, "a referenced plan serves the model file's tensors")
	_, err = src.Build(arch.Options{})
	require.ErrorContains(t, err, "it is a compiled plan, not a model file")
	require.NoError(t, src.Close())
	_, err = src.Weights().WeightBytes(name)
	require.ErrorContains(t, err, "closed", "Close closes the referenced model too")

	require.Equal(t, map[string]int{emb: 1}, open(emb))
	require.Nil(t, src.Model)
	got, err = src.Weights().WeightBytes(name)
	require.NoError(t, err)
	require.Equal(t, want, got, "an embedded plan serves its own copy")
	require.NoError(t, src.Close())
}

// A plan borrows a model the caller has open (Options.Lend): no second open
// or hash, and Close leaves the lent model open. A lent model whose identity
// differs from the plan's record is ErrModelChanged, still without opening
// the file again.
func TestOpenWithLentModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	copyFile(t, shared.Path(t, "models/gguf/synthetic/llama-p-Q4_0.gguf"), model)
	c := compileFile(t, model)
	path, _ := writePlan(t, c.plan, nil)
	lend, err := frontend.Open(model)
	require.NoError(t, err)
	defer lend.Close()
	_, err = lend.Identity()
	require.NoError(t, err)

	var s *frontend.Source
	require.Equal(t, map[string]int{path: 1}, opened(func() {
		s, err = frontend.OpenWith(path, frontend.Options{Lend: lend})
		require.NoError(t, err)
	}))
	require.Same(t, lend, s.Model)
	name := lend.GGUF.Tensors[0].Name
	w, err := s.Weights().WeightBytes(name)
	require.NoError(t, err)
	require.Equal(t, lend.GGUF.TensorData(&lend.GGUF.Tensors[0]), w, "the plan serves the lent bytes")
	require.NoError(t, s.Close())
	require.NotNil(t, lend.GGUF.TensorData(&lend.GGUF.Tensors[0]), "Close closed the lent model")

	// Another model of the same size now at the same path, lent: its
	// identity is not the plan's.
	copyFile(t, shared.Path(t, "models/gguf/synthetic/llama-p-Q4_K.gguf"), model)
	other, err := frontend.Open(model)
	require.NoError(t, err)
	defer other.Close()
	require.Equal(t, map[string]int{path: 1}, opened(func() {
		_, err = frontend.OpenWith(path, frontend.Options{Lend: other})
	}))
	require.ErrorIs(t, err, frontend.ErrModelChanged)
	require.ErrorContains(t, err, "has changed since the plan was compiled (header sha256 ")
}

// Options.Unresolved opens a plan without its model (inspect shows a plan
// whose model has moved); ResolveModel opens it later, once.
func TestOpenUnresolved(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	copyFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), model)
	c := compileFile(t, model)
	path, _ := writePlan(t, c.plan, nil)

	var s *frontend.Source
	var err error
	require.Equal(t, map[string]int{path: 1}, opened(func() {
		s, err = frontend.OpenWith(path, frontend.Options{Unresolved: true})
		require.NoError(t, err)
	}))
	defer s.Close()
	require.Nil(t, s.Model)
	_, err = s.Weights().WeightBytes(c.model.Graph.Values[2].Name())
	require.ErrorContains(t, err, "plan does not embed its weights")
	require.Equal(t, map[string]int{model: 1}, opened(func() { require.NoError(t, s.ResolveModel(nil)) }))
	require.NotNil(t, s.Model)
	require.Empty(t, opened(func() { require.NoError(t, s.ResolveModel(nil)) }), "resolved once")

	require.NoError(t, os.Remove(model))
	s2, err := frontend.OpenWith(path, frontend.Options{Unresolved: true})
	require.NoError(t, err, "the plan opens without its model")
	defer s2.Close()
	require.ErrorIs(t, s2.ResolveModel(nil), frontend.ErrModelMissing)
}

// The model file a plan refers to is missing or has changed: one line that
// names both files and says what to do.
func TestOpenReferencedModelErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file func(t *testing.T) string // makes the plan, then breaks its model
		kind error
		want string
	}{
		{"model file moved", func(t *testing.T) string {
			model := filepath.Join(t.TempDir(), "model.gguf")
			copyFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), model)
			path, _ := writePlan(t, compileFile(t, model).plan, nil)
			require.NoError(t, os.Rename(model, model+".moved"))
			return path
		}, frontend.ErrModelMissing, "/model.gguf, which is missing: recompile or use --embed-weights"},
		{"model file replaced, same size", func(t *testing.T) string {
			dir := t.TempDir()
			model := filepath.Join(dir, "model.gguf")
			copyFile(t, shared.Path(t, "models/gguf/synthetic/llama-p-Q4_0.gguf"), model)
			path, _ := writePlan(t, compileFile(t, model).plan, nil)
			other := filepath.Join(dir, "other.gguf")
			copyFile(t, shared.Path(t, "models/gguf/synthetic/llama-p-Q4_K.gguf"), other)
			st0, _ := os.Stat(model)
			st1, _ := os.Stat(other)
			require.Equal(t, st0.Size(), st1.Size())
			require.NoError(t, os.Rename(other, model))
			return path
		}, frontend.ErrModelChanged, "/model.gguf has changed since the plan was compiled (header sha256 "},
		{"model file grew", func(t *testing.T) string {
			model := filepath.Join(t.TempDir(), "model.gguf")
			copyFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), model)
			path, _ := writePlan(t, compileFile(t, model).plan, nil)
			f, err := os.OpenFile(model, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte{0})
			require.NoError(t, err)
			require.NoError(t, f.Close())
			return path
		}, frontend.ErrModelChanged, "has changed since the plan was compiled (size 1185376 bytes, now 1185377)"},
		{"model file now a directory", func(t *testing.T) string {
			model := filepath.Join(t.TempDir(), "model.gguf")
			copyFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), model)
			path, _ := writePlan(t, compileFile(t, model).plan, nil)
			require.NoError(t, os.Remove(model))
			require.NoError(t, os.Mkdir(model, 0o755))
			return path
		}, frontend.ErrModelChanged, "(it is no longer a regular file or a model directory)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.file(t)
			_, err := frontend.Open(path)
			require.ErrorIs(t, err, tc.kind)
			require.ErrorContains(t, err, tc.want)
			require.Contains(t, err.Error(), path, "names the plan")
			require.NotContains(t, err.Error(), "\n")
		})
	}
}

// What is neither format, or is no file at all, is one line naming the
// path; a broken plan or GGUF gets its reader's error.
func TestOpenBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	model := shared.Path(t, "models/gguf/stories260K.gguf")
	c := compileFile(t, model)
	_, good := writePlan(t, c.plan, nil)
	version := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(version[8:], plan.FormatVersion+1)
	gg, err := os.ReadFile(model)
	require.NoError(t, err)
	for _, tc := range []struct {
		name, path string
		kind       error
		want       string
	}{
		{"missing", filepath.Join(dir, "nope.gguf"), os.ErrNotExist, "nope.gguf: no such file"},
		{"directory", dir, nil, "has no config.json: not a Hugging Face model directory"},
		{"empty", write("empty", nil), nil, "file is empty"},
		{"text", write("notes.txt", []byte("hello, this is not a model\n")), nil, `unknown magic "hell": neither a GGUF model ("GGUF") nor a Minerva plan ("MNRVPLAN")`},
		{"cut in the GGUF magic", write("cut.gguf", []byte("GG")), nil, "magic"},
		{"cut in the plan magic", write("cut.plan", []byte("MNRV")), plan.ErrTruncated, "inside the magic"},
		{"cut GGUF", write("short.gguf", gg[:100]), nil, "short.gguf"},
		{"plan of another version", write("v2.plan", version), plan.ErrVersion, fmt.Sprintf("format version %d (this minervac reads version %d; recompile the model)", plan.FormatVersion+1, plan.FormatVersion)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := frontend.Open(tc.path)
			require.Error(t, err)
			if tc.kind != nil {
				require.ErrorIs(t, err, tc.kind)
			}
			require.ErrorContains(t, err, tc.want)
			require.Contains(t, err.Error(), tc.path, "names the file")
			require.NotContains(t, err.Error(), "\n")
		})
	}
}

// A model held in memory (the built-in synthetic model) builds and runs but
// has no file for a plan to refer to.
func TestParseGGUF(t *testing.T) {
	data, err := os.ReadFile(shared.Path(t, "models/gguf/stories260K.gguf"))
	require.NoError(t, err)
	s, err := frontend.ParseGGUF("built-in model", data)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Build(arch.Options{})
	require.NoError(t, err)
	require.Empty(t, s.Files())
	_, err = s.Identity()
	require.ErrorContains(t, err, "no file to refer to")
	_, err = frontend.ParseGGUF("built-in model", []byte("nope"))
	require.True(t, strings.HasPrefix(err.Error(), "built-in model: "), err.Error())
}
