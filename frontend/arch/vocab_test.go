package arch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/synth"
)

// TestLoadVocab: the tokenizer keys of vocab-only files (no tensors) and of
// a model, special ids, defaults for add_bos, and ids outside the
// vocabulary (stories260K's padding id 0xFFFFFFFF) mapped to -1.
func TestLoadVocab(t *testing.T) {
	cases := []struct {
		file           string
		model, pre     string
		n, merges      int
		bos, eos       int32
		unk, pad       int32
		addBOS, addEOS bool
		scores         bool
		tokens         map[int]string
	}{
		{"models/gguf/vocab/ggml-vocab-llama-spm.gguf", "llama", "default", 32000, 0, 1, 2, 0, -1, true, false, true,
			map[int]string{0: "<unk>", 1: "<s>", 2: "</s>", 3: "<0x00>", 13: "<0x0A>", 29871: "▁", 450: "▁The"}},
		{"models/gguf/vocab/ggml-vocab-gpt-2.gguf", "gpt2", "gpt-2", 50257, 50000, 50256, 50256, -1, -1, false, false, false,
			map[int]string{0: "!", 50256: "<|endoftext|>"}},
		{"models/gguf/stories260K.gguf", "llama", "", 512, 0, 1, 2, 0, -1, true, false, true,
			map[int]string{1: "<s>", 2: "</s>"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			v, err := arch.LoadVocab(openShared(t, c.file))
			require.NoError(t, err)
			require.Equal(t, c.model, v.Model)
			require.Equal(t, c.pre, v.Pre)
			require.Len(t, v.Tokens, c.n)
			require.Len(t, v.Merges, c.merges)
			require.Len(t, v.Types, c.n)
			if c.scores {
				require.Len(t, v.Scores, c.n)
			} else {
				require.Empty(t, v.Scores)
			}
			require.Equal(t, [4]int32{c.bos, c.eos, c.unk, c.pad}, [4]int32{v.BOS, v.EOS, v.UNK, v.PAD}, "bos, eos, unk, pad")
			require.Equal(t, c.addBOS, v.AddBOS, "add_bos")
			require.Equal(t, c.addEOS, v.AddEOS, "add_eos")
			for id, s := range c.tokens {
				require.Equal(t, s, v.Tokens[id], "token %d", id)
			}
			if c.merges > 0 {
				require.Equal(t, "Ġ t", v.Merges[0])
			}
		})
	}
}

// TestLoadVocabDefaults: without tokenizer.ggml.add_bos_token, SentencePiece
// vocabularies add BOS and byte-level BPE ones do not; the key overrides
// either default; a special id key outside the vocabulary keeps llama.cpp's
// per-model default (SentencePiece: BOS 1, EOS 2; byte-level BPE: 11).
func TestLoadVocabDefaults(t *testing.T) {
	base := synthFile(t, synth.Default())
	n := uint32(len(synth.Default().Tokens))
	cases := []struct {
		name   string
		e      edit
		addBOS bool
		bos    int32
	}{
		{"spm with key true", edit{}, true, 1},
		{"spm default", edit{dropKV: []string{"tokenizer.ggml.add_bos_token"}}, true, 1},
		{"spm key false", edit{setKV: map[string]gguf.Value{"tokenizer.ggml.add_bos_token": gguf.Bool(false)}}, false, 1},
		{"bpe default", edit{dropKV: []string{"tokenizer.ggml.add_bos_token"}, setKV: map[string]gguf.Value{"tokenizer.ggml.model": gguf.String("gpt2")}}, false, 1},
		{"bpe key true", edit{setKV: map[string]gguf.Value{"tokenizer.ggml.model": gguf.String("gpt2")}}, true, 1},
		{"bos out of range keeps the spm default", edit{setKV: map[string]gguf.Value{"tokenizer.ggml.bos_token_id": gguf.Uint32(n)}}, true, 1},
		// llama.cpp sets add_bos for the Llama-3 pre-tokenizers before it
		// reads the key; other byte-level BPE vocabularies keep false.
		{"llama-bpe default", bpePre("llama-bpe", true), true, 1},
		{"llama3 default", bpePre("llama3", true), true, 1},
		{"llama-v3 default", bpePre("llama-v3", true), true, 1},
		{"llama-bpe key false", bpePre("llama-bpe", false), false, 1},
		{"qwen2 default", bpePre("qwen2", true), false, 1},
		{"gpt-4o default", bpePre("gpt-4o", true), false, 1},
		{"bpe without ids takes 11", edit{dropKV: []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token"}, setKV: map[string]gguf.Value{"tokenizer.ggml.model": gguf.String("gpt2")}}, false, 11},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := arch.LoadVocab(rewrite(t, base, c.e))
			require.NoError(t, err)
			require.Equal(t, c.addBOS, v.AddBOS)
			require.Equal(t, c.bos, v.BOS)
			if c.bos == 11 {
				require.Equal(t, int32(11), v.EOS)
			} else {
				require.Equal(t, int32(2), v.EOS)
			}
		})
	}
}

// bpePre is the edit that makes the synthetic vocabulary a byte-level BPE
// one with pre-tokenizer pre, with tokenizer.ggml.add_bos_token dropped
// (drop) or false.
func bpePre(pre string, drop bool) edit {
	e := edit{setKV: map[string]gguf.Value{"tokenizer.ggml.model": gguf.String("gpt2"), "tokenizer.ggml.pre": gguf.String(pre)}}
	if drop {
		e.dropKV = []string{"tokenizer.ggml.add_bos_token"}
	} else {
		e.setKV["tokenizer.ggml.add_bos_token"] = gguf.Bool(false)
	}
	return e
}
