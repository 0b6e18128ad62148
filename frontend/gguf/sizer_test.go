package gguf_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
)

// sizedBuffer records the size WriteTo announces and how much was written
// by then.
type sizedBuffer struct {
	bytes.Buffer
	size, before int64
}

func (s *sizedBuffer) SetSize(n int64) { s.size, s.before = n, int64(s.Len()) }

// WriteTo tells a gguf.Sizer the file's exact size before writing any of it
// (a progress bar's total), with and without tensors.
func TestWriteToAnnouncesSize(t *testing.T) {
	data := make([]byte, 4*37)
	for i := range data {
		data[i] = byte(7*i + 3)
	}
	for _, tensors := range []int{0, 1, 3} {
		w := gguf.NewWriter(3)
		w.AddKV("general.architecture", gguf.String("test"))
		for i := range tensors {
			require.NoError(t, w.AddTensor(string(rune('a'+i)), ir.F32, []uint64{37}, data))
		}
		var out sizedBuffer
		n, err := w.WriteTo(&out)
		require.NoError(t, err)
		require.Equal(t, int64(out.Len()), n)
		require.Equal(t, n, out.size, "%d tensors", tensors)
		require.Zero(t, out.before, "announced before the first byte")
	}
}
