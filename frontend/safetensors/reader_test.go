package safetensors

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
)

// realFiles lists every safetensors file of the shared model directories:
// HF-style (padded header, data in dtype-size then name order), MLX-style
// (no padding, data in hash order, odd offsets), sharded and not.
func realFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(shared.Path(t, "models/hf"), "*", "*.safetensors"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

func openReal(t testing.TB, path string) *File {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer fh.Close()
	f, err := OpenFile(fh)
	require.NoError(t, err, path)
	t.Cleanup(func() { f.Close() })
	return f
}

// TestRealFiles: every shared file parses, its tensors tile the data
// section exactly, and Data returns each tensor's bytes.
func TestRealFiles(t *testing.T) {
	unaligned := 0
	for _, path := range realFiles(t) {
		f := openReal(t, path)
		require.NotEmpty(t, f.Tensors, path)
		var total uint64
		for i := range f.Tensors {
			tn := &f.Tensors[i]
			d := f.Data(tn)
			require.Len(t, d, int(tn.Bytes()), tn.Name)
			require.Equal(t, tn.Elements()*tn.DType.Size(), tn.Bytes())
			total += tn.Bytes()
			if (f.DataOffset()+tn.Begin)%4 != 0 {
				unaligned++
			}
		}
		require.Equal(t, uint64(f.Size())-f.DataOffset(), total, path)
		require.Equal(t, f.DataOffset(), uint64(len(f.Header())))
		switch f.Metadata["format"] {
		case "pt":
			require.Zero(t, f.DataOffset()%8, "%s: the safetensors library pads its header to 8 bytes", path)
		case "mlx":
		case "": // tiny_llama3: "__metadata__": null
		default:
			t.Errorf("%s: metadata %v", path, f.Metadata)
		}
	}
	require.Positive(t, unaligned, "the MLX files hold tensors at offsets that are not 4-byte aligned")
}

// TestMLXUnaligned: llama-p-mlx-q4's tensors all start at odd offsets
// (README-hf.md), and their bytes come out as they are in the file.
func TestMLXUnaligned(t *testing.T) {
	path := shared.Path(t, "models/hf/llama-p-mlx-q4/model.safetensors")
	f := openReal(t, path)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	odd := 0
	for i := range f.Tensors {
		tn := &f.Tensors[i]
		start := f.DataOffset() + tn.Begin
		if start%2 == 1 {
			odd++
		}
		require.Equal(t, raw[start:start+tn.Bytes()], f.Data(tn))
	}
	require.Equal(t, len(f.Tensors), odd)
}

// TestSharded: the stories260K-bf16 index and its two shards make one set
// of 48 tensors, lm_head in the second shard.
func TestSharded(t *testing.T) {
	dir := shared.Path(t, "models/hf/stories260K-bf16")
	data, err := os.ReadFile(filepath.Join(dir, IndexName))
	require.NoError(t, err)
	idx, err := ParseIndex(IndexName, data)
	require.NoError(t, err)
	require.Equal(t, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}, idx.Shards)
	var shards []*File
	for _, s := range idx.Shards {
		shards = append(shards, openReal(t, filepath.Join(dir, s)))
	}
	set, err := NewSet(idx, shards)
	require.NoError(t, err)
	require.Len(t, set.Names(), 48)
	tn, f, ok := set.Tensor("lm_head.weight")
	require.True(t, ok)
	require.Equal(t, shards[1], f)
	require.Equal(t, BF16, tn.DType)
	require.Equal(t, []uint64{512, 64}, tn.Shape)
	require.Len(t, set.Data("lm_head.weight"), 512*64*2)
	require.Nil(t, set.Data("no.such.tensor"))
}

// TestWriteRoundTrip: Write's output parses back to the same tensors, with
// and without padding, and with padding as the safetensors library pads.
func TestWriteRoundTrip(t *testing.T) {
	src := openReal(t, shared.Path(t, "models/hf/stories260K/model.safetensors"))
	var ts []WriteTensor
	for i := range src.Tensors {
		tn := &src.Tensors[i]
		ts = append(ts, WriteTensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape, Data: src.Data(tn)})
	}
	for _, align := range []int{1, 8} {
		var buf bytes.Buffer
		require.NoError(t, Write(&buf, map[string]string{"format": "pt"}, ts, align))
		f, err := Parse("w", buf.Bytes())
		require.NoError(t, err)
		require.Zero(t, f.DataOffset()%uint64(align))
		require.Len(t, f.Tensors, len(ts))
		for _, w := range ts {
			tn, ok := f.Tensor(w.Name)
			require.True(t, ok)
			require.Equal(t, w.Shape, tn.Shape)
			require.Equal(t, w.Data, f.Data(tn))
		}
	}
	// The real file is exactly what the safetensors library writes: the
	// same tensors in its data order give the same bytes.
	order := append([]WriteTensor(nil), ts...)
	sort.SliceStable(order, func(a, b int) bool {
		ta, _ := src.Tensor(order[a].Name)
		tb, _ := src.Tensor(order[b].Name)
		return ta.Begin < tb.Begin
	})
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, map[string]string{"format": "pt"}, order, 8))
	raw, err := os.ReadFile(shared.Path(t, "models/hf/stories260K/model.safetensors"))
	require.NoError(t, err)
	require.Equal(t, len(raw), buf.Len())
	require.Equal(t, raw[src.DataOffset():], buf.Bytes()[src.DataOffset():])
}

// small is a valid two-tensor file, the base of the corrupt cases.
func small(t testing.TB, align int) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, map[string]string{"format": "pt"}, []WriteTensor{
		{Name: "a", DType: F32, Shape: []uint64{2, 2}, Data: make([]byte, 16)},
		{Name: "b", DType: BF16, Shape: []uint64{3}, Data: make([]byte, 6)},
	}, align))
	return buf.Bytes()
}

// withHeader makes a file of a header given as text and n data bytes.
func withHeader(header string, n int) []byte {
	b := make([]byte, 8, 8+len(header)+n)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, n)...)
}

// TestCorrupt: each damaged file is one line naming the file, the tensor
// where there is one, and the byte offset.
func TestCorrupt(t *testing.T) {
	good := small(t, 1)
	hdr := func(n uint64) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(b, n)
		return b
	}
	entry := func(s string) []byte {
		return withHeader(`{"a":`+s+`}`, 16)
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "the file is 0 bytes, shorter than the 8-byte header length (at byte 0)"},
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
		{"header length 2^63", hdr(1 << 63), "header length 9223372036854775808 runs past the end of the file"},
		{"header length 2^64-1", hdr(^uint64(0)), "header length 18446744073709551615 runs past the end of the file"},
		{"header length past EOF", hdr(uint64(len(good))), "runs past the end of the file"},
		{"header length 1", hdr(1), "header length 1 is too short for a JSON object"},
		{"truncated data", good[:len(good)-3], `tensor "b": data_offsets [16, 22) run past the end of the file: the data section is 19 bytes`},
		{"not JSON", withHeader(`{"a" 1}`, 0), "invalid JSON"},
		{"JSON ends early", withHeader(`{"a":{"dtype":"F32"`, 0), "the JSON ends early"},
		{"not an object", withHeader(`[1, 2]`, 0), "the header does not start with '{'"},
		{"bad UTF-8", withHeader("{\"\xff\":1}", 0), "the header is not valid UTF-8 (at byte 10)"},
		{"trailing garbage", withHeader(`{}xx`, 0), "bytes after the JSON object (only spaces may follow it) (at byte 10)"},
		{"duplicate tensor", withHeader(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `key "a" appears twice`},
		{"unknown dtype", entry(`{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}`), `tensor "a": unknown dtype "Q4"`},
		{"dtype not string", entry(`{"dtype":4,"shape":[4],"data_offsets":[0,16]}`), `tensor "a": dtype is a number, not a string`},
		{"no dtype", entry(`{"shape":[4],"data_offsets":[0,16]}`), `tensor "a": the entry has no dtype`},
		{"no shape", entry(`{"dtype":"F32","data_offsets":[0,16]}`), `the entry has no shape`},
		{"no offsets", entry(`{"dtype":"F32","shape":[4]}`), `the entry has no data_offsets`},
		{"unknown key", entry(`{"dtype":"F32","shape":[4],"data_offsets":[0,16],"Dtype":"x"}`), `tensor "a": unknown entry key "Dtype"`},
		{"entry not object", entry(`[1]`), `tensor "a": the entry is a list, not an object`},
		{"negative dim", entry(`{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}`), `tensor "a": shape[0] = "-4" is not a non-negative integer`},
		{"float dim", entry(`{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]}`), `shape[0] = "4.0" is not a non-negative integer`},
		{"huge dim", entry(`{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,16]}`), `is not a non-negative integer below 2^64`},
		{"shape overflow", entry(`{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}`), `F32 [4294967296 4294967296] is more bytes than 2^64`},
		{"too many dims", entry(`{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,4],"data_offsets":[0,16]}`), `shape has 9 dims, more than 8`},
		{"shape disagrees with offsets", entry(`{"dtype":"F32","shape":[3],"data_offsets":[0,16]}`), `tensor "a": F32 [3] is 12 bytes but data_offsets [0, 16) span 16`},
		{"dtype disagrees with offsets", entry(`{"dtype":"F16","shape":[4],"data_offsets":[0,16]}`), `F16 [4] is 8 bytes but data_offsets [0, 16) span 16`},
		{"shape not a list", entry(`{"dtype":"F32","shape":"4","data_offsets":[0,16]}`), `tensor "a": shape is a string, not a list of integers`},
		{"three offsets", entry(`{"dtype":"F32","shape":[4],"data_offsets":[0,8,16]}`), `data_offsets has 3 numbers, want 2`},
		{"offsets reversed", entry(`{"dtype":"F32","shape":[4],"data_offsets":[16,0]}`), `data_offsets [16, 0) end before they begin`},
		{"offsets out of file", withHeader(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[100,116]}}`, 16), `tensor "a": data_offsets [100, 116) run past the end of the file`},
		{"overlap", withHeader(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 16), `tensor "b": data [8, 16) overlaps tensor "a", which ends at 16`},
		{"gap", withHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}`, 16), `data section bytes [8, 12) between tensor "a" and this one belong to no tensor`},
		{"stray tail", withHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 16), `the last 8 bytes of the file belong to no tensor`},
		{"gap at start", withHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 16), `bytes [0, 8) before the first tensor belong to no tensor`},
		{"metadata not strings", withHeader(`{"__metadata__":{"format":1}}`, 0), `__metadata__ "format" is a number, not a string`},
		{"empty name", withHeader(`{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), `the tensor name is empty`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("x.safetensors", c.data)
			require.Error(t, err)
			require.Nil(t, f)
			var e *Error
			require.ErrorAs(t, err, &e)
			msg := err.Error()
			require.Contains(t, msg, c.want)
			require.True(t, strings.HasPrefix(msg, "safetensors: x.safetensors: "), msg)
			require.NotContains(t, msg, "\n")
			t.Log(msg)
		})
	}
}

// TestIndexCorrupt: a bad index is one line naming it, the tensor and the
// byte offset; a weight_map that disagrees with its shards names both.
func TestIndexCorrupt(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"not JSON", `{"weight_map": }`, "invalid JSON"},
		{"no weight_map", `{"metadata": {}}`, "no weight_map"},
		{"empty weight_map", `{"weight_map": {}}`, "weight_map is empty"},
		{"weight_map not object", `{"weight_map": []}`, "weight_map is a list, not an object"},
		{"shard not string", `{"weight_map": {"a": 1}}`, `tensor "a": weight_map gives a number, not a shard file name`},
		{"shard escapes", `{"weight_map": {"a": "../x.safetensors"}}`, `weight_map shard "../x.safetensors" is not a plain file name`},
		{"shard dotdot", `{"weight_map": {"a": ".."}}`, `is not a file name`},
		{"shard empty", `{"weight_map": {"a": ""}}`, `weight_map shard "" is empty`},
		{"duplicate tensor", `{"weight_map": {"a": "x", "a": "y"}}`, `key "a" appears twice`},
		{"metadata not object", `{"metadata": 3, "weight_map": {"a": "x"}}`, `metadata is a number, not an object`},
		{"not object", `[]`, `not a JSON object`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseIndex("idx.json", []byte(c.data))
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			require.True(t, strings.HasPrefix(err.Error(), "safetensors: idx.json: "), err.Error())
			t.Log(err)
		})
	}

	f1, err := Parse("s1", small(t, 8))
	require.NoError(t, err)
	idx, err := ParseIndex("idx.json", []byte(`{"weight_map": {"a": "s1", "c": "s1"}}`))
	require.NoError(t, err)
	_, err = NewSet(idx, []*File{f1})
	require.EqualError(t, err, `safetensors: idx.json: tensor "c": weight_map puts it in "s1", which has no such tensor (at byte 32)`)
	idx, err = ParseIndex("idx.json", []byte(`{"weight_map": {"a": "s1"}}`))
	require.NoError(t, err)
	_, err = NewSet(idx, []*File{f1})
	require.ErrorContains(t, err, `safetensors: s1: tensor "b": the shard holds it but model.safetensors.index.json does not list it (at byte`)
	f2, err := Parse("s2", small(t, 8))
	require.NoError(t, err)
	idx, err = ParseIndex("idx.json", []byte(`{"weight_map": {"a": "s1", "b": "s2"}}`))
	require.NoError(t, err)
	_, err = NewSet(idx, []*File{f1, f2})
	require.ErrorContains(t, err, `safetensors: s1: tensor "b": the shard holds it but model.safetensors.index.json puts it in "s2"`)
}

// TestDataBounds: Data never panics on a tensor that is not the file's.
func TestDataBounds(t *testing.T) {
	f, err := Parse("x", small(t, 8))
	require.NoError(t, err)
	require.Nil(t, f.Data(nil))
	require.Nil(t, f.Data(&Tensor{Begin: 0, End: 1 << 40}))
	require.Nil(t, f.Data(&Tensor{Begin: 5, End: 2}))
	require.NoError(t, f.Close())
	require.NoError(t, f.Close())
}
