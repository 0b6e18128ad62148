package gguf

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/stretchr/testify/require"
)

// TestParseRealFiles parses every shared GGUF file and checks the facts that
// hold for all of them, plus per-file facts where they are known.
func TestParseRealFiles(t *testing.T) {
	type facts struct {
		tensors, kvs int
		arch         string
		check        func(t *testing.T, f *File)
	}
	known := map[string]facts{
		"stories260K.gguf": {48, 19, "llama", func(t *testing.T, f *File) {
			n, ok := f.Uint("llama.embedding_length")
			require.True(t, ok)
			require.EqualValues(t, 64, n)
			tokens, ok := f.Get("tokenizer.ggml.tokens")
			require.True(t, ok)
			require.Equal(t, TypeArray, tokens.Type())
			require.Equal(t, TypeString, tokens.ElemType())
			ss, ok := tokens.Strings()
			require.True(t, ok)
			require.Len(t, ss, 512)
			require.Equal(t, "<unk>", ss[0])
			scores, ok := f.Get("tokenizer.ggml.scores")
			require.True(t, ok)
			fs, ok := scores.Float32s()
			require.True(t, ok)
			require.Len(t, fs, 512)
			types, _ := f.Get("tokenizer.ggml.token_type")
			ts, ok := types.Int32s()
			require.True(t, ok)
			require.Equal(t, []int32{2, 3, 3, 6}, ts[:4])
			eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon")
			require.True(t, ok)
			require.InDelta(t, 1e-5, eps, 1e-12)

			emb, ok := f.Tensor("token_embd.weight")
			require.True(t, ok)
			require.Equal(t, []uint64{64, 512}, emb.Dims)
			require.Equal(t, ir.F32, emb.Type)
			require.EqualValues(t, 64*512*4, emb.Size)
			require.EqualValues(t, 64*512, emb.Elements())
			// The last tensor's data ends exactly at EOF.
			last := f.Tensors[len(f.Tensors)-1]
			require.Equal(t, uint64(f.Size()), f.DataOffset+last.Offset+last.Size)
		}},
		"llama-2-tiny-random.gguf": {12, 18, "llama", func(t *testing.T, f *File) {
			emb, ok := f.Tensor("token_embd.weight")
			require.True(t, ok)
			require.Equal(t, []uint64{8, 32000}, emb.Dims)
			require.Equal(t, ir.F16, emb.Type)
			s, _ := f.String("general.name")
			require.Equal(t, "LLaMA v2", s)
			v, _ := f.Get("tokenizer.ggml.tokens")
			require.Equal(t, 32000, v.Len())
		}},
		"ggml-vocab-gpt-2.gguf": {0, 16, "gpt2", func(t *testing.T, f *File) {
			v, ok := f.Get("tokenizer.ggml.merges")
			require.True(t, ok)
			require.Equal(t, 50000, v.Len())
			s, _ := v.Index(0).Str()
			require.Equal(t, "Ġ t", s)
			// No tensors and no padding: the data section is empty, at EOF.
			require.Equal(t, uint64(f.Size()), f.DataOffset)
		}},
		"ggml-vocab-llama-spm.gguf": {0, 22, "llama", nil},
		"gptoss-g1-mxfp4.gguf": {41, 29, "gpt-oss", func(t *testing.T, f *File) {
			b, ok := f.Bool("tokenizer.ggml.add_bos_token")
			require.True(t, ok)
			require.False(t, b)
			require.True(t, hasType(f, ir.MXFP4))
			base, _ := f.Float("gpt-oss.rope.freq_base")
			require.Equal(t, 150000.0, base)
		}},
		"gptoss-g1-q8emb.gguf": {41, 29, "gpt-oss", nil},
	}

	for _, rel := range realFiles {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			data := readShared(t, rel)
			f, err := Parse(data)
			require.NoError(t, err)
			require.EqualValues(t, 3, f.Version)
			require.EqualValues(t, len(data), f.Size())
			require.NotEmpty(t, f.Architecture())

			// The independent walker agrees on every name and the data start.
			l := walk(t, data)
			require.Len(t, f.KV, len(l.kvs))
			for i, kv := range f.KV {
				require.Equal(t, l.kvs[i].key, kv.Key)
				_ = kv.Value.String() // renders without panicking
			}
			require.Len(t, f.Tensors, len(l.tensors))
			if len(f.Tensors) > 0 {
				require.Equal(t, alignUp(uint64(l.headerEnd), f.Alignment), f.DataOffset)
				require.Zero(t, f.DataOffset%f.Alignment)
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				require.Equal(t, l.tensors[i].name, ti.Name)
				require.True(t, ti.Type.Known())
				require.LessOrEqual(t, f.DataOffset+ti.Offset+ti.Size, uint64(f.Size()), ti.Name)
				require.Len(t, f.TensorData(ti), int(ti.Size))
				got, ok := f.Tensor(ti.Name)
				require.True(t, ok)
				require.Same(t, ti, got)
			}

			base := filepath.Base(rel)
			if k, ok := known[base]; ok {
				require.Len(t, f.Tensors, k.tensors)
				require.Len(t, f.KV, k.kvs)
				require.Equal(t, k.arch, f.Architecture())
				if k.check != nil {
					k.check(t, f)
				}
			}
			// llama-p-<TYPE>.gguf files hold tensors of that type.
			if q, ok := strings.CutPrefix(strings.TrimSuffix(base, ".gguf"), "llama-p-"); ok {
				typ, ok := ir.ParseDType(q)
				require.True(t, ok, q)
				require.True(t, hasType(f, typ), "no %s tensor", typ)
			}
		})
	}
}

func hasType(f *File, typ ir.DType) bool {
	for _, t := range f.Tensors {
		if t.Type == typ {
			return true
		}
	}
	return false
}

// TestOpenMatchesParse checks that the mapped and in-memory paths agree.
func TestOpenMatchesParse(t *testing.T) {
	for _, rel := range []string{stories, "models/gguf/vocab/ggml-vocab-llama-spm.gguf", "models/gguf/synthetic/llama-p-Q4_K.gguf"} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			path := shared.Path(t, rel)
			mapped, err := Open(path)
			require.NoError(t, err)
			parsed, err := Parse(readShared(t, rel))
			require.NoError(t, err)
			requireSameFile(t, parsed, mapped)
			require.Equal(t, parsed.Size(), mapped.Size())

			var ti *TensorInfo
			if len(mapped.Tensors) > 0 {
				ti = &mapped.Tensors[0]
				require.NotNil(t, mapped.TensorData(ti))
			}
			require.NoError(t, mapped.Close())
			require.Nil(t, mapped.TensorData(ti), "TensorData after Close")
			require.NoError(t, mapped.Close(), "second Close")
			// Metadata is copied out of the mapping and survives Close.
			require.Equal(t, parsed.Architecture(), mapped.Architecture())
			v, _ := mapped.Get("tokenizer.ggml.tokens")
			require.NotEmpty(t, v.String())
			require.NoError(t, parsed.Close())
		})
	}
}

// requireSameFile checks that two files have the same metadata, tensor
// descriptions and tensor data.
func requireSameFile(t *testing.T, want, got *File) {
	t.Helper()
	require.Equal(t, want.Version, got.Version)
	require.Equal(t, want.Alignment, got.Alignment)
	requireSameContent(t, want, got)
	require.Equal(t, want.Tensors, got.Tensors)
	require.Equal(t, want.DataOffset, got.DataOffset)
}

// requireSameContent compares KVs, tensor names, shapes, types and data, but
// not the layout (offsets may differ between writers).
func requireSameContent(t *testing.T, want, got *File) {
	t.Helper()
	require.Equal(t, len(want.KV), len(got.KV))
	for i := range want.KV {
		require.Equal(t, want.KV[i].Key, got.KV[i].Key)
		require.True(t, want.KV[i].Value.Equal(got.KV[i].Value), "kv %q: %v != %v", want.KV[i].Key, want.KV[i].Value, got.KV[i].Value)
	}
	require.Equal(t, len(want.Tensors), len(got.Tensors))
	for i := range want.Tensors {
		w, g := &want.Tensors[i], &got.Tensors[i]
		require.Equal(t, w.Name, g.Name)
		require.Equal(t, w.Dims, g.Dims)
		require.Equal(t, w.Type, g.Type)
		require.Equal(t, w.Size, g.Size)
		require.Equal(t, want.TensorData(w), got.TensorData(g), w.Name)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	require.NoError(t, writeFile(empty, nil))
	notGGUF := filepath.Join(dir, "text.gguf")
	require.NoError(t, writeFile(notGGUF, []byte("hello, world\n")))
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.gguf"), "no such file"},
		{"directory", dir, "is a directory"},
		{"empty", empty, "empty"},
		{"not gguf", notGGUF, "bad magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(tc.path)
			require.Nil(t, f)
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "gguf: "), err.Error())
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "\n")
		})
	}
}
