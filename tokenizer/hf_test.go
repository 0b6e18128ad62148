package tokenizer_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

func loadHF(t testing.TB, rel string) (*tokenizer.Tokenizer, tokenizer.HFConfig) {
	t.Helper()
	v, cfg, err := tokenizer.LoadHF(shared.Path(t, rel))
	require.NoError(t, err)
	tk, err := tokenizer.New(v)
	require.NoError(t, err)
	return tk, cfg
}

// TestHFSentencePieceMatchesGGUF: the Llama-2 and stories260K tokenizer.json
// files (SentencePiece-style BPE) encode like the GGUF vocabularies they were
// made from: llama.cpp's 46 vectors, the stories golden, and 20,000 generated
// strings, with and without BOS and special-token parsing.
func TestHFSentencePieceMatchesGGUF(t *testing.T) {
	for _, tc := range []struct {
		hf, gguf string
		golden   func(t *testing.T, tk *tokenizer.Tokenizer)
	}{
		{"models/hf/llama-2-tiny-random", spmVocabPath, func(t *testing.T, tk *tokenizer.Tokenizer) {
			for i, c := range readVocabTests(t, spmVocabPath) {
				require.Equal(t, c.ids, tk.Encode(c.text, false), "vector %d %q", i, c.text)
			}
		}},
		{"models/hf/stories260K", storiesPath, func(t *testing.T, tk *tokenizer.Tokenizer) {
			for i, c := range readGolden(t, storiesGolden) {
				require.Equal(t, c.IDs, tk.Encode(c.Text, c.AddBOS), "line %d %q", i, c.Text)
			}
		}},
	} {
		t.Run(filepath.Base(tc.hf), func(t *testing.T) {
			hf, cfg := loadHF(t, tc.hf)
			gg := loadTokenizer(t, tc.gguf)
			require.Equal(t, tokenizer.KindSPM, hf.Kind())
			require.Equal(t, gg.VocabSize(), hf.VocabSize())
			require.Equal(t, gg.BOS(), hf.BOS())
			require.Equal(t, gg.EOS(), hf.EOS())
			require.Equal(t, gg.UNK(), hf.UNK())
			require.True(t, hf.AddBOS())
			require.False(t, hf.AddEOS())
			require.Equal(t, "<s>", cfg.BOSToken)
			require.Equal(t, "</s>", cfg.EOSToken)
			require.Contains(t, cfg.ChatTemplate, "<|assistant|>")
			for id := int32(0); id < int32(gg.VocabSize()); id++ {
				require.Equal(t, gg.Type(id), hf.Type(id), "type of token %d %q", id, gg.Piece(id))
			}
			tc.golden(t, hf)

			generated := 20000
			if testing.Short() {
				generated = 1000
			}
			n := 0
			for _, s := range append(oracleStrings(t, generated), "a<s>b</s><unk>c", "<s>", " </s> ") {
				for _, o := range []tokenizer.EncodeOptions{{}, {AddBOS: true, ParseSpecial: true}} {
					require.Equal(t, gg.EncodeWith(s, o), hf.EncodeWith(s, o), "text %q %+v", s, o)
					n++
				}
			}
			t.Logf("%d encodings equal", n)
		})
	}
}

// hfFromGGUF writes the tokenizer.json a Hugging Face byte-level BPE with the
// given Split regex would have for a GGUF vocabulary: its normal tokens in
// model.vocab, control and user-defined ones in added_tokens, its merges.
// The real Llama-3 and Qwen3 vocabularies are the files those models ship
// (tools/fixtures/tok/make_hf_vocab_gguf.py made the GGUFs from them), so
// this gives back what matters of the originals.
func hfFromGGUF(t *testing.T, rel, regex, normalizer string, ignoreMerges bool) *tokenizer.Tokenizer {
	t.Helper()
	v := vocabFromGGUF(t, shared.Path(t, rel))
	vocab := map[string]int{}
	var added []map[string]any
	for id, text := range v.Tokens {
		switch tokenizer.TokenType(v.Types[id]) {
		case tokenizer.TypeControl, tokenizer.TypeUserDefined:
			added = append(added, map[string]any{
				"id": id, "content": text, "special": v.Types[id] == int32(tokenizer.TypeControl),
				"normalized": false, "lstrip": false, "rstrip": false, "single_word": false,
			})
		default:
			vocab[text] = id
		}
	}
	pre := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	if regex != "" {
		pre = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}}
	}
	var norm any
	if normalizer != "" {
		norm = map[string]any{"type": normalizer}
	}
	tj, err := json.Marshal(map[string]any{
		"version": "1.0", "added_tokens": added, "normalizer": norm, "pre_tokenizer": pre,
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": ignoreMerges, "vocab": vocab, "merges": v.Merges,
		},
	})
	require.NoError(t, err)
	cfg := map[string]any{"add_bos_token": false, "bos_token": nil, "eos_token": nil}
	if v.BOS >= 0 {
		cfg["bos_token"] = v.Tokens[v.BOS]
	}
	if v.EOS >= 0 {
		cfg["eos_token"] = v.Tokens[v.EOS]
	}
	cj, err := json.Marshal(cfg)
	require.NoError(t, err)

	hv, _, err := tokenizer.ParseHF(tj, cj)
	require.NoError(t, err)
	tk, err := tokenizer.New(hv)
	require.NoError(t, err)
	require.Equal(t, v.BOS, tk.BOS())
	require.Equal(t, v.EOS, tk.EOS())
	return tk
}

// The Split regexes of the models' own tokenizer.json files.
const (
	llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Regex  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	o200kRegex  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// TestHFByteLevelGoldens runs the golden files through tokenizer.json
// versions of their vocabularies: the ids of the model's own tokenizer, which
// are the engine's except where Hugging Face differs from llama.cpp (Qwen's
// NFC normalizer: hf_ids; o200k's real regex: tiktoken_ids).
func TestHFByteLevelGoldens(t *testing.T) {
	built := map[string]*tokenizer.Tokenizer{}
	for _, tc := range []struct {
		golden, vocab, regex, normalizer string
		ignoreMerges                     bool
		want                             func(tokGoldenLine) []int32
	}{
		{"gpt2-pre-gpt-2.jsonl", "models/gguf/vocab/ggml-vocab-gpt-2.gguf", "", "", false, nil},
		{"gpt2-pre-llama-bpe.jsonl", "models/gguf/vocab/ggml-vocab-gpt-2-pre-llama-bpe.gguf", llama3Regex, "", true, nil},
		{"gpt2-pre-qwen2.jsonl", "models/gguf/vocab/ggml-vocab-gpt-2-pre-qwen2.gguf", qwen2Regex, "", false, nil},
		{"real-llama3.jsonl", "models/gguf/vocab/llama3-vocab.gguf", llama3Regex, "", true, nil},
		{"real-qwen3.jsonl", "models/gguf/vocab/qwen3-vocab.gguf", qwen2Regex, "NFC", false, func(g tokGoldenLine) []int32 {
			if g.HFIDs != nil {
				return g.HFIDs
			}
			return g.IDs
		}},
		{"o200k-harmony.jsonl", o200kVocabPath, o200kRegex, "", false, func(g tokGoldenLine) []int32 { return g.TiktokenIDs }},
		{"o200k-harmony-special.jsonl", o200kVocabPath, o200kRegex, "", false, nil},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			// The two o200k files share one tokenizer.json.
			key := tc.vocab + tc.regex + tc.normalizer
			tk := built[key]
			if tk == nil {
				tk = hfFromGGUF(t, tc.vocab, tc.regex, tc.normalizer, tc.ignoreMerges)
				built[key] = tk
			}
			lines := readTokGolden(t, "golden/tokenizer/"+tc.golden)
			for i, g := range lines {
				want := g.IDs
				if tc.want != nil {
					want = tc.want(g)
				}
				ids := tk.EncodeWith(g.Text, tokenizer.EncodeOptions{ParseSpecial: g.ParseSpecial})
				require.Equal(t, want, ids, "line %d %q", i+1, g.Text)
			}
			t.Logf("%s: %d/%d lines", tc.golden, len(lines), len(lines))
		})
	}
}

// TestParseHFErrors: files we cannot encode exactly are refused with a one-line
// error that names the file and what is in it.
func TestParseHFErrors(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"added_tokens":  []any{map[string]any{"id": 3, "content": "<|end|>", "special": true}},
			"normalizer":    nil,
			"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
			"decoder":       map[string]any{"type": "ByteLevel"},
			"model": map[string]any{
				"type": "BPE", "vocab": map[string]any{"a": 0, "b": 1, "ab": 2}, "merges": []any{"a b"},
			},
		}
	}
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	split := func(regex string) any {
		return map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated"},
			map[string]any{"type": "ByteLevel", "use_regex": false},
		}}
	}
	tests := []struct {
		name   string
		edit   func(m map[string]any)
		config string
		errMsg string
	}{
		{"unigram", func(m map[string]any) { model(m)["type"] = "Unigram" }, "", `tokenizer.json: model type "Unigram" is not supported (only BPE)`},
		{"wordpiece", func(m map[string]any) { model(m)["type"] = "WordPiece" }, "", `model type "WordPiece" is not supported`},
		{"unknown regex", func(m map[string]any) { m["pre_tokenizer"] = split(`\w+|\s+`) }, "", `tokenizer.json: Split regex "\\w+|\\s+" is not one of the known pre-tokenizers`},
		{"split not isolated", func(m map[string]any) {
			m["pre_tokenizer"] = split(llama3Regex)
			m["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["behavior"] = "Removed"
		}, "", `Split behavior "Removed"`},
		{"metaspace", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁"}
		}, "", `pre-tokenizer "Metaspace" is not supported`},
		{"digits", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Digits"}, map[string]any{"type": "ByteLevel"}}}
		}, "", `pre-tokenizer sequence ["Digits" "ByteLevel"] is not supported`},
		{"nfkc", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKC"} }, "", `normalizer "NFKC" is not supported for byte-level BPE`},
		{"prefix space", func(m map[string]any) { m["pre_tokenizer"].(map[string]any)["add_prefix_space"] = true }, "", "add_prefix_space is not supported"},
		{"no decoder", func(m map[string]any) { m["decoder"] = nil }, "", "there is no decoder"},
		{"wrong decoder", func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, "", `decoder "WordPiece" is not supported`},
		{"dropout", func(m map[string]any) { model(m)["dropout"] = 0.1 }, "", "BPE dropout 0.1 is not supported"},
		{"duplicate id", func(m map[string]any) { model(m)["vocab"].(map[string]any)["c"] = 1 }, "", "id 1 is given to both"},
		{"huge id", func(m map[string]any) { model(m)["vocab"].(map[string]any)["c"] = 1 << 40 }, "", `token "c" has id 1099511627776, outside the vocabulary`},
		{"negative id", func(m map[string]any) { model(m)["vocab"].(map[string]any)["c"] = -1 }, "", `token "c" has id -1`},
		{"vocab list", func(m map[string]any) { model(m)["vocab"] = []any{"a", 0.0} }, "", "model.vocab is not an object"},
		{"bad merge", func(m map[string]any) { model(m)["merges"] = []any{[]any{"a"}} }, "", "merge 0 is neither"},
		{"no merges", func(m map[string]any) { model(m)["merges"] = []any{} }, "", "the BPE model has no merges"},
		{"spm without byte fallback", func(m map[string]any) {
			m["pre_tokenizer"] = nil
			m["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}
		}, "", "needs byte_fallback"},
		{"spm other normalizer", func(m map[string]any) {
			m["pre_tokenizer"] = nil
			m["normalizer"] = map[string]any{"type": "Lowercase"}
		}, "", "normalizer is not SentencePiece's"},
		{"post-processor", func(m map[string]any) { m["post_processor"] = map[string]any{"type": "BertProcessing"} }, "", `post-processor "BertProcessing" is not supported`},
		{"config bad json", func(map[string]any) {}, `{"bos_token": `, "tokenizer_config.json: not valid JSON"},
		{"config unknown bos", func(map[string]any) {}, `{"bos_token": "<s>"}`, `tokenizer_config.json: bos_token "<s>" is not in the vocabulary`},
		{"config add bos without bos", func(map[string]any) {}, `{"add_bos_token": true}`, "add_bos_token is set but there is no bos_token"},
		{"config template", func(map[string]any) {}, `{"chat_template": 3}`, "chat_template is neither"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			tj, err := json.Marshal(m)
			require.NoError(t, err)
			var cj []byte
			if tc.config != "" {
				cj = []byte(tc.config)
			}
			_, _, err = tokenizer.ParseHF(tj, cj)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.errMsg)
			require.NotContains(t, err.Error(), "\n")
		})
	}

	// The base file itself is fine, and so is "not JSON" an error.
	tj, _ := json.Marshal(base())
	v, _, err := tokenizer.ParseHF(tj, nil)
	require.NoError(t, err)
	_, err = tokenizer.New(v)
	require.NoError(t, err)
	_, _, err = tokenizer.ParseHF([]byte("{"), nil)
	require.ErrorContains(t, err, "tokenizer.json: not valid JSON")
}

// TestLoadHF: a directory or the tokenizer.json path; errors name the file.
func TestLoadHF(t *testing.T) {
	dir := shared.Path(t, "models/hf/stories260K")
	a, ca, err := tokenizer.LoadHF(dir)
	require.NoError(t, err)
	b, cb, err := tokenizer.LoadHF(filepath.Join(dir, "tokenizer.json"))
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.Equal(t, ca, cb)

	tmp := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "tokenizer.json"), []byte(`{"model": {"type": "Unigram"}}`), 0o644))
	_, _, err = tokenizer.LoadHF(tmp)
	require.EqualError(t, err, tmp+`: tokenizer.json: model type "Unigram" is not supported (only BPE)`)
	_, _, err = tokenizer.LoadHF(filepath.Join(tmp, "missing"))
	require.Error(t, err)
}

// TestHFChatTemplates: tokenizer_config.json's template, single or named.
func TestHFChatTemplates(t *testing.T) {
	tj, err := os.ReadFile(shared.Path(t, "models/hf/stories260K/tokenizer.json"))
	require.NoError(t, err)
	for _, tc := range []struct {
		config   string
		want     string
		named    map[string]string
		bos, pad string
	}{
		{`{"chat_template": "{{ x }}", "bos_token": {"content": "<s>", "lstrip": false}}`, "{{ x }}", nil, "<s>", ""},
		{`{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}], "pad_token": null}`,
			"D", map[string]string{"default": "D", "tool_use": "T"}, "", ""},
		{`{"pad_token": "</s>"}`, "", nil, "", "</s>"},
	} {
		t.Run(fmt.Sprint(tc.want), func(t *testing.T) {
			v, c, err := tokenizer.ParseHF(tj, []byte(tc.config))
			require.NoError(t, err)
			require.Equal(t, tc.want, c.ChatTemplate)
			require.Equal(t, tc.named, c.ChatTemplates)
			require.Equal(t, tc.bos, c.BOSToken)
			require.Equal(t, tc.pad, c.PADToken)
			if tc.pad != "" {
				require.Equal(t, int32(2), v.PAD)
			}
			// No add_bos_token: the template "<s> $A" decides, and "<s>"
			// is the bos_token only where the config names it.
			require.Equal(t, tc.bos == "<s>", v.AddBOS, strings.TrimSpace(tc.config))
		})
	}
}
