package safetensors

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// miniature rebuilds a real file with its real names, dtypes and metadata
// but every tensor cut to one element: a small seed with the file's real
// structure, so that the fuzzer spends its time on the header rather than
// on megabytes of weights.
func miniature(t testing.TB, f *File, align int) []byte {
	ts := make([]WriteTensor, len(f.Tensors))
	for i := range f.Tensors {
		tn := &f.Tensors[i]
		shape := make([]uint64, len(tn.Shape))
		for j := range shape {
			shape[j] = 1
		}
		ts[i] = WriteTensor{Name: tn.Name, DType: tn.DType, Shape: shape, Data: f.Data(tn)[:tn.DType.Size()]}
	}
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, f.Metadata, ts, align))
	return buf.Bytes()
}

// FuzzHeader feeds Parse damaged files. Whatever the input it must not
// panic and must fail with a one-line *Error naming the file; a file it
// accepts must have its tensors tile the data section, serve every
// tensor's bytes, and come back the same through Write.
func FuzzHeader(f *testing.F) {
	for _, path := range realFiles(f) {
		fh, err := os.Open(path)
		require.NoError(f, err)
		file, err := OpenFile(fh)
		fh.Close()
		require.NoError(f, err)
		f.Add(miniature(f, file, 8))
		f.Add(miniature(f, file, 1))
		file.Close()
	}
	f.Add(small(f, 1))
	f.Add(small(f, 8))
	f.Add(withHeader(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 16))
	f.Add(withHeader(`{"__metadata__":null,"x":{"data_offsets":[0,2],"dtype":"BF16","shape":[]}}  `, 2))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.safetensors", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error is %T, not *Error: %v", err, err)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "safetensors: fuzz.safetensors: ") {
				t.Fatalf("not one line naming the file: %q", msg)
			}
			if e.Offset > int64(len(data)) {
				t.Fatalf("offset %d past the %d-byte input: %q", e.Offset, len(data), msg)
			}
			return
		}
		dataLen := uint64(len(data)) - file.DataOffset()
		var total uint64
		ts := make([]WriteTensor, len(file.Tensors))
		for i := range file.Tensors {
			tn := &file.Tensors[i]
			b := file.Data(tn)
			if uint64(len(b)) != tn.Bytes() || tn.Elements()*tn.DType.Size() != tn.Bytes() {
				t.Fatalf("tensor %q: %d bytes served, %d declared", tn.Name, len(b), tn.Bytes())
			}
			total += tn.Bytes()
			ts[i] = WriteTensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape, Data: b}
		}
		if total != dataLen {
			t.Fatalf("tensors hold %d bytes of a %d-byte data section", total, dataLen)
		}
		slices.SortStableFunc(ts, func(a, b WriteTensor) int {
			ta, _ := file.Tensor(a.Name)
			tb, _ := file.Tensor(b.Name)
			return cmpU64(ta.Begin, tb.Begin)
		})
		var buf bytes.Buffer
		if err := Write(&buf, file.Metadata, ts, 1); err != nil {
			t.Fatal(err)
		}
		again, err := Parse("again", buf.Bytes())
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if len(again.Tensors) != len(file.Tensors) || len(again.Metadata) != len(file.Metadata) {
			t.Fatalf("round trip: %d tensors, %d metadata → %d, %d", len(file.Tensors), len(file.Metadata), len(again.Tensors), len(again.Metadata))
		}
		for i := range file.Tensors {
			tn := &file.Tensors[i]
			a, ok := again.Tensor(tn.Name)
			if !ok || a.DType != tn.DType || !slices.Equal(a.Shape, tn.Shape) || !bytes.Equal(again.Data(a), file.Data(tn)) {
				t.Fatalf("round trip changed tensor %q", tn.Name)
			}
		}
		for k, v := range file.Metadata {
			if again.Metadata[k] != v {
				t.Fatalf("round trip changed metadata %q", k)
			}
		}
	})
}

// FuzzIndex feeds ParseIndex damaged indexes: no panic, one line naming
// the file, and every shard of an accepted index a plain file name.
func FuzzIndex(f *testing.F) {
	for _, path := range realFiles(f) {
		if data, err := os.ReadFile(filepath.Join(filepath.Dir(path), IndexName)); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"metadata": {"total_size": 3}, "weight_map": {"a": "x.safetensors"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ParseIndex("idx.json", data)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "safetensors: idx.json: ") {
				t.Fatalf("not one line naming the file: %q", msg)
			}
			return
		}
		for _, s := range idx.Shards {
			if plainName(s) != nil || filepath.Base(s) != s {
				t.Fatalf("shard %q is not a plain file name", s)
			}
		}
	})
}
