package arch_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/synth"
)

// openShared opens a file of ../shared and closes it when the test ends.
func openShared(t *testing.T, rel string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, rel))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// synthFile writes m and parses it back.
func synthFile(t *testing.T, m synth.Llama) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	_, err := m.Write(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

// tensorEdit replaces a tensor: new type and dims, and data (nil: zero bytes
// of the right size, enough for tests of shapes).
type tensorEdit struct {
	typ  ir.DType
	dims []uint64
	data []byte
}

// edit describes a copy of a file with some entries dropped or replaced.
type edit struct {
	dropKV     []string
	setKV      map[string]gguf.Value // replaced in place, or appended when new
	dropTensor []string
	setTensor  map[string]tensorEdit // replaced in place, or appended when new
}

// rewrite copies every KV and tensor of f into a new GGUF file, applying e.
func rewrite(t *testing.T, f *gguf.File, e edit) *gguf.File {
	t.Helper()
	drop := func(list []string, s string) bool {
		for _, x := range list {
			if x == s {
				return true
			}
		}
		return false
	}
	w := gguf.NewWriter(3)
	seen := map[string]bool{}
	for _, kv := range f.KV {
		seen[kv.Key] = true
		switch v, ok := e.setKV[kv.Key]; {
		case ok:
			w.AddKV(kv.Key, v)
		case !drop(e.dropKV, kv.Key):
			w.AddKV(kv.Key, kv.Value)
		}
	}
	for k, v := range e.setKV {
		if !seen[k] {
			w.AddKV(k, v)
		}
	}
	put := func(name string, te tensorEdit) {
		data := te.data
		if data == nil {
			n := int64(1)
			for _, d := range te.dims {
				n *= int64(d)
			}
			size, err := te.typ.RowBytes(n)
			require.NoError(t, err)
			data = make([]byte, size)
		}
		require.NoError(t, w.AddTensor(name, te.typ, te.dims, data))
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		seen[ti.Name] = true
		if te, ok := e.setTensor[ti.Name]; ok {
			put(ti.Name, te)
		} else if !drop(e.dropTensor, ti.Name) {
			require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)))
		}
	}
	for name, te := range e.setTensor {
		if !seen[name] {
			put(name, te)
		}
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	out, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return out
}

// countOps counts the graph's values by op.
func countOps(g *ir.Graph) map[ir.Op]int {
	n := map[ir.Op]int{}
	for _, v := range g.Values {
		n[v.Op]++
	}
	return n
}

// valuesOf returns the graph's values of one op, in order.
func valuesOf(g *ir.Graph, op ir.Op) []*ir.Value {
	var out []*ir.Value
	for _, v := range g.Values {
		if v.Op == op {
			out = append(out, v)
		}
	}
	return out
}
