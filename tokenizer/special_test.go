package tokenizer_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// TestParseSpecial: with ParseSpecial, control and unknown tokens written in
// the text become their ids, the longest token first wherever two overlap
// (llama.cpp's tokenizer_st_partition order, not a left-to-right scan);
// without it only user-defined tokens are cut out.
func TestParseSpecial(t *testing.T) {
	v := vocabFromGGUF(t, shared.Path(t, storiesPath))
	extra := []struct {
		text string
		typ  tokenizer.TokenType
	}{
		{"<a>", tokenizer.TypeControl},
		{"a>b>", tokenizer.TypeControl},
		{"<tool>", tokenizer.TypeUserDefined},
	}
	for _, e := range extra {
		v.Tokens = append(v.Tokens, e.text)
		v.Scores = append(v.Scores, 0)
		v.Types = append(v.Types, int32(e.typ))
	}
	tk, err := tokenizer.New(v)
	require.NoError(t, err)
	plain := loadTokenizer(t, storiesPath)
	short, long, tool := int32(512), int32(513), int32(514)
	const bos, eos, unk = 1, 2, 0

	// enc is the plain encoding of one piece of raw text (which SPM
	// prefixes with a space, as it follows the start or a special token).
	enc := func(s string) []int32 { return plain.Encode(s, false) }
	cat := func(parts ...[]int32) []int32 {
		var out []int32
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name    string
		text    string
		special bool
		want    []int32
	}{
		{"bos and eos", "<s>hi</s>", true, cat([]int32{bos}, enc("hi"), []int32{eos})},
		{"not parsed", "<s>hi</s>", false, enc("<s>hi</s>")},
		{"unknown token", "x<unk>", true, cat(enc("x"), []int32{unk})},
		{"longest first", "<a>b>", true, cat(enc("<"), []int32{long})},
		{"both", "<a><a>b>", true, cat([]int32{short}, enc("<"), []int32{long})},
		{"adjacent", "<a><a>", true, []int32{short, short}},
		{"control not parsed", "<a>", false, enc("<a>")},
		{"user-defined always", "a<tool>b", false, cat(enc("a"), []int32{tool}, enc("b"))},
		{"user-defined parsed", "<tool><a>", true, []int32{tool, short}},
		{"look-alike", "<s >< /s>", true, enc("<s >< /s>")},
		{"empty", "", true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tk.EncodeWith(tc.text, tokenizer.EncodeOptions{ParseSpecial: tc.special})
			require.Equal(t, tc.want, append([]int32(nil), got...), "text %q", tc.text)
		})
	}
}

// TestDecodeSpecial: control tokens print nothing unless asked for;
// user-defined ones always print.
func TestDecodeSpecial(t *testing.T) {
	tk := loadTokenizer(t, o200kVocabPath)
	ids := tk.EncodeWith("<|start|>assistant<|channel|>final<|message|>Hi<|return|>", tokenizer.EncodeOptions{ParseSpecial: true})
	require.Equal(t, "<|start|>assistant<|channel|>final<|message|>Hi", tk.Decode(ids))
	require.Equal(t, "<|start|>assistant<|channel|>final<|message|>Hi<|return|>", tk.DecodeWith(ids, tokenizer.DecodeOptions{Special: true}))

	d := tk.NewStreamDecoderWith(tokenizer.DecodeOptions{Special: true})
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(d.Add(id))
	}
	sb.WriteString(d.Flush())
	require.Equal(t, tk.DecodeWith(ids, tokenizer.DecodeOptions{Special: true}), sb.String())
}

// TestHarmonyVocabulary: the gpt-oss vocabulary as the reference engine sets
// it up. <|start|>, <|channel|>, <|message|>, <|constrain|> and <|end|> are
// plain user-defined tokens (always matched, always printed); <|end|> does not
// end generation, <|return|>, <|call|> and <|endoftext|> do
// (README-tokenizer-chat.md: "The engine reports EOG tokens 199999, 200002
// and 200012").
func TestHarmonyVocabulary(t *testing.T) {
	tk := loadTokenizer(t, o200kVocabPath)
	for _, tc := range []struct {
		text      string
		id        int32
		eog       bool
		alwaysHit bool // matched and printed without special handling
	}{
		{"<|endoftext|>", 199999, true, false},
		{"<|return|>", 200002, true, false},
		{"<|constrain|>", 200003, false, true},
		{"<|channel|>", 200005, false, true},
		{"<|start|>", 200006, false, true},
		{"<|end|>", 200007, false, true},
		{"<|message|>", 200008, false, true},
		{"<|call|>", 200012, true, false},
		{"<|startoftext|>", 199998, false, false},
		{"<|reserved_200013|>", 200013, false, false},
	} {
		t.Run(tc.text, func(t *testing.T) {
			id, ok := tk.TokenID(tc.text)
			require.True(t, ok)
			require.Equal(t, tc.id, id)
			require.Equal(t, tc.eog, tk.IsEOG(id))
			plain := tk.Encode(tc.text, false)
			require.Equal(t, tc.alwaysHit, len(plain) == 1 && plain[0] == id, "%v", plain)
			require.Equal(t, []int32{id}, tk.EncodeWith(tc.text, tokenizer.EncodeOptions{ParseSpecial: true}))
			if tc.alwaysHit {
				require.Equal(t, tc.text, tk.Decode([]int32{id}))
			} else {
				require.Empty(t, tk.Decode([]int32{id}))
			}
		})
	}
	n := 0
	for id := int32(0); id < int32(tk.VocabSize()); id++ {
		if tk.IsEOG(id) {
			n++
		}
	}
	require.Equal(t, 3, n)
}

// TestEOG: llama.cpp's end-of-generation sets of the other vocabularies.
func TestEOG(t *testing.T) {
	for _, tc := range []struct {
		vocab string
		eog   []string
	}{
		{"models/gguf/vocab/llama3-vocab.gguf", []string{"<|end_of_text|>", "<|eot_id|>"}},
		// "</s>" is an ordinary BPE token of Qwen's vocabulary, but the
		// reference ends generation on that text whatever the model.
		{"models/gguf/vocab/qwen3-vocab.gguf", []string{"<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "</s>"}},
		{spmVocabPath, []string{"</s>"}},
	} {
		t.Run(tc.vocab, func(t *testing.T) {
			tk := loadTokenizer(t, tc.vocab)
			var got []string
			for id := int32(0); id < int32(tk.VocabSize()); id++ {
				if tk.IsEOG(id) {
					got = append(got, tk.Piece(id))
				}
			}
			require.ElementsMatch(t, tc.eog, got)
		})
	}
}

// TestPreTokenizerNames: the aliases llama.cpp accepts give the same ids, and
// an unknown name is one line naming it and the supported ones.
func TestPreTokenizerNames(t *testing.T) {
	v := vocabFromGGUF(t, shared.Path(t, "models/gguf/vocab/ggml-vocab-gpt-2-pre-llama-bpe.gguf"))
	lines := readTokGolden(t, "golden/tokenizer/gpt2-pre-llama-bpe.jsonl")
	for _, alias := range []string{"llama3", "llama-v3", "llama-bpe"} {
		v.Pre = alias
		tk, err := tokenizer.New(v)
		require.NoError(t, err)
		for _, g := range lines {
			require.Equal(t, g.IDs, tk.Encode(g.Text, false), "%s: %q", alias, g.Text)
		}
	}

	v.Pre = "glm5"
	_, err := tokenizer.New(v)
	require.Error(t, err)
	msg := err.Error()
	require.NotContains(t, msg, "\n")
	require.False(t, strings.HasPrefix(msg, "tokenizer:"), "callers add the tokenizer: prefix")
	require.Contains(t, msg, `unsupported gpt2 pre-tokenizer "glm5"`)
	for _, name := range []string{"default", "gpt-2", "llama-bpe", "llama3", "qwen2", "gpt-4o"} {
		require.Contains(t, msg, name)
	}
	require.NotContains(t, msg, `""`, "the missing value is not a name to list")
}

// TestMergeByIDs: merging words by token ids (mergeSmall for short words,
// mergeLong's queue for long ones) gives what llama.cpp's merge by text
// gives, on every gpt2 vocabulary, for generated strings and for long words
// of one class (letters, symbols, digits, spaces, one emoji sequence).
func TestMergeByIDs(t *testing.T) {
	texts := oracleStrings(t, 2000)
	for _, unit := range []string{"ab", "x", "Ab", "é", "!?", "-", "12", " ", "\n", "👩\u200d👩\u200d👧", "ก", "日本"} {
		for _, n := range []int{20, 49, 100, 500} {
			texts = append(texts, strings.Repeat(unit, n), "q "+strings.Repeat(unit, n)+" z")
		}
	}
	for _, rel := range []string{gpt2VocabPath, "models/gguf/vocab/llama3-vocab.gguf", "models/gguf/vocab/qwen3-vocab.gguf", o200kVocabPath} {
		tk := loadTokenizer(t, rel)
		for _, s := range texts {
			o := tokenizer.EncodeOptions{ParseSpecial: true}
			require.Equal(t, tk.EncodeByText(s, o), tk.EncodeWith(s, o), "%s: %q", rel, s)
		}
	}
}
