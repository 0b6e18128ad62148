package arch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/synth"
)

// TestBadModels: copies of a valid synthetic model (2 layers, 64 embd, 4
// heads, 2 kv heads, head dim 16, F32) with one key or tensor dropped or
// altered. Each must fail to load with an error naming the key or tensor at
// fault, and none may panic.
func TestBadModels(t *testing.T) {
	base := synthFile(t, synth.Default())
	nv := uint64(len(synth.Default().Tokens))
	cases := []struct {
		name string
		edit edit
		want []string // substrings the error must contain
	}{
		{"missing block_count", edit{dropKV: []string{"llama.block_count"}}, []string{"llama.block_count", "missing"}},
		{"block_count zero", edit{setKV: map[string]gguf.Value{"llama.block_count": gguf.Uint32(0)}}, []string{"llama.block_count"}},
		{"block_count a string", edit{setKV: map[string]gguf.Value{"llama.block_count": gguf.String("2")}}, []string{"llama.block_count"}},
		{"missing embedding_length", edit{dropKV: []string{"llama.embedding_length"}}, []string{"llama.embedding_length"}},
		{"missing feed_forward_length", edit{dropKV: []string{"llama.feed_forward_length"}}, []string{"llama.feed_forward_length"}},
		{"missing head_count", edit{dropKV: []string{"llama.attention.head_count"}}, []string{"llama.attention.head_count"}},
		{"head_count does not divide embedding_length", edit{setKV: map[string]gguf.Value{
			"llama.attention.head_count": gguf.Uint32(5), "llama.attention.head_count_kv": gguf.Uint32(5),
		}}, []string{"llama.embedding_length", "llama.attention.head_count"}},
		{"head_count_kv does not divide head_count", edit{setKV: map[string]gguf.Value{"llama.attention.head_count_kv": gguf.Uint32(3)}},
			[]string{"head_count_kv"}},
		{"rms epsilon a string", edit{setKV: map[string]gguf.Value{"llama.attention.layer_norm_rms_epsilon": gguf.String("1e-5")}},
			[]string{"llama.attention.layer_norm_rms_epsilon"}},
		{"rope.dimension_count odd", edit{setKV: map[string]gguf.Value{"llama.rope.dimension_count": gguf.Uint32(15)}},
			[]string{"llama.rope.dimension_count", "15"}},
		{"rope.dimension_count > head dim", edit{setKV: map[string]gguf.Value{"llama.rope.dimension_count": gguf.Uint32(32)}},
			[]string{"llama.rope.dimension_count", "32"}},
		{"missing tensor", edit{dropTensor: []string{"blk.1.ffn_up.weight"}}, []string{`"blk.1.ffn_up.weight"`}},
		{"missing norm", edit{dropTensor: []string{"output_norm.weight"}}, []string{`"output_norm.weight"`}},
		{"missing token_embd", edit{dropTensor: []string{"token_embd.weight"}}, []string{"token_embd.weight"}},
		{"attn_k wrong shape", edit{setTensor: map[string]tensorEdit{"blk.0.attn_k.weight": {typ: ir.F32, dims: []uint64{64, 48}}}},
			[]string{`"blk.0.attn_k.weight"`, "[64 48]", "[64 32]"}},
		{"ffn_down transposed", edit{setTensor: map[string]tensorEdit{"blk.1.ffn_down.weight": {typ: ir.F32, dims: []uint64{64, 192}}}},
			[]string{`"blk.1.ffn_down.weight"`}},
		{"norm with two dims", edit{setTensor: map[string]tensorEdit{"blk.0.attn_norm.weight": {typ: ir.F32, dims: []uint64{64, 1}}}},
			[]string{`"blk.0.attn_norm.weight"`}},
		{"output wrong vocab", edit{setTensor: map[string]tensorEdit{"output.weight": {typ: ir.F32, dims: []uint64{64, nv - 1}}}},
			[]string{`"output.weight"`}},
		{"bias of the wrong size", edit{setTensor: map[string]tensorEdit{"blk.0.attn_q.bias": {typ: ir.F32, dims: []uint64{63}}}},
			[]string{`"blk.0.attn_q.bias"`}},
		{"token_embd 1-D", edit{setTensor: map[string]tensorEdit{"token_embd.weight": {typ: ir.F32, dims: []uint64{64 * nv}}}},
			[]string{"token_embd.weight"}},
		{"vocab size ≠ token_embd rows", edit{setTensor: map[string]tensorEdit{"token_embd.weight": {typ: ir.F32, dims: []uint64{64, nv + 3}}}},
			[]string{"token_embd.weight", "tokens"}},
		{"llama.vocab_size ≠ token_embd rows", edit{setKV: map[string]gguf.Value{"llama.vocab_size": gguf.Uint32(uint32(nv) + 1)}},
			[]string{"llama.vocab_size", "token_embd.weight"}},
		{"unsupported architecture", edit{setKV: map[string]gguf.Value{"general.architecture": gguf.String("gpt2")}},
			[]string{`"gpt2"`, "supported: gpt-oss, llama"}},
		{"no architecture", edit{dropKV: []string{"general.architecture"}}, []string{"general.architecture"}},
		{"no tokenizer", edit{dropKV: []string{"tokenizer.ggml.model"}}, []string{"tokenizer"}},
		{"no tokens", edit{dropKV: []string{"tokenizer.ggml.tokens"}}, []string{"tokenizer.ggml.tokens"}},
		{"tokens not strings", edit{setKV: map[string]gguf.Value{"tokenizer.ggml.tokens": gguf.Int32Array(make([]int32, nv))}},
			[]string{"tokenizer.ggml.tokens"}},
		{"scores not floats", edit{setKV: map[string]gguf.Value{"tokenizer.ggml.scores": gguf.StringArray(make([]string, nv))}},
			[]string{"tokenizer.ggml.scores"}},
	}
	// The unedited copy loads: every failure below is the edit's doing.
	_, err := arch.Load(rewrite(t, base, edit{}), arch.Options{})
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := rewrite(t, base, c.edit)
			var m *arch.Model
			var err error
			require.NotPanics(t, func() { m, err = arch.Load(f, arch.Options{}) })
			require.Error(t, err)
			require.Nil(t, m)
			t.Log(err)
			for _, s := range c.want {
				require.ErrorContains(t, err, s)
			}
		})
	}
}

// TestUnsupportedArchitectureRealFile: a real gpt2 file is refused with the
// list of supported architectures.
func TestUnsupportedArchitectureRealFile(t *testing.T) {
	_, err := arch.Load(openShared(t, "models/gguf/vocab/ggml-vocab-gpt-2.gguf"), arch.Options{})
	require.ErrorContains(t, err, `unsupported architecture "gpt2"`)
	for _, a := range arch.Supported() {
		require.ErrorContains(t, err, a)
	}
	require.Equal(t, []string{"gpt-oss", "llama", "phi3", "qwen2", "qwen3"}, arch.Supported())
}
