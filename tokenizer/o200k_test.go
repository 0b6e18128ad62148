package tokenizer_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/tokenizer"
)

// TestO200kExactSplitter runs the o200k golden strings through the exact
// o200k pre-tokenizer (the one a tokenizer.json with the o200k regex gets)
// on the o200k-harmony vocabulary: the ids must be OpenAI tiktoken's, which
// the file records for every line. They differ from the reference engine's
// ids only on the lines with combining marks, where llama.cpp's adapted
// regex splits words.
func TestO200kExactSplitter(t *testing.T) {
	v := vocabFromGGUF(t, shared.Path(t, o200kVocabPath))
	v.Pre = tokenizer.PreO200k
	tk, err := tokenizer.New(v)
	require.NoError(t, err)
	engine := loadTokenizer(t, o200kVocabPath)

	differ := 0
	for i, g := range readTokGolden(t, "golden/tokenizer/o200k-harmony.jsonl") {
		require.NotNil(t, g.TiktokenIDs, "line %d has no tiktoken_ids", i+1)
		t.Run(fmt.Sprintf("%03d", i), func(t *testing.T) {
			ids := tk.Encode(g.Text, false)
			require.Equal(t, g.TiktokenIDs, ids, "text %q", g.Text)
			require.Equal(t, g.Text, tk.Decode(ids))
		})
		if fmt.Sprint(g.TiktokenIDs) != fmt.Sprint(engine.Encode(g.Text, false)) {
			differ++
		}
	}
	// README-tokenizer-chat.md: tiktoken and the engine differ on 5 lines.
	require.Equal(t, 5, differ)
}
