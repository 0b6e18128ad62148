package gguf

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// variant is a damaged copy of a valid file and what the error must say.
type variant struct {
	name string
	data []byte
	want []string // substrings of the error text
	at   int64    // expected Error.Offset, or -1 to skip the check
	eof  bool     // the error must be a truncation (io.ErrUnexpectedEOF)
}

const huge = uint64(1) << 62 // 4611686018427387904

func put32(b []byte, off int, v uint32) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(b[off:], v)
	return b
}

func put64(b []byte, off int, v uint64) []byte {
	b = append([]byte(nil), b...)
	binary.LittleEndian.PutUint64(b[off:], v)
	return b
}

func patch(b []byte, off int, with string) []byte {
	b = append([]byte(nil), b...)
	copy(b[off:], with)
	return b
}

// storiesVariants damages stories260K.gguf by byte surgery at every section.
// Offsets come from the independent walker, so the cases stay correct if
// the shared file is ever regenerated with a different vocabulary.
func storiesVariants(t testing.TB) []variant {
	b := readShared(t, stories)
	l := walk(t, b)
	require.Greater(t, int(alignUp(uint64(l.headerEnd), DefaultAlignment)), l.headerEnd, "stories260K has padding before its data")
	return damage(t, b)
}

// cut returns b's first n bytes, or all of b if it is shorter.
func cut(b []byte, n int) []byte { return b[:min(n, len(b))] }

// damage applies the corruptions to b, a valid file with stories260K's keys
// and tensor names (stories260K itself, or a miniature of it for fuzz
// seeds). The expected errors are those of stories260K.
func damage(t testing.TB, b []byte) []variant {
	l := walk(t, b)
	tokens := l.kv(t, "tokenizer.ggml.tokens")
	scores := l.kv(t, "tokenizer.ggml.scores")
	types := l.kv(t, "tokenizer.ggml.token_type")
	model := l.kv(t, "tokenizer.ggml.model")
	arch := l.kv(t, "general.architecture")
	name := l.kv(t, "general.name")
	ctx := l.kv(t, "llama.context_length")
	blocks := l.kv(t, "llama.block_count") // 17 bytes, as long as "general.alignment"
	emb := l.tensor(t, "token_embd.weight")
	norm := l.tensor(t, "output_norm.weight")
	out := l.tensor(t, "output.weight")
	q := l.tensor(t, "blk.0.attn_q.weight")
	k := l.tensor(t, "blk.0.attn_k.weight")
	last := l.tensors[len(l.tensors)-1]
	dataStart := int(alignUp(uint64(l.headerEnd), DefaultAlignment))
	asAlignment := patch(b, blocks.at+8, "general.alignment")

	return []variant{
		// Header.
		{"empty", nil, []string{"magic truncated"}, 0, true},
		{"cut in magic", b[:2], []string{"magic truncated"}, 0, true},
		{"wrong magic", patch(b, 0, "GGML"), []string{`bad magic "GGML"`}, 0, false},
		{"cut in version", b[:6], []string{"version truncated"}, 4, true},
		{"version 99", put32(b, 4, 99), []string{"unsupported version 99"}, 4, false},
		{"version 1", put32(b, 4, 1), []string{"version 1 is not supported"}, 4, false},
		{"version 0", put32(b, 4, 0), []string{"unsupported version 0"}, 4, false},
		{"big-endian version", put32(b, 4, 3<<24), []string{"big-endian"}, 4, false},
		{"cut in tensor_count", b[:12], []string{"tensor_count truncated"}, 8, true},
		{"cut in kv_count", b[:20], []string{"kv_count truncated"}, 16, true},
		{"cut after the counts", b[:24], []string{"tensor_count 48 is larger than the file could hold"}, 8, false},
		{"tensor_count 2^62", put64(b, 8, huge), []string{"tensor_count 4611686018427387904 is larger than the file could hold"}, 8, false},
		{"kv_count 2^62", put64(b, 16, huge), []string{"kv_count 4611686018427387904 is larger than the file could hold"}, 16, false},
		{"counts together too large", put64(put64(b, 8, uint64(len(b))/64), 16, uint64(len(b))/26),
			[]string{"tensor_count", "and kv_count", "larger than the file could hold"}, 8, false},

		// Metadata.
		{"cut in a key length", b[:name.at+4], []string{"kv 5 key length truncated"}, int64(name.at), true},
		{"cut in a key", b[:name.at+8+3], []string{"kv 5 key length 12 runs past end of file"}, int64(name.at), true},
		{"key length 2^62", put64(b, name.at, huge), []string{"kv 5 key length 4611686018427387904 runs past end of file"}, int64(name.at), true},
		{"cut in a value type", b[:name.typeAt+2], []string{`kv 5 ("general.name") value type truncated`}, int64(name.typeAt), true},
		{"unknown value type", put32(b, model.typeAt, 13), []string{`kv 3 ("tokenizer.ggml.model") has unknown value type 13`}, int64(model.typeAt), false},
		{"cut in a string value", b[:arch.valAt+8+2], []string{`kv 4 ("general.architecture") value length 5 runs past end of file`}, int64(arch.valAt), true},
		{"string length 2^62", put64(b, arch.valAt, huge), []string{`kv 4 ("general.architecture") value length 4611686018427387904 runs past end of file`}, int64(arch.valAt), true},
		{"cut in a uint32 value", b[:ctx.valAt+2], []string{`kv 11 ("llama.context_length") value (uint32) truncated`}, int64(ctx.valAt), true},
		// (Cuts early in the file fail the header's count check instead,
		// which TestEveryTruncation covers; these cuts leave room for it.)
		{"cut in an array header", b[:types.valAt+2], []string{`kv 2 ("tokenizer.ggml.token_type") value array element type truncated`}, int64(types.valAt), true},
		{"cut in an array count", b[:types.valAt+4+3], []string{`kv 2 ("tokenizer.ggml.token_type") value array count truncated`}, int64(types.valAt + 4), true},
		{"cut in an array of strings", cut(b, tokens.valAt+12+5000), []string{`kv 0 ("tokenizer.ggml.tokens") value[375] length truncated (needs 8 bytes, the file is 5069)`}, 5064, true},
		{"cut in an array of float32", b[:scores.valAt+12+100], []string{`kv 1 ("tokenizer.ggml.scores") value: 512 float32 elements (2048 bytes) run past end of file`}, int64(scores.valAt + 12), true},
		{"array count 2^62", put64(b, tokens.valAt+4, huge), []string{`kv 0 ("tokenizer.ggml.tokens") value array count 4611686018427387904 is larger than the file could hold`}, int64(tokens.valAt + 4), false},
		{"float32 array count 2^62", put64(b, scores.valAt+4, huge), []string{"array count 4611686018427387904 is larger than the file could hold"}, int64(scores.valAt + 4), false},
		{"string in an array 2^62 long", put64(b, tokens.valAt+12, huge), []string{`kv 0 ("tokenizer.ggml.tokens") value[0] length 4611686018427387904 runs past end of file`}, int64(tokens.valAt + 12), true},
		{"unknown array element type", put32(b, tokens.valAt, 99), []string{"unknown array element type 99"}, int64(tokens.valAt), false},
		{"duplicate key", patch(b, arch.at+8, "tokenizer.ggml.model"), []string{`duplicate key "tokenizer.ggml.model" (kv 3 and kv 4)`}, int64(arch.at), false},
		{"alignment 3", put32(asAlignment, blocks.valAt, 3), []string{"general.alignment 3 is not a nonzero power of two"}, int64(blocks.valAt), false},
		{"alignment 0", put32(asAlignment, blocks.valAt, 0), []string{"general.alignment 0 is not a nonzero power of two"}, int64(blocks.valAt), false},
		{"alignment of type int32", put32(asAlignment, blocks.typeAt, uint32(TypeInt32)), []string{"general.alignment has type int32, want uint32"}, int64(blocks.valAt), false},
		{"alignment 2^31 pushes the data past EOF", put32(asAlignment, blocks.valAt, 1<<31), []string{"misaligned"}, -1, false},

		// Tensor infos.
		{"cut in a tensor name", b[:q.at+8+4], []string{"tensor 3 name length 19 runs past end of file"}, int64(q.at), true},
		{"cut in n_dims", b[:q.ndAt+1], []string{`tensor 3 ("blk.0.attn_q.weight") n_dims truncated`}, int64(q.ndAt), true},
		{"cut in the dims", b[:q.dimsAt+12], []string{`tensor 3 ("blk.0.attn_q.weight") dim 1 truncated`}, int64(q.dimsAt + 8), true},
		{"cut in a tensor type", b[:q.typeAt+1], []string{`tensor 3 ("blk.0.attn_q.weight") type truncated`}, int64(q.typeAt), true},
		{"cut in a tensor offset", b[:last.offAt+3], []string{"tensor 47", "offset truncated"}, int64(last.offAt), true},
		{"n_dims 9", put32(b, emb.ndAt, 9), []string{`tensor 0 ("token_embd.weight") n_dims 9 is out of range (1..4)`}, int64(emb.ndAt), false},
		{"n_dims 0", put32(b, emb.ndAt, 0), []string{"n_dims 0 is out of range"}, int64(emb.ndAt), false},
		{"dim of 0", put64(b, emb.dimsAt+8, 0), []string{`tensor 0 ("token_embd.weight") dim 1 is 0`}, int64(emb.dimsAt + 8), false},
		{"dims whose product overflows", put64(put64(b, emb.dimsAt, 1<<40), emb.dimsAt+8, 1<<40), []string{"dim 1 = 1099511627776: element count overflows int64"}, int64(emb.dimsAt + 8), false},
		{"dim above int64", put64(b, emb.dimsAt, 1<<63), []string{"dim 0 = 9223372036854775808: element count overflows"}, int64(emb.dimsAt), false},
		{"size that overflows", put64(put64(b, emb.dimsAt, 1<<31), emb.dimsAt+8, 1<<31), []string{"size overflows"}, int64(emb.typeAt), false},
		{"row size that overflows", put64(put64(b, emb.dimsAt, 1<<62), emb.dimsAt+8, 1), []string{"row size", "overflow"}, int64(emb.typeAt), false},
		{"unknown dtype 200", put32(b, emb.typeAt, 200), []string{`tensor 0 ("token_embd.weight") has unknown ggml type 200`}, int64(emb.typeAt), false},
		{"removed dtype 4", put32(b, norm.typeAt, 4), []string{"tensor 1", "unknown ggml type 4"}, int64(norm.typeAt), false},
		{"row not a whole block", put32(b, emb.typeAt, 12), []string{"row length 64 is not a multiple of the q4_k block size 256"}, int64(emb.typeAt), false},
		{"duplicate tensor name", patch(b, k.at+8, "blk.0.attn_q.weight"), []string{`duplicate tensor name "blk.0.attn_q.weight" (tensor 3 and tensor 4)`}, int64(k.at), false},
		{"misaligned tensor offset", put64(b, norm.offAt, 131072+4), []string{`tensor 1 ("output_norm.weight") offset 131076 is not a multiple of the alignment 32 (misaligned data)`}, int64(norm.offAt), false},

		// Padding and data.
		{"cut in the padding", b[:l.headerEnd+5], []string{"padding to alignment 32 truncated", "data section would start at byte 14176"}, int64(l.headerEnd), true},
		{"cut at the data section", b[:dataStart], []string{`tensor 0 ("token_embd.weight") offset 0 + size 131072 runs past end of file`}, int64(emb.offAt), true},
		{"cut in the data", b[:max(0, len(b)-100)], []string{`tensor 47 ("blk.4.ffn_norm.weight") offset 1170944 + size 256 runs past end of file (1185276 bytes`}, int64(last.offAt), true},
		{"tensor offset past EOF", put64(b, emb.offAt, 1<<40), []string{"offset 1099511627776 + size 131072 runs past end of file"}, int64(emb.offAt), true},
		{"tensor offset near 2^64", put64(b, out.offAt, ^uint64(31)), []string{"offset 18446744073709551584 + size 131072 runs past end of file"}, int64(out.offAt), true},
		{"overlapping tensors", put64(b, out.offAt, 131072), []string{`tensor 2 ("output.weight") data [131072, 262144) overlaps tensor 1 ("output_norm.weight") data [131072, 131328)`}, int64(out.offAt), false},
	}
}

// handmadeVariants are damages the real files cannot express by patching.
func handmadeVariants(t testing.TB) []variant {
	le := binary.LittleEndian
	header := func(tensors, kvs uint64) []byte {
		b := []byte("GGUF")
		b = le.AppendUint32(b, 3)
		b = le.AppendUint64(b, tensors)
		return le.AppendUint64(b, kvs)
	}
	key := func(b []byte, k string, typ ValueType) []byte {
		b = le.AppendUint64(b, uint64(len(k)))
		b = append(b, k...)
		return le.AppendUint32(b, uint32(typ))
	}
	// Arrays nested 17 deep (one more than allowed), padded so that counts
	// stay plausible.
	deep := key(header(0, 1), "deep", TypeArray)
	for range maxNesting {
		deep = le.AppendUint32(deep, uint32(TypeArray))
		deep = le.AppendUint64(deep, 1)
	}
	deep = le.AppendUint32(deep, uint32(TypeUint8))
	deep = le.AppendUint64(deep, 0)
	deep = append(deep, make([]byte, 64)...)

	ok := key(header(0, 1), "deep", TypeArray)
	for range maxNesting - 1 {
		ok = le.AppendUint32(ok, uint32(TypeArray))
		ok = le.AppendUint64(ok, 1)
	}
	ok = le.AppendUint32(ok, uint32(TypeUint8))
	ok = le.AppendUint64(ok, 0)
	_, err := Parse(ok)
	require.NoError(t, err, "16 levels of nesting are allowed")

	// 65537 empty arrays inside one array: one over the cap.
	many := key(header(0, 1), "many", TypeArray)
	many = le.AppendUint32(many, uint32(TypeArray))
	many = le.AppendUint64(many, maxNestedArrays+1)
	for range maxNestedArrays + 1 {
		many = le.AppendUint32(many, uint32(TypeUint8))
		many = le.AppendUint64(many, 0)
	}

	boolean := append(key(header(0, 1), "b", TypeBool), 2)
	boolArray := key(header(0, 1), "b", TypeArray)
	boolArray = le.AppendUint32(boolArray, uint32(TypeBool))
	boolArray = le.AppendUint64(boolArray, 3)
	boolArray = append(boolArray, 1, 0, 7)
	dupAlign := key(header(0, 2), "general.alignment", TypeUint32)
	dupAlign = le.AppendUint32(dupAlign, 64)
	dupAlign = key(dupAlign, "general.alignment", TypeUint32)
	dupAlign = le.AppendUint32(dupAlign, 64)
	hugeName := key(header(0, 1), strings.Repeat("x", 1000), TypeUint8)[:300]

	return []variant{
		{"arrays nested 17 deep", deep, []string{`kv 0 ("deep") value[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: arrays nested deeper than 16`}, -1, false},
		{"too many nested arrays", many, []string{`kv 0 ("many") value[65536]: more than 65536 nested arrays in the file`}, int64(len(many) - 12), false},
		{"bool 2", boolean, []string{`kv 0 ("b") value: bool byte 2 is neither 0 nor 1`}, int64(len(boolean) - 1), false},
		{"bool array with a 7", boolArray, []string{`kv 0 ("b") value[2]: bool byte 7 is neither 0 nor 1`}, int64(len(boolArray) - 1), false},
		{"duplicate general.alignment", dupAlign, []string{`duplicate key "general.alignment"`}, -1, false},
		{"cut in a 1000-byte key", hugeName, []string{"kv 0 key length 1000 runs past end of file"}, 24, true},
	}
}

func TestCorruptFiles(t *testing.T) {
	variants := append(storiesVariants(t), handmadeVariants(t)...)
	require.GreaterOrEqual(t, len(variants), 20)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f, err := Parse(v.data)
			require.Nil(t, f)
			require.Error(t, err)
			msg := err.Error()
			require.True(t, strings.HasPrefix(msg, "gguf: "), msg)
			require.NotContains(t, msg, "\n")
			require.Less(t, len(msg), 400, "error lines stay short")
			for _, want := range v.want {
				require.Contains(t, msg, want)
			}
			var e *Error
			require.True(t, errors.As(err, &e))
			require.Contains(t, msg, " at byte "+itoa(int(e.Offset)))
			if v.at >= 0 {
				require.Equal(t, v.at, e.Offset, msg)
			}
			require.Equal(t, v.eof, errors.Is(err, io.ErrUnexpectedEOF), "truncation: %s", msg)
		})
	}
}

// TestEveryTruncation cuts stories260K's header at every byte (and the data
// at a few places): each cut must fail cleanly, as a truncation or as counts
// the shortened file cannot hold.
func TestEveryTruncation(t *testing.T) {
	b := readShared(t, stories)
	l := walk(t, b)
	cuts := []int{}
	for n := 0; n <= l.headerEnd+40; n++ {
		cuts = append(cuts, n)
	}
	cuts = append(cuts, len(b)/2, len(b)-1)
	for _, n := range cuts {
		_, err := Parse(b[:n])
		require.Error(t, err, "cut at %d", n)
		msg := err.Error()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			require.Contains(t, msg, "larger than the file could hold", "cut at %d", n)
		}
	}
	_, err := Parse(b)
	require.NoError(t, err)
}
