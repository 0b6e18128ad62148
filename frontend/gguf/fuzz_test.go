package gguf

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// miniature rebuilds a real file with every KV kept (arrays cut to 16
// elements) and every tensor shrunk to one block: a small, valid seed that
// still has the file's real structure, so the fuzzer spends its time on
// metadata and tensor infos rather than on megabytes of weights.
func miniature(t testing.TB, f *File) []byte {
	w := NewWriter(f.Version)
	w.SetAlignment(f.Alignment)
	for _, kv := range f.KV {
		if kv.Key != "general.alignment" {
			w.AddKV(kv.Key, shorten(kv.Value))
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		dims := make([]uint64, len(ti.Dims))
		for j := range dims {
			dims[j] = 1
		}
		dims[0] = uint64(ti.Type.BlockSize())
		require.NoError(t, w.AddTensor(ti.Name, ti.Type, dims, f.TensorData(ti)[:ti.Type.BlockBytes()]))
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

func shorten(v Value) Value {
	if v.Type() != TypeArray || v.Len() <= 16 {
		return v
	}
	vals := make([]Value, 16)
	for i := range vals {
		vals[i] = shorten(v.Index(i))
	}
	return Array(v.ElemType(), vals)
}

// FuzzReader feeds Parse damaged files. Whatever the input, Parse must not
// panic, must fail with a one-line *Error, and a file it accepts must be
// fully readable and survive a write/parse round trip unchanged.
func FuzzReader(f *testing.F) {
	for _, rel := range realFiles {
		data := readShared(f, rel)
		parsed, err := Parse(data)
		require.NoError(f, err)
		f.Add(miniature(f, parsed))
		// The real bytes too, cut to their header and a little data: whole
		// megabyte seeds make the fuzzer crawl (every exec and every
		// minimisation step copies them) without adding coverage.
		f.Add(data[:min(len(data), int(parsed.DataOffset)+1024, 16<<10)])
	}
	// Every value type, nested arrays and every tensor type, small.
	w := NewWriter(2)
	w.SetAlignment(64)
	for _, kv := range allTypesKVs() {
		w.AddKV(kv.Key, kv.Value)
	}
	for _, tt := range allTypesTensors {
		n, err := tt.typ.RowBytes(int64(tt.dims[0]))
		require.NoError(f, err)
		for _, d := range tt.dims[1:] {
			n *= int64(d)
		}
		require.NoError(f, w.AddTensor(tt.name, tt.typ, tt.dims, make([]byte, n)))
	}
	var all bytes.Buffer
	_, err := w.WriteTo(&all)
	require.NoError(f, err)
	f.Add(all.Bytes())

	mini, err := Parse(readShared(f, stories))
	require.NoError(f, err)
	for _, v := range damage(f, miniature(f, mini)) {
		f.Add(v.data) // the same damage on a small file: quick to mutate
	}
	for _, v := range append(storiesVariants(f), handmadeVariants(f)...) {
		// The damage is in the first 16 KB (header) or in the data offsets;
		// trimming the weights keeps seeds small either way.
		f.Add(v.data[:min(len(v.data), 16<<10)])
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "error of type %T: %v", err, err)
			msg := err.Error()
			require.True(t, strings.HasPrefix(msg, "gguf: "), msg)
			require.NotContains(t, msg, "\n")
			require.LessOrEqual(t, e.Offset, int64(len(data)))
			return
		}
		for _, kv := range file.KV {
			_ = kv.Value.String()
			touch(kv.Value)
			got, ok := file.Get(kv.Key)
			require.True(t, ok)
			require.True(t, got.Equal(kv.Value))
		}
		w := NewWriter(file.Version)
		for _, kv := range file.KV {
			w.AddKV(kv.Key, kv.Value)
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			b := file.TensorData(ti)
			require.Len(t, b, int(ti.Size))
			got, ok := file.Tensor(ti.Name)
			require.True(t, ok)
			require.Same(t, ti, got)
			require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Dims, b))
		}
		var buf bytes.Buffer
		_, err = w.WriteTo(&buf)
		require.NoError(t, err, "the writer refuses what the reader accepted")
		again, err := Parse(buf.Bytes())
		require.NoError(t, err, "the reader refuses what the writer wrote")
		require.Equal(t, file.Alignment, again.Alignment)
		requireSameContent(t, file, again)
	})
}

// touch calls every accessor of v and its elements.
func touch(v Value) {
	v.Int()
	v.Uint()
	v.Float()
	v.Bool()
	v.Str()
	v.Strings()
	v.Float32s()
	v.Int32s()
	for i := 0; i < v.Len(); i++ {
		touch(v.Index(i))
	}
	v.Index(-1)
	v.Index(v.Len())
}
