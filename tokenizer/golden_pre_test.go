package tokenizer_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// tokGoldenLine is one line of the golden/tokenizer/*.jsonl files that carry
// parse_special (all but stories260K.jsonl).
type tokGoldenLine struct {
	Text         string  `json:"text"`
	AddBOS       bool    `json:"add_bos"`
	ParseSpecial bool    `json:"parse_special"`
	IDs          []int32 `json:"ids"`
	TiktokenIDs  []int32 `json:"tiktoken_ids"` // o200k files: OpenAI tiktoken's ids
	HFIDs        []int32 `json:"hf_ids"`       // real-qwen3: the tokenizer.json's ids where they differ
}

func readTokGolden(t testing.TB, rel string) []tokGoldenLine {
	t.Helper()
	data, err := os.ReadFile(shared.Path(t, rel))
	require.NoError(t, err)
	var lines []tokGoldenLine
	for i, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		var g tokGoldenLine
		require.NoError(t, json.Unmarshal([]byte(l), &g), "%s:%d", rel, i+1)
		if g.IDs == nil {
			g.IDs = []int32{}
		}
		lines = append(lines, g)
	}
	return lines
}

// tokGoldenFile is an entry of golden/tokenizer/index.json.
type tokGoldenFile struct {
	File         string `json:"file"`
	VocabModel   string `json:"vocab_model"`
	NStrings     int    `json:"n_strings"`
	PreTokenizer string `json:"pre_tokenizer"`
}

func readTokIndex(t testing.TB) []tokGoldenFile {
	t.Helper()
	var ix struct {
		Files []tokGoldenFile `json:"files"`
	}
	readJSON(t, "golden/tokenizer/index.json", &ix)
	return ix.Files
}

// TestTokenizerGoldens runs every line of every golden/tokenizer file that the
// index lists with a pre-tokenizer (the gpt2-pre-* files, o200k and the real
// Llama-3 and Qwen3 vocabularies): the ids must be the reference engine's and
// decoding them must give the text back (special tokens written out where the
// line parsed them).
func TestTokenizerGoldens(t *testing.T) {
	n := 0
	for _, f := range readTokIndex(t) {
		if f.PreTokenizer == "" {
			continue // stories260K.jsonl: TestStoriesGolden
		}
		n++
		t.Run(f.File, func(t *testing.T) {
			tk := loadTokenizer(t, f.VocabModel)
			lines := readTokGolden(t, "golden/tokenizer/"+f.File)
			require.Len(t, lines, f.NStrings)
			pass := 0
			for i, g := range lines {
				ok := t.Run(fmt.Sprintf("%03d", i), func(t *testing.T) {
					ids := tk.EncodeWith(g.Text, tokenizer.EncodeOptions{AddBOS: g.AddBOS, ParseSpecial: g.ParseSpecial})
					require.Equal(t, g.IDs, ids, "text %q", g.Text)
					require.Equal(t, g.Text, tk.DecodeWith(ids, tokenizer.DecodeOptions{Special: g.ParseSpecial}))
				})
				if ok {
					pass++
				}
			}
			t.Logf("%s: %d/%d lines pass", f.File, pass, len(lines))
		})
	}
	require.Equal(t, 8, n, "files with a pre-tokenizer in index.json")
}
