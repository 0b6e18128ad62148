package synth

import (
	"sort"
	"strings"
)

// The tokenizer files of a model directory: tokenizer.json as the
// tokenizers library saves it, tokenizer_config.json as transformers does,
// holding the same vocabulary as the GGUF file of the same spec, so that
// both encode text to the same ids.

// zephyrTemplate is TinyLlama-1.1B-Chat-v1.0's chat template, verbatim.
const zephyrTemplate = "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"

// Token types, as in GGUF.
const (
	typeNormal  = 1
	typeUnknown = 2
	typeControl = 3
)

// addedTokens lists the unknown and control tokens as tokenizer.json's
// added_tokens, all special.
func addedTokens(tokens []string, types []int32) []map[string]any {
	var out []map[string]any
	for id, t := range tokens {
		if types[id] == typeControl || types[id] == typeUnknown {
			out = append(out, map[string]any{"id": id, "content": t, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": true})
		}
	}
	return out
}

func vocabMap(tokens []string) map[string]int {
	v := make(map[string]int, len(tokens))
	for id, t := range tokens {
		if _, dup := v[t]; !dup {
			v[t] = id
		}
	}
	return v
}

// spmTokenizer writes a SentencePiece vocabulary (<unk> 0, <s> 1, </s> 2,
// byte fallback) in the legacy layout LlamaTokenizerFast saves for
// Llama-2 and TinyLlama: BPE with merges derived from the scores as
// transformers derives them (generate_merges: every split of a piece into
// two pieces, ordered by the piece's score, then the lengths of the left
// and right parts, all descending).
func spmTokenizer(tokens []string, scores []float32, types []int32, ctx int) *tokenizerFiles {
	vocab := vocabMap(tokens)
	type merge struct {
		l, r  string
		score float32
	}
	var merges []merge
	for id, p := range tokens {
		if types[id] != typeNormal {
			continue
		}
		runes := []rune(p)
		for i := 1; i < len(runes); i++ {
			l, r := string(runes[:i]), string(runes[i:])
			if _, ok := vocab[l]; !ok {
				continue
			}
			if _, ok := vocab[r]; ok {
				merges = append(merges, merge{l, r, scores[id]})
			}
		}
	}
	sort.SliceStable(merges, func(i, j int) bool {
		a, b := merges[i], merges[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if la, lb := len([]rune(a.l)), len([]rune(b.l)); la != lb {
			return la > lb
		}
		return len([]rune(a.r)) > len([]rune(b.r))
	})
	pairs := make([][2]string, len(merges))
	for i, m := range merges {
		pairs[i] = [2]string{m.l, m.r}
	}
	str := func(s string) map[string]any { return map[string]any{"String": s} }
	special := func(id string, typ int) map[string]any {
		return map[string]any{"SpecialToken": map[string]any{"id": id, "type_id": typ}}
	}
	seq := func(id string, typ int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typ}}
	}
	tj := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": addedTokens(tokens, types),
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": str(" "), "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{special("<s>", 0), seq("A", 0)},
			"pair":           []any{special("<s>", 0), seq("A", 0), special("<s>", 1), seq("B", 1)},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{1}, "tokens": []string{"<s>"}}},
		},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": str("▁"), "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": tokens[0], "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
			"vocab": vocab, "merges": pairs},
	}
	cfg := map[string]any{
		"add_bos_token": true, "add_eos_token": false, "legacy": true,
		"bos_token": tokens[1], "eos_token": tokens[2], "unk_token": tokens[0], "pad_token": tokens[2],
		"model_max_length": ctx, "tokenizer_class": "LlamaTokenizer", "clean_up_tokenization_spaces": false,
		"chat_template": zephyrTemplate,
	}
	return &tokenizerFiles{json: tj, config: cfg}
}

// byteLevelTokenizer writes a byte-level BPE vocabulary (GPT-2's
// pre-tokenizer, as the GGUF files synth writes say) whose end-of-text
// token eot begins and ends text.
func byteLevelTokenizer(tokens []string, types []int32, merges []string, eot, ctx int) *tokenizerFiles {
	byteLevel := func() map[string]any {
		return map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	}
	pairs := make([][2]string, 0, len(merges))
	for _, m := range merges {
		l, r, _ := strings.Cut(m, " ")
		pairs = append(pairs, [2]string{l, r})
	}
	tj := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   addedTokens(tokens, types),
		"normalizer":     nil,
		"pre_tokenizer":  byteLevel(),
		"post_processor": byteLevel(),
		"decoder":        byteLevel(),
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocabMap(tokens), "merges": pairs},
	}
	cfg := map[string]any{
		"add_bos_token": false, "add_eos_token": false,
		"bos_token": tokens[eot], "eos_token": tokens[eot], "pad_token": tokens[eot],
		"model_max_length": ctx, "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": false,
	}
	return &tokenizerFiles{json: tj, config: cfg}
}
