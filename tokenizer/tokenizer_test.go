package tokenizer_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// TestLlamaCppVectors runs llama.cpp's own tokenizer vectors (generated with
// add_special=false, so no BOS).
func TestLlamaCppVectors(t *testing.T) {
	for _, rel := range []string{
		"models/gguf/vocab/ggml-vocab-llama-spm.gguf",
		"models/gguf/vocab/ggml-vocab-gpt-2.gguf",
	} {
		t.Run(rel[strings.LastIndex(rel, "/")+1:], func(t *testing.T) {
			tk := loadTokenizer(t, rel)
			cases := readVocabTests(t, rel)
			require.Len(t, cases, 46)
			for i, c := range cases {
				t.Run(fmt.Sprintf("%02d", i), func(t *testing.T) {
					require.Equal(t, c.ids, tk.Encode(c.text, false), "text %q", c.text)
				})
			}
		})
	}
}

// TestStoriesGolden checks the reference's tokenization of the stories260K
// vocab, BOS included.
func TestStoriesGolden(t *testing.T) {
	tk := loadTokenizer(t, storiesPath)
	cases := readGolden(t, storiesGolden)
	require.Len(t, cases, 32)
	for i, c := range cases {
		t.Run(fmt.Sprintf("%02d", i), func(t *testing.T) {
			require.Equal(t, tk.AddBOS(), c.AddBOS)
			require.Equal(t, c.IDs, tk.Encode(c.Text, c.AddBOS), "text %q", c.Text)
		})
	}
}

// roundTripTexts gathers every test string of the vectors and goldens.
func roundTripTexts(t *testing.T) []string {
	var texts []string
	for _, c := range readVocabTests(t, spmVocabPath) {
		texts = append(texts, c.text)
	}
	for _, c := range readGolden(t, storiesGolden) {
		texts = append(texts, c.Text)
	}
	return append(texts, streamTexts...)
}

// streamTexts have characters that the small vocabs only have as byte tokens.
var streamTexts = []string{
	"🦙 llamas 🚀🚀 and 👩‍👩‍👧‍👦",
	"你好，世界！日本語のテキスト",
	"Ünïcödé ümläüts — “quotes” … ½ ∑ ∞",
	"😶‍🌫️ zwj + emoji 🏳️‍🌈 flags 🇫🇷",
	"mixed: a😀b😀c 한국어 العربية עברית",
}

// TestDecodeRoundTrip: decoding the tokens gives the text back (SPM with the
// space it prefixes).
func TestDecodeRoundTrip(t *testing.T) {
	for _, rel := range []string{spmVocabPath, gpt2VocabPath, storiesPath} {
		tk := loadTokenizer(t, rel)
		for i, s := range roundTripTexts(t) {
			t.Run(fmt.Sprintf("%s/%02d", rel[strings.LastIndex(rel, "/")+1:], i), func(t *testing.T) {
				want := s
				if tk.Kind() == tokenizer.KindSPM && s != "" {
					want = " " + s
				}
				require.Equal(t, want, tk.Decode(tk.Encode(s, false)))
				require.Equal(t, want, tk.Decode(tk.Encode(s, true)), "BOS must decode to nothing")
			})
		}
	}
}

// TestStreamDecoder feeds tokens one at a time: every returned chunk must be
// valid UTF-8 and the chunks must add up to Decode's text.
func TestStreamDecoder(t *testing.T) {
	for _, rel := range []string{spmVocabPath, gpt2VocabPath, storiesPath} {
		tk := loadTokenizer(t, rel)
		for i, s := range append(streamTexts, roundTripTexts(t)...) {
			t.Run(fmt.Sprintf("%s/%02d", rel[strings.LastIndex(rel, "/")+1:], i), func(t *testing.T) {
				ids := tk.Encode(s, true)
				d := tk.NewStreamDecoder()
				var got strings.Builder
				held := false
				for _, id := range ids {
					chunk := d.Add(id)
					require.True(t, utf8.ValidString(chunk), "chunk %q after token %d", chunk, id)
					if len(chunk) < len(tk.TokenBytes(id)) {
						held = true
					}
					got.WriteString(chunk)
				}
				require.Empty(t, d.Flush())
				require.Equal(t, tk.Decode(ids), got.String())
				if i < len(streamTexts) && tk.VocabSize() == 512 {
					require.True(t, held, "the tiny vocab must split these characters into byte tokens")
				}
			})
		}
	}
}

func TestStreamDecoderInvalid(t *testing.T) {
	tk := loadTokenizer(t, storiesPath)
	byteTok := func(b byte) int32 {
		id, ok := tk.TokenID(fmt.Sprintf("<0x%02X>", b))
		require.True(t, ok)
		return id
	}
	tests := []struct {
		name   string
		bytes  []byte
		chunks []string // what each Add returns
		flush  string
	}{
		{"split emoji", []byte{0xF0, 0x9F, 0x98, 0x80}, []string{"", "", "", "😀"}, ""},
		{"truncated emoji", []byte{0xF0, 0x9F, 0x98}, []string{"", "", ""}, "\uFFFD"},
		{"stray continuation", []byte{0x80, 'a'}, []string{"\uFFFD", "a"}, ""},
		{"broken sequence", []byte{0xE2, 0x82, 'A'}, []string{"", "", "\uFFFDA"}, ""},
		{"invalid lead", []byte{0xFF, 0xC3, 0xA9}, []string{"\uFFFD", "", "é"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tk.NewStreamDecoder()
			for i, b := range tc.bytes {
				require.Equal(t, tc.chunks[i], d.Add(byteTok(b)), "byte %d", i)
			}
			require.Equal(t, tc.flush, d.Flush())
			require.Empty(t, d.Flush())
		})
	}
}

func TestTokenBytes(t *testing.T) {
	spm := loadTokenizer(t, spmVocabPath)
	gpt2 := loadTokenizer(t, gpt2VocabPath)
	id := func(tk *tokenizer.Tokenizer, s string) int32 {
		id, ok := tk.TokenID(s)
		require.True(t, ok, s)
		return id
	}
	tests := []struct {
		name  string
		tk    *tokenizer.Tokenizer
		id    int32
		piece string
		bytes string
	}{
		{"spm normal", spm, id(spm, "▁Hello"), "▁Hello", " Hello"},
		{"spm byte", spm, id(spm, "<0x0A>"), "<0x0A>", "\n"},
		{"spm high byte", spm, id(spm, "<0xF0>"), "<0xF0>", "\xf0"},
		{"spm bos", spm, 1, "<s>", ""},
		{"spm eos", spm, 2, "</s>", ""},
		{"spm unk", spm, 0, "<unk>", ""},
		{"gpt2 space word", gpt2, id(gpt2, "Ġworld"), "Ġworld", " world"},
		{"gpt2 newline", gpt2, id(gpt2, "Ċ"), "Ċ", "\n"},
		{"gpt2 raw byte", gpt2, id(gpt2, "ð"), "ð", "\xf0"},
		{"gpt2 endoftext", gpt2, gpt2.EOS(), "<|endoftext|>", ""},
		{"out of range", spm, 1 << 20, "", ""},
		{"negative", gpt2, -1, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.piece, tc.tk.Piece(tc.id))
			require.Equal(t, tc.bytes, string(tc.tk.TokenBytes(tc.id)))
		})
	}
}

func TestAccessors(t *testing.T) {
	spm := loadTokenizer(t, spmVocabPath)
	require.Equal(t, tokenizer.KindSPM, spm.Kind())
	require.Equal(t, 32000, spm.VocabSize())
	require.Equal(t, int32(1), spm.BOS())
	require.Equal(t, int32(2), spm.EOS())
	require.True(t, spm.AddBOS())
	require.Equal(t, []int32{1}, spm.Encode("", true))
	require.Empty(t, spm.Encode("", false))

	gpt2 := loadTokenizer(t, gpt2VocabPath)
	require.Equal(t, tokenizer.KindBPE, gpt2.Kind())
	require.Equal(t, 50257, gpt2.VocabSize())
	require.Equal(t, int32(50256), gpt2.BOS())
	require.False(t, gpt2.AddBOS())
	require.Equal(t, tokenizer.TypeControl, gpt2.Type(50256))
	require.Equal(t, []int32{50256}, gpt2.Encode("", true))
}

// TestSpecialTextIsPlain: special-token text in the input is not parsed.
func TestSpecialTextIsPlain(t *testing.T) {
	spm := loadTokenizer(t, spmVocabPath)
	ids := spm.Encode("<s>hi</s>", false)
	require.NotContains(t, ids, spm.BOS())
	require.NotContains(t, ids, spm.EOS())
	require.Equal(t, " <s>hi</s>", spm.Decode(ids))

	gpt2 := loadTokenizer(t, gpt2VocabPath)
	ids = gpt2.Encode("a<|endoftext|>b", false)
	require.NotContains(t, ids, gpt2.EOS())
	require.Equal(t, "a<|endoftext|>b", gpt2.Decode(ids))
}

// TestUserDefinedTokens: user_defined tokens are matched literally before the
// model's algorithm, as llama.cpp does even without special-token parsing.
func TestUserDefinedTokens(t *testing.T) {
	v := vocabFromGGUF(t, shared.Path(t, storiesPath))
	v.Tokens = append(append([]string(nil), v.Tokens...), "<tool>", "<tool_call>")
	v.Scores = append(append([]float32(nil), v.Scores...), 0, 0)
	v.Types = append(append([]int32(nil), v.Types...), int32(tokenizer.TypeUserDefined), int32(tokenizer.TypeUserDefined))
	tk, err := tokenizer.New(v)
	require.NoError(t, err)
	tool, call := int32(512), int32(513)

	plain := loadTokenizer(t, storiesPath)
	ids := tk.Encode("a<tool_call>b<tool>", false)
	// Each raw fragment after a user_defined token gets the space prefix again.
	want := append(append(plain.Encode("a", false), call), plain.Encode("b", false)...)
	want = append(want, tool)
	require.Equal(t, want, ids)
	require.Equal(t, " a<tool_call> b<tool>", tk.Decode(ids))
}

func TestNewRejectsBrokenVocabs(t *testing.T) {
	good := func() tokenizer.Vocab {
		return tokenizer.Vocab{
			Model:  "llama",
			Tokens: []string{"<unk>", "<s>", "</s>", "▁a"},
			Scores: []float32{0, 0, 0, -1},
			Types:  []int32{2, 3, 3, 1},
			BOS:    1, EOS: 2, UNK: 0, PAD: -1,
			AddBOS: true,
		}
	}
	_, err := tokenizer.New(good())
	require.NoError(t, err)

	tests := []struct {
		name   string
		modify func(*tokenizer.Vocab)
		errMsg string
	}{
		{"unknown model", func(v *tokenizer.Vocab) { v.Model = "bert" }, `unknown tokenizer model "bert"`},
		{"no tokens", func(v *tokenizer.Vocab) { v.Tokens, v.Scores, v.Types = nil, nil, nil }, "no tokens"},
		{"short scores", func(v *tokenizer.Vocab) { v.Scores = v.Scores[:3] }, "3 scores for 4 tokens"},
		{"long types", func(v *tokenizer.Vocab) { v.Types = append(v.Types, 1) }, "5 token types for 4 tokens"},
		{"BOS out of range", func(v *tokenizer.Vocab) { v.BOS = 4 }, "BOS id 4 is outside the vocabulary [0, 4)"},
		{"EOS negative", func(v *tokenizer.Vocab) { v.EOS = -2 }, "EOS id -2"},
		{"PAD out of range", func(v *tokenizer.Vocab) { v.PAD = 1000 }, "PAD id 1000"},
		{"add_bos without BOS", func(v *tokenizer.Vocab) { v.BOS = -1 }, "no BOS token"},
		{"add_eos without EOS", func(v *tokenizer.Vocab) { v.AddEOS, v.EOS = true, -1 }, "no EOS token"},
		{"duplicate token", func(v *tokenizer.Vocab) { v.Tokens[3] = "</s>" }, `duplicate token "</s>" has ids 2 and 3`},
		{"gpt2 without merges", func(v *tokenizer.Vocab) { v.Model, v.Pre = "gpt2", "gpt-2" }, "no merges"},
		{"gpt2 unknown pre", func(v *tokenizer.Vocab) { v.Model, v.Pre, v.Merges = "gpt2", "made-up", []string{"a b"} }, `unsupported gpt2 pre-tokenizer "made-up" (tokenizer.ggml.pre); supported: `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := good()
			v.Tokens = append([]string(nil), v.Tokens...)
			tc.modify(&v)
			tk, err := tokenizer.New(v)
			require.Nil(t, tk)
			require.ErrorContains(t, err, tc.errMsg)
		})
	}
}

func BenchmarkNew(b *testing.B) {
	for _, rel := range []string{spmVocabPath, gpt2VocabPath, o200kVocabPath} {
		v := vocabFromGGUF(b, shared.Path(b, rel))
		b.Run(rel[strings.LastIndex(rel, "/")+1:], func(b *testing.B) {
			for b.Loop() {
				if _, err := tokenizer.New(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

const benchParagraph = `Once upon a time, in a small village at the edge of a great forest, there lived a girl named Lily. ` +
	`Every morning she walked to the river to fetch water, singing songs her grandmother had taught her. ` +
	`One day she found a tiny fox with a hurt paw hiding under a bush. "Don't be afraid," she whispered, ` +
	`and she carried it home, where she cared for it for 14 days until it could run again. ` +
	`The fox never forgot her kindness — and neither did the village, which still tells the story in 2025.`

func BenchmarkEncode(b *testing.B) {
	for _, rel := range []string{spmVocabPath, gpt2VocabPath, storiesPath} {
		tk := loadTokenizer(b, rel)
		b.Run(rel[strings.LastIndex(rel, "/")+1:], func(b *testing.B) {
			b.SetBytes(int64(len(benchParagraph)))
			b.ReportAllocs()
			for b.Loop() {
				tk.Encode(benchParagraph, true)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	tk := loadTokenizer(b, spmVocabPath)
	ids := tk.Encode(benchParagraph, true)
	b.SetBytes(int64(len(benchParagraph)))
	for b.Loop() {
		tk.Decode(ids)
	}
}

// TestEndToEndGoldens checks the tokenizer parts of the reference's end-to-end
// cases: the prompt's tokens, the raw bytes of the decoded continuation, and
// the displayed text (invalid UTF-8 as U+FFFD) against the stream decoder.
func TestEndToEndGoldens(t *testing.T) {
	type caseFile struct {
		PromptText   string  `json:"prompt_text"`
		AddBOS       bool    `json:"add_bos"`
		PromptTokens []int32 `json:"prompt_tokens"`
		GenTokens    []int32 `json:"gen_tokens"`
		GenText      string  `json:"gen_text"`
		GenTextHex   string  `json:"gen_text_hex"`
	}
	type index struct {
		Cases []struct {
			Case  string `json:"case"`
			Model string `json:"model"`
		} `json:"cases"`
	}
	n := 0
	for _, idx := range []string{"golden/e2e/index.json", "golden/e2e/index-gptoss.json"} {
		var ix index
		readJSON(t, idx, &ix)
		for _, c := range ix.Cases {
			t.Run(c.Case, func(t *testing.T) {
				var cf caseFile
				readJSON(t, "golden/e2e/"+c.Case+"/case.json", &cf)
				tk := loadTokenizer(t, c.Model)
				require.Equal(t, tk.AddBOS(), cf.AddBOS)
				require.Equal(t, cf.PromptTokens, tk.Encode(cf.PromptText, cf.AddBOS))

				require.Equal(t, cf.GenTextHex, hex.EncodeToString([]byte(tk.Decode(cf.GenTokens))))
				d := tk.NewStreamDecoder()
				var sb strings.Builder
				for _, id := range cf.GenTokens {
					sb.WriteString(d.Add(id))
				}
				sb.WriteString(d.Flush())
				require.Equal(t, cf.GenText, sb.String())
			})
			n++
		}
	}
	require.Equal(t, 34, n)
}

func readJSON(t testing.TB, rel string, v any) {
	t.Helper()
	data, err := os.ReadFile(shared.Path(t, rel))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, v))
}

// BenchmarkEncodeO200k measures encoding speed on the gpt-oss vocabulary
// (201,088 tokens, 446,189 merges, the gpt-4o pre-tokenizer): English prose,
// code and mixed-script text, so that the figure is not one kind of text's.
func BenchmarkEncodeO200k(b *testing.B) {
	tk := loadTokenizer(b, o200kVocabPath)
	for _, tc := range []struct{ name, text string }{
		{"prose", strings.Repeat(benchParagraph+"\n\n", 20)},
		{"goldens", benchGoldenText(b)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			b.ReportAllocs()
			for b.Loop() {
				tk.Encode(tc.text, false)
			}
		})
	}
}

// benchGoldenText joins the o200k golden strings: many scripts, emoji,
// whitespace runs and code.
func benchGoldenText(b *testing.B) string {
	var sb strings.Builder
	for _, g := range readTokGolden(b, "golden/tokenizer/o200k-harmony.jsonl") {
		sb.WriteString(g.Text)
		sb.WriteString("\n")
	}
	return sb.String()
}
