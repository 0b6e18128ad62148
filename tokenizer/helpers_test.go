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
	vocabTestSepar = "\n__ggml_vocab_test__\n"
)

// vocabFromGGUF reads the tokenizer.ggml.* keys the way llama.cpp's
// llama_vocab::impl::load does, including its defaults for missing keys.
// It is a test helper; the production loader lives with the model loading code.
func vocabFromGGUF(t testing.TB, path string) tokenizer.Vocab {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()

	var v tokenizer.Vocab
	var ok bool
	v.Model, ok = f.String("tokenizer.ggml.model")
	require.True(t, ok, "tokenizer.ggml.model")
	v.Pre, _ = f.String("tokenizer.ggml.pre")

	tv, ok := f.Get("tokenizer.ggml.tokens")
	require.True(t, ok, "tokenizer.ggml.tokens")
	v.Tokens, ok = tv.Strings()
	require.True(t, ok, "tokenizer.ggml.tokens is not a string array")
	if sv, found := f.Get("tokenizer.ggml.scores"); found {
		v.Scores, ok = sv.Float32s()
		require.True(t, ok, "tokenizer.ggml.scores is not a float32 array")
	}
	if ty, found := f.Get("tokenizer.ggml.token_type"); found {
		v.Types, ok = ty.Int32s()
		require.True(t, ok, "tokenizer.ggml.token_type is not an int32 array")
	}
	if mv, found := f.Get("tokenizer.ggml.merges"); found {
		v.Merges, ok = mv.Strings()
		require.True(t, ok, "tokenizer.ggml.merges is not a string array")
	}

	// llama.cpp's per-model defaults; a default outside the vocabulary is
	// dropped, and a key outside the vocabulary (e.g. 0xFFFFFFFF for "none")
	// keeps the default.
	v.BOS, v.EOS, v.UNK, v.PAD = -1, -1, -1, -1
	switch v.Model {
	case "llama":
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddBOS = true
	case "gpt2":
		v.BOS, v.EOS = 11, 11
	}
	n := uint64(len(v.Tokens))
	for _, s := range []struct {
		key string
		id  *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
	} {
		if *s.id >= 0 && uint64(*s.id) >= n {
			*s.id = -1
		}
		if x, found := f.Uint(s.key); found && x < n {
			*s.id = int32(x)
		}
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
