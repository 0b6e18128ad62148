package gguf_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
)

// TestAddTensorFunc: a tensor produced at WriteTo time (in two pieces, as a
// large synthetic file writes its tensors) reads back byte for byte, next to
// an ordinary tensor; a producer that writes too few or too many bytes, or
// fails, makes WriteTo fail naming the tensor.
func TestAddTensorFunc(t *testing.T) {
	data := make([]byte, 4*40)
	for i := range data {
		data[i] = byte(3*i + 1)
	}
	pieces := func(b []byte) func(io.Writer) error {
		return func(w io.Writer) error {
			if _, err := w.Write(b[:len(b)/3]); err != nil {
				return err
			}
			_, err := w.Write(b[len(b)/3:])
			return err
		}
	}
	w := gguf.NewWriter(3)
	w.AddKV("general.architecture", gguf.String("test"))
	require.NoError(t, w.AddTensor("plain", ir.F32, []uint64{8, 5}, data))
	require.NoError(t, w.AddTensorFunc("lazy", ir.F32, []uint64{8, 5}, pieces(data)))
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	for _, name := range []string{"plain", "lazy"} {
		ti, ok := f.Tensor(name)
		require.True(t, ok)
		require.Equal(t, data, f.TensorData(ti), name)
	}

	for _, c := range []struct {
		name    string
		produce func(io.Writer) error
		want    string
	}{
		{"short", pieces(data[:len(data)-4]), "wrote 156 bytes, want 160"},
		{"long", pieces(append(append([]byte{}, data...), 0)), "wrote 161 bytes, want 160"},
		{"failing", func(io.Writer) error { return errors.New("out of entropy") }, "out of entropy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := gguf.NewWriter(3)
			require.NoError(t, w.AddTensorFunc("lazy", ir.F32, []uint64{8, 5}, c.produce))
			_, err := w.WriteTo(io.Discard)
			require.ErrorContains(t, err, `"lazy"`)
			require.ErrorContains(t, err, c.want)
		})
	}
	w = gguf.NewWriter(3)
	require.ErrorContains(t, w.AddTensorFunc("odd", ir.Q8_0, []uint64{30, 2}, pieces(data)), "block size")
	require.ErrorContains(t, w.AddTensorFunc("nil", ir.F32, []uint64{8}, nil), "nil producer")
}
