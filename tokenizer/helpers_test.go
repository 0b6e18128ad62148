package tokenizer_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// Shared test data, relative to the shared/ folder.
const (
	spmVocabPath   = "models/gguf/vocab/ggml-vocab-llama-spm.gguf"
	gpt2VocabPath  = "models/gguf/vocab/ggml-vocab-gpt-2.gguf"
	storiesPath    = "models/gguf/stories260K.gguf"
	storiesGolden  = "golden/tokenizer/stories260K.jsonl"
	o200kVocabPath = "models/gguf/vocab/o200k-harmony.gguf"
	vocabTestSepar = "\n__ggml_vocab_test__\n"
)

// vocabFromGGUF reads a vocabulary through the production loader
// (arch.LoadVocab), which follows llama.cpp's llama_vocab::impl::load
// including its defaults for missing keys.
// It is a test helper; the production loader lives with the model loading code.
func vocabFromGGUF(t testing.TB, path string) tokenizer.Vocab {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	v, err := arch.LoadVocab(f)
	require.NoError(t, err)
	return v
}

// Tokenizers are built once per test binary: the fuzz targets and benchmarks
// would otherwise spend their time loading vocabularies.
var (
	tokMu    sync.Mutex
	tokCache = map[string]*tokenizer.Tokenizer{}
)

func loadTokenizer(t testing.TB, rel string) *tokenizer.Tokenizer {
	t.Helper()
	tokMu.Lock()
	defer tokMu.Unlock()
	if tk, ok := tokCache[rel]; ok {
		return tk
	}
	tk, err := tokenizer.New(vocabFromGGUF(t, shared.Path(t, rel)))
	require.NoError(t, err)
	tokCache[rel] = tk
	return tk
}

type vocabCase struct {
	text string
	ids  []int32
}

// readVocabTests reads llama.cpp's tokenizer vectors the way
// tests/test-tokenizer-0.cpp does: the .inp file is split on
// "\n__ggml_vocab_test__\n" (so the last string ends before the final
// separator, and a string may be empty or hold newlines of its own), and the
// .out file has one line of space-separated ids per string.
func readVocabTests(t testing.TB, rel string) []vocabCase {
	t.Helper()
	inp, err := os.ReadFile(shared.Path(t, rel+".inp"))
	require.NoError(t, err)
	out, err := os.ReadFile(shared.Path(t, rel+".out"))
	require.NoError(t, err)

	var texts []string
	raw := string(inp)
	for pos := 0; pos < len(raw); {
		next := strings.Index(raw[pos:], vocabTestSepar)
		if next < 0 {
			texts = append(texts, raw[pos:])
			break
		}
		texts = append(texts, raw[pos:pos+next])
		pos += next + len(vocabTestSepar)
	}

	var cases []vocabCase
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for i := 0; sc.Scan(); i++ {
		require.Less(t, i, len(texts), "more .out lines than .inp strings")
		c := vocabCase{text: texts[i], ids: []int32{}}
		for _, f := range strings.Fields(sc.Text()) {
			id, err := strconv.ParseInt(f, 10, 32)
			require.NoError(t, err)
			c.ids = append(c.ids, int32(id))
		}
		cases = append(cases, c)
	}
	require.NoError(t, sc.Err())
	require.Len(t, cases, len(texts), ".inp and .out have different numbers of tests")
	return cases
}

type goldenCase struct {
	Text   string  `json:"text"`
	AddBOS bool    `json:"add_bos"`
	IDs    []int32 `json:"ids"`
}

func readGolden(t testing.TB, rel string) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(shared.Path(t, rel))
	require.NoError(t, err)
	var cases []goldenCase
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c goldenCase
		require.NoError(t, json.Unmarshal([]byte(line), &c))
		cases = append(cases, c)
	}
	return cases
}
