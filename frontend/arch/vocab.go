package arch

import (
	"fmt"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/tokenizer"
)

// LoadVocab reads the tokenizer.ggml.* keys of a GGUF file. It works on
// vocab-only files too (no tensors needed).
func LoadVocab(f *gguf.File) (tokenizer.Vocab, error) {
	v := tokenizer.Vocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	var ok bool
	if v.Model, ok = f.String("tokenizer.ggml.model"); !ok {
		return v, fmt.Errorf("model file has no tokenizer (tokenizer.ggml.model is missing)")
	}
	v.Pre, _ = f.String("tokenizer.ggml.pre")
	tv, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return v, fmt.Errorf("model file has no tokenizer.ggml.tokens")
	}
	if v.Tokens, ok = tv.Strings(); !ok {
		return v, fmt.Errorf("tokenizer.ggml.tokens is not an array of strings")
	}
	if sv, found := f.Get("tokenizer.ggml.scores"); found {
		if v.Scores, ok = sv.Float32s(); !ok {
			return v, fmt.Errorf("tokenizer.ggml.scores is not an array of float32")
		}
	}
	if ty, found := f.Get("tokenizer.ggml.token_type"); found {
		if v.Types, ok = ty.Int32s(); !ok {
			return v, fmt.Errorf("tokenizer.ggml.token_type is not an array of integers")
		}
	}
	if mv, found := f.Get("tokenizer.ggml.merges"); found {
		if v.Merges, ok = mv.Strings(); !ok {
			return v, fmt.Errorf("tokenizer.ggml.merges is not an array of strings")
		}
	}
	// llama.cpp's per-model defaults for the special ids. A default outside
	// the vocabulary is dropped; a key outside it (0xFFFFFFFF means "none")
	// keeps the default.
	switch v.Model {
	case "llama":
		v.BOS, v.EOS, v.UNK = 1, 2, 0
	case "gpt2":
		v.BOS, v.EOS = 11, 11
	}
	n := uint64(len(v.Tokens))
	for _, id := range []struct {
		key string
		dst *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
	} {
		if *id.dst >= 0 && uint64(*id.dst) >= n {
			*id.dst = -1
		}
		if x, found := f.Uint(id.key); found && x < n {
			*id.dst = int32(x)
		}
	}
	// SentencePiece vocabs add BOS unless the file says otherwise; byte-level
	// BPE vocabs do not, except Llama-3's: llama.cpp sets add_bos for the
	// llama3 pre-tokenizer (llama-bpe, llama3, llama-v3) before reading the
	// key, so a Llama-3 GGUF without tokenizer.ggml.add_bos_token still
	// starts its prompts with <|begin_of_text|>, as the model was trained.
	v.AddBOS = v.Model == "llama"
	switch v.Pre {
	case "llama-bpe", "llama3", "llama-v3":
		v.AddBOS = v.Model == "gpt2"
	}
	if b, found := f.Bool("tokenizer.ggml.add_bos_token"); found {
		v.AddBOS = b
	}
	if b, found := f.Bool("tokenizer.ggml.add_eos_token"); found {
		v.AddEOS = b
	}
	if b, found := f.Bool("tokenizer.ggml.add_space_prefix"); found {
		v.NoSpacePrefix = !b
	}
	return v, nil
}
