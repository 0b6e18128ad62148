package tokenizer_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// The fuzz targets, one per tokenizer kind, check for any input that
// encoding never panics, every id is in the vocabulary, valid UTF-8
// round-trips through Decode (with and without special-token parsing), the
// stream decoder agrees with Decode, and merging short words by token ids
// gives what merging by text (llama.cpp's way) gives. Run one with e.g.
//
//	go test -run XXX -fuzz 'FuzzEncode$' -fuzztime 60s -fuzzminimizetime 5s ./tokenizer
//
// (minimizing an interesting input with the default 60 s budget can take up
// the whole run).

// fuzzSeeds adds the test strings of every golden file and a few malformed
// byte sequences.
func fuzzSeeds(f *testing.F) {
	for _, c := range readVocabTests(f, spmVocabPath) {
		f.Add(c.text)
	}
	for _, c := range readGolden(f, storiesGolden) {
		f.Add(c.Text)
	}
	for _, g := range readTokGolden(f, "golden/tokenizer/real-qwen3.jsonl") {
		f.Add(g.Text)
	}
	for _, g := range readTokGolden(f, "golden/tokenizer/o200k-harmony-special.jsonl") {
		f.Add(g.Text)
	}
	for _, s := range streamTexts {
		f.Add(s)
	}
	for _, s := range []string{"\xff\xfe", "a\xc3", "\xed\xa0\x80", "\xc0\x80", "\xf4\x90\x80\x80", "'s 're  \t\n x",
		"<s></s><unk>", "<|im_start|>user\n<|im_end|>", "<|start|><|channel|>final<|message|>hi<|return|>"} {
		f.Add(s)
	}
}

// checkEncode is the property every fuzz target checks, for one tokenizer.
// prefix is what Decode adds in front of a text: SPM's space.
func checkEncode(t *testing.T, name string, tk *tokenizer.Tokenizer, prefix, s string) {
	withBOS := tk.EncodeWith(s, tokenizer.EncodeOptions{AddBOS: true})
	if tk.BOS() >= 0 {
		require.Equal(t, tk.BOS(), withBOS[0], name)
		withBOS = withBOS[1:]
	}
	require.Equal(t, tk.Encode(s, false), withBOS, "%s: BOS changes the rest", name)

	for _, o := range []tokenizer.EncodeOptions{{}, {ParseSpecial: true}} {
		ids := tk.EncodeWith(s, o)
		for _, id := range ids {
			require.True(t, id >= 0 && int(id) < tk.VocabSize(), "%s: id %d", name, id)
		}
		if tk.Kind() == tokenizer.KindBPE {
			require.Equal(t, tk.EncodeByText(s, o), ids, "%s: merge by ids vs by text, %+v", name, o)
		}
		d := tokenizer.DecodeOptions{Special: o.ParseSpecial}
		got := tk.DecodeWith(ids, d)
		if utf8.ValidString(s) {
			want := s
			if s != "" {
				want = prefix + s
			}
			if !o.ParseSpecial || tk.Kind() == tokenizer.KindBPE {
				// With special tokens parsed, SPM prefixes a space to
				// the text after each one, so only gpt2 round-trips.
				require.Equal(t, want, got, "%s %+v", name, o)
			}
		}

		sd := tk.NewStreamDecoderWith(d)
		var sb strings.Builder
		for _, id := range ids {
			chunk := sd.Add(id)
			require.True(t, utf8.ValidString(chunk), "%s: chunk %q", name, chunk)
			sb.WriteString(chunk)
		}
		flushed := sd.Flush()
		require.True(t, utf8.ValidString(flushed), "%s: flush %q", name, flushed)
		sb.WriteString(flushed)
		if utf8.ValidString(got) {
			require.Equal(t, got, sb.String(), name)
		}
	}
}

// FuzzEncode: the SentencePiece (stories260K, Llama-2) and GPT-2 tokenizers.
func FuzzEncode(f *testing.F) {
	fuzzSeeds(f)
	spm := loadTokenizer(f, storiesPath)
	llama2 := loadTokenizer(f, spmVocabPath)
	gpt2 := loadTokenizer(f, gpt2VocabPath)
	f.Fuzz(func(t *testing.T, s string) {
		checkEncode(t, "stories260K", spm, " ", s)
		checkEncode(t, "llama-spm", llama2, " ", s)
		checkEncode(t, "gpt2", gpt2, "", s)
	})
}

// FuzzEncodeLlama3: the llama-bpe pre-tokenizer (ignore_merges), on the real
// Llama-3 vocabulary and on the GPT-2 one.
func FuzzEncodeLlama3(f *testing.F) {
	fuzzSeeds(f)
	full := loadTokenizer(f, "models/gguf/vocab/llama3-vocab.gguf")
	small := loadTokenizer(f, "models/gguf/vocab/ggml-vocab-gpt-2-pre-llama-bpe.gguf")
	f.Fuzz(func(t *testing.T, s string) {
		checkEncode(t, "llama3", full, "", s)
		checkEncode(t, "gpt2-llama-bpe", small, "", s)
	})
}

// FuzzEncodeQwen2: the qwen2 pre-tokenizer on the real Qwen3 vocabulary
// (user-defined <think> tokens) and on the GPT-2 one.
func FuzzEncodeQwen2(f *testing.F) {
	fuzzSeeds(f)
	full := loadTokenizer(f, "models/gguf/vocab/qwen3-vocab.gguf")
	small := loadTokenizer(f, "models/gguf/vocab/ggml-vocab-gpt-2-pre-qwen2.gguf")
	f.Fuzz(func(t *testing.T, s string) {
		checkEncode(t, "qwen3", full, "", s)
		checkEncode(t, "gpt2-qwen2", small, "", s)
	})
}

// FuzzEncodeO200k: the gpt-4o pre-tokenizer on the gpt-oss vocabulary, the
// exact o200k splitter on it, and that splitter against tiktoken-go's
// o200k_base wherever tiktoken-go is a valid oracle (valid UTF-8, no special
// token text, none of its quirks).
func FuzzEncodeO200k(f *testing.F) {
	fuzzSeeds(f)
	for _, s := range oracleFragments {
		f.Add(s)
	}
	engine := loadTokenizer(f, o200kVocabPath)
	v := vocabFromGGUF(f, shared.Path(f, o200kVocabPath))
	v.Pre = tokenizer.PreO200k
	exact, err := tokenizer.New(v)
	require.NoError(f, err)
	oracle := codec.NewO200kBase()
	f.Fuzz(func(t *testing.T, s string) {
		checkEncode(t, "o200k gpt-4o", engine, "", s)
		checkEncode(t, "o200k exact", exact, "", s)
		if !utf8.ValidString(s) || tiktokenGoQuirk(s) || strings.Contains(s, "<|") {
			return
		}
		want, _, err := oracle.Encode(s)
		require.NoError(t, err)
		got := exact.Encode(s, false)
		require.Len(t, got, len(want), "text %q", s)
		for i := range want {
			require.Equal(t, int32(want[i]), got[i], "text %q", s)
		}
	})
}
