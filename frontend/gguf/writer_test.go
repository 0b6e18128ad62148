package gguf

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/minerva-llm/minerva/ir"
	"github.com/stretchr/testify/require"
)

// allTypesKVs has one KV of every value type, including arrays of every
// element type, empty arrays and arrays nested three deep.
func allTypesKVs() []KV {
	return []KV{
		{"t.uint8", Uint8(250)},
		{"t.int8", Int8(-7)},
		{"t.uint16", Uint16(65535)},
		{"t.int16", Int16(-32768)},
		{"t.uint32", Uint32(4294967295)},
		{"t.int32", Int32(-2147483648)},
		{"t.float32", Float32(3.25)},
		{"t.float32.nan", Float32(float32(math.NaN()))},
		{"t.bool.true", Bool(true)},
		{"t.bool.false", Bool(false)},
		{"t.string", String("héllo\x00wörld")},
		{"t.string.empty", String("")},
		{"t.uint64", Uint64(math.MaxUint64)},
		{"t.int64", Int64(math.MinInt64)},
		{"t.float64", Float64(-1e300)},
		{"", String("an empty key is legal")},
		{"a.uint8", Array(TypeUint8, []Value{Uint8(1), Uint8(2), Uint8(255)})},
		{"a.int8", Array(TypeInt8, []Value{Int8(-1), Int8(127)})},
		{"a.uint16", Array(TypeUint16, []Value{Uint16(7)})},
		{"a.int16", Array(TypeInt16, []Value{Int16(-300), Int16(300)})},
		{"a.uint32", Array(TypeUint32, []Value{Uint32(1 << 31)})},
		{"a.int32", Int32Array([]int32{-5, 0, 5})},
		{"a.float32", Float32Array([]float32{0.5, -0, float32(math.Inf(1))})},
		{"a.bool", Array(TypeBool, []Value{Bool(true), Bool(false), Bool(true)})},
		{"a.string", StringArray([]string{"a", "", "ccc"})},
		{"a.uint64", Array(TypeUint64, []Value{Uint64(1 << 63)})},
		{"a.int64", Array(TypeInt64, []Value{Int64(-1)})},
		{"a.float64", Array(TypeFloat64, []Value{Float64(math.Pi)})},
		{"a.empty", Array(TypeFloat32, nil)},
		{"a.empty.strings", StringArray(nil)},
		{"a.nested", Array(TypeArray, []Value{
			Int32Array([]int32{1, 2}),
			StringArray([]string{"x"}),
			Array(TypeArray, []Value{Array(TypeArray, []Value{Array(TypeUint8, []Value{Uint8(9)})}), Array(TypeBool, nil)}),
			Array(TypeArray, nil),
		})},
	}
}

type testTensor struct {
	name string
	typ  ir.DType
	dims []uint64
}

var allTypesTensors = []testTensor{
	{"f32", ir.F32, []uint64{3}},
	{"f16", ir.F16, []uint64{2, 3}},
	{"bf16", ir.BF16, []uint64{5}},
	{"f64", ir.F64, []uint64{1, 1, 1, 2}},
	{"i8", ir.I8, []uint64{7, 1, 1}},
	{"i16", ir.I16, []uint64{1}},
	{"i32", ir.I32, []uint64{2, 2}},
	{"i64", ir.I64, []uint64{3}},
	{"q4_0", ir.Q4_0, []uint64{64, 2}},
	{"q8_0", ir.Q8_0, []uint64{32}},
	{"q4_k", ir.Q4_K, []uint64{256, 3}},
	{"q6_k", ir.Q6_K, []uint64{512}},
	{"mxfp4", ir.MXFP4, []uint64{32, 1, 2}},
}

func randomBytes(r *rand.Rand, n uint64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		for _, align := range []uint64{32, 64, 1, 4096} {
			t.Run(filepath.Join("v"+itoa(int(version)), "align"+itoa(int(align))), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(version), align))
				w := NewWriter(version)
				w.SetAlignment(align)
				kvs := allTypesKVs()
				for _, kv := range kvs {
					w.AddKV(kv.Key, kv.Value)
				}
				datas := map[string][]byte{}
				for _, tt := range allTypesTensors {
					n, err := tt.typ.RowBytes(int64(tt.dims[0]))
					require.NoError(t, err)
					for _, d := range tt.dims[1:] {
						n *= int64(d)
					}
					data := randomBytes(r, uint64(n))
					datas[tt.name] = data
					require.NoError(t, w.AddTensor(tt.name, tt.typ, tt.dims, data))
				}
				var buf bytes.Buffer
				n, err := w.WriteTo(&buf)
				require.NoError(t, err)
				require.EqualValues(t, buf.Len(), n)
				require.Zero(t, buf.Len()%int(align), "file size is padded to the alignment")
				require.Zero(t, n%int64(align))

				f, err := Parse(buf.Bytes())
				require.NoError(t, err)
				require.Equal(t, version, f.Version)
				require.Equal(t, align, f.Alignment)
				require.Zero(t, f.DataOffset%align)
				if align != DefaultAlignment {
					a, ok := f.Uint("general.alignment")
					require.True(t, ok)
					require.Equal(t, align, a)
					kvs = append(kvs[:0:0], append([]KV{{"general.alignment", Uint32(uint32(align))}}, kvs...)...)
					// SetAlignment came first, so general.alignment leads.
				} else {
					_, ok := f.Get("general.alignment")
					require.False(t, ok, "default alignment is not written")
				}
				require.Len(t, f.KV, len(kvs))
				for i, kv := range kvs {
					require.Equal(t, kv.Key, f.KV[i].Key)
					require.True(t, kv.Value.Equal(f.KV[i].Value), "%s: wrote %v, read %v", kv.Key, kv.Value, f.KV[i].Value)
					got, ok := f.Get(kv.Key)
					require.True(t, ok)
					require.True(t, kv.Value.Equal(got))
				}
				require.Len(t, f.Tensors, len(allTypesTensors))
				for i, tt := range allTypesTensors {
					ti := &f.Tensors[i]
					require.Equal(t, tt.name, ti.Name)
					require.Equal(t, tt.typ, ti.Type)
					require.Equal(t, tt.dims, ti.Dims)
					require.Zero(t, ti.Offset%align)
					require.Equal(t, datas[tt.name], f.TensorData(ti))
				}
				// Writing again gives the same bytes.
				var again bytes.Buffer
				_, err = w.WriteTo(&again)
				require.NoError(t, err)
				require.Equal(t, buf.Bytes(), again.Bytes())
			})
		}
	}
}

// TestRewriteRealFiles copies every KV and tensor of each real file through
// the Writer and checks that the result parses to the same content and is
// in fact the same file.
func TestRewriteRealFiles(t *testing.T) {
	for _, rel := range realFiles {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			data := readShared(t, rel)
			orig, err := Parse(data)
			require.NoError(t, err)
			w := NewWriter(orig.Version)
			for _, kv := range orig.KV {
				w.AddKV(kv.Key, kv.Value)
			}
			for i := range orig.Tensors {
				ti := &orig.Tensors[i]
				require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Dims, orig.TensorData(ti)))
			}
			var buf bytes.Buffer
			_, err = w.WriteTo(&buf)
			require.NoError(t, err)
			copy, err := Parse(buf.Bytes())
			require.NoError(t, err)
			require.Equal(t, orig.Version, copy.Version)
			require.Equal(t, orig.Alignment, copy.Alignment)
			requireSameContent(t, orig, copy)
			// Our layout is llama.cpp's, so the copy is the same file.
			got := buf.Bytes()
			require.True(t, bytes.Equal(data, got), "rewrite differs from the original")
		})
	}
}

func TestWriterErrors(t *testing.T) {
	f32 := make([]byte, 16)
	for _, tc := range []struct {
		name  string
		build func(w *Writer) error // returns AddTensor's error, if any
		want  string
	}{
		{"version 1", func(w *Writer) error { *w = *NewWriter(1); return nil }, "version 1"},
		{"duplicate key", func(w *Writer) error { w.AddKV("a", Uint8(1)); w.AddKV("a", Uint8(2)); return nil }, `duplicate key "a"`},
		{"zero value", func(w *Writer) error { w.AddKV("a", Value{}); return nil }, "invalid"},
		{"array of mixed types", func(w *Writer) error {
			w.AddKV("a", Array(TypeUint8, []Value{Uint8(1), Int8(2)}))
			return nil
		}, "element 1 has type int8, want uint8"},
		{"nested array with a bad element", func(w *Writer) error {
			w.AddKV("a", Array(TypeArray, []Value{Array(TypeString, []Value{Uint8(1)})}))
			return nil
		}, "element 0"},
		{"array of invalid type", func(w *Writer) error { w.AddKV("a", Array(ValueType(77), nil)); return nil }, "type(77)"},
		{"too deep", func(w *Writer) error {
			v := Array(TypeUint8, nil)
			for range maxNesting {
				v = Array(TypeArray, []Value{v})
			}
			w.AddKV("a", v)
			return nil
		}, "nested deeper"},
		{"alignment 3", func(w *Writer) error { w.SetAlignment(3); return nil }, "alignment 3"},
		{"alignment 0", func(w *Writer) error { w.SetAlignment(0); return nil }, "alignment 0"},
		{"alignment 2^40", func(w *Writer) error { w.SetAlignment(1 << 40); return nil }, "uint32"},
		{"general.alignment uint64", func(w *Writer) error { w.AddKV("general.alignment", Uint64(64)); return nil }, "want uint32"},
		{"general.alignment 48", func(w *Writer) error { w.AddKV("general.alignment", Uint32(48)); return nil }, "alignment 48"},
		{"data too short", func(w *Writer) error { return w.AddTensor("x", ir.F32, []uint64{5}, f32) }, "16 bytes of data, want 20"},
		{"duplicate tensor", func(w *Writer) error {
			require.NoError(t, w.AddTensor("x", ir.F32, []uint64{4}, f32))
			return w.AddTensor("x", ir.F32, []uint64{4}, f32)
		}, "duplicate tensor"},
		{"unknown type", func(w *Writer) error { return w.AddTensor("x", ir.DType(200), []uint64{4}, f32) }, "unknown type 200"},
		{"no dims", func(w *Writer) error { return w.AddTensor("x", ir.F32, nil, nil) }, "0 dims"},
		{"5 dims", func(w *Writer) error { return w.AddTensor("x", ir.F32, []uint64{1, 1, 1, 1, 4}, f32) }, "5 dims"},
		{"zero dim", func(w *Writer) error { return w.AddTensor("x", ir.F32, []uint64{4, 0}, nil) }, "dim 1 = 0"},
		{"overflow", func(w *Writer) error { return w.AddTensor("x", ir.F32, []uint64{1 << 40, 1 << 40}, nil) }, "overflow"},
		{"block size", func(w *Writer) error { return w.AddTensor("x", ir.Q4_0, []uint64{16}, f32) }, "block size 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(3)
			addErr := tc.build(w)
			_, err := w.WriteTo(&bytes.Buffer{})
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), "gguf: ")
			if addErr != nil {
				require.Equal(t, addErr, err, "WriteTo reports the AddTensor error")
			}
		})
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.after {
		n := f.after
		f.after = 0
		return n, errors.New("disk full")
	}
	f.after -= len(p)
	return len(p), nil
}

func TestWriterReportsWriteErrors(t *testing.T) {
	w := NewWriter(3)
	w.AddKV("a", String("b"))
	require.NoError(t, w.AddTensor("x", ir.F32, []uint64{1 << 19}, make([]byte, 4<<19)))
	n, err := w.WriteTo(&failWriter{after: 100})
	require.EqualError(t, err, "disk full")
	require.EqualValues(t, 100, n)
}

func TestWriterLayout(t *testing.T) {
	// No tensors: the file ends after the header, whatever the alignment.
	w := NewWriter(3)
	w.SetAlignment(1 << 30)
	w.AddKV("general.architecture", String("llama"))
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	require.NoError(t, err)
	require.Less(t, n, int64(200))
	f, err := Parse(buf.Bytes())
	require.NoError(t, err)
	require.EqualValues(t, 1<<30, f.Alignment)
	require.Equal(t, uint64(n), f.DataOffset)

	// Large alignments pad without allocating the alignment.
	w = NewWriter(2)
	w.SetAlignment(1 << 16)
	require.NoError(t, w.AddTensor("a", ir.F32, []uint64{1}, []byte{1, 2, 3, 4}))
	require.NoError(t, w.AddTensor("b", ir.I8, []uint64{3}, []byte{5, 6, 7}))
	buf.Reset()
	n, err = w.WriteTo(&buf)
	require.NoError(t, err)
	require.EqualValues(t, 3<<16, n) // header, a, b: one aligned block each
	f, err = Parse(buf.Bytes())
	require.NoError(t, err)
	require.EqualValues(t, 1<<16, f.DataOffset)
	b, _ := f.Tensor("b")
	require.EqualValues(t, 1<<16, b.Offset)
	require.Equal(t, []byte{5, 6, 7}, f.TensorData(b))
}
