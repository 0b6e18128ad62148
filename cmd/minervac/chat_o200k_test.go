package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/tokenizer"
)

// withO200kHeader writes the gpt-oss fixture G1 (q8emb) under the header of
// a real gpt-oss GGUF: o200k-harmony.gguf's metadata (general.*, the
// o200k_harmony vocabulary of 201,088 tokens with its merges and special
// ids, the gpt-oss chat template), with G1's own gpt-oss.* hyperparameters
// in place of gpt-oss-20b's, since the tensors are G1's.
//
// The sizes differ (G1 has GPT-2's 50,257 tokens, o200k 201,088) and a GGUF
// must have as many tokens as token_embd and output have rows (llama.cpp
// requires it too), so those two Q8_0 matrices are widened to 201,088
// rows: row i is G1's row i mod 50,257. The weights are random either way;
// what the test needs is G1's graph under the real vocabulary and header.
func withO200kHeader(t *testing.T) string {
	t.Helper()
	vocab, err := gguf.Open(shared.Path(t, "models/gguf/vocab/o200k-harmony.gguf"))
	require.NoError(t, err)
	defer vocab.Close()
	g1, err := gguf.Open(shared.Path(t, "models/gguf/synthetic/gptoss-g1-q8emb.gguf"))
	require.NoError(t, err)
	defer g1.Close()
	n := uint64(len(mustStrings(t, vocab, "tokenizer.ggml.tokens")))
	require.EqualValues(t, 201088, n)

	w := gguf.NewWriter(3)
	have := map[string]bool{}
	for _, kv := range vocab.KV {
		if !strings.HasPrefix(kv.Key, "gpt-oss.") && kv.Key != "general.alignment" {
			w.AddKV(kv.Key, kv.Value)
			have[kv.Key] = true
		}
	}
	for _, kv := range g1.KV {
		if !have[kv.Key] && !strings.HasPrefix(kv.Key, "tokenizer.") && kv.Key != "general.alignment" {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	for i := range g1.Tensors {
		ti := &g1.Tensors[i]
		data := g1.TensorData(ti)
		dims := ti.Dims
		if ti.Name == "token_embd.weight" || ti.Name == "output.weight" {
			require.Equal(t, ir.Q8_0, ti.Type)
			rows := dims[1]
			row := uint64(len(data)) / rows
			wide := make([]byte, 0, n*row)
			for r := range n {
				k := r % rows
				wide = append(wide, data[k*row:(k+1)*row]...)
			}
			data, dims = wide, []uint64{dims[0], n}
		}
		require.NoError(t, w.AddTensor(ti.Name, ti.Type, dims, data))
	}
	path := filepath.Join(t.TempDir(), "gptoss-g1-o200k.gguf")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = w.WriteTo(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

func mustStrings(t *testing.T, f *gguf.File, key string) []string {
	v, ok := f.Get(key)
	require.True(t, ok, key)
	s, ok := v.Strings()
	require.True(t, ok, key)
	return s
}

// A real gpt-oss GGUF header is accepted: the fixture under
// o200k-harmony.gguf's vocabulary and metadata chats end to end, two turns,
// with the real gpt-oss chat template from the header (rendered by the Jinja
// engine, not the built-in harmony renderer), its harmony control tokens
// parsed as single ids, and the second turn evaluating only its new tokens.
// Loading o200k-harmony.gguf itself as --tokenizer gives the same
// conversation.
func TestChatO200kHeader(t *testing.T) {
	model := withO200kHeader(t)
	vocabFile := shared.Path(t, "models/gguf/vocab/o200k-harmony.gguf")
	now := "2026-11-24T12:00:00Z"
	script := "Hello!\nWhat is 2+2?\n"
	args := []string{"chat", model, "-n", "8", "--temp", "0", "--json", "--reasoning-effort", "high", "--now", now}
	stdout, stderr, code := minervacIn(t, script, args...)
	require.Equal(t, 0, code, stderr)
	rs := turns(t, stdout)
	require.Len(t, rs, 2)

	vf, err := gguf.Open(vocabFile)
	require.NoError(t, err)
	template, ok := vf.String("tokenizer.chat_template")
	vf.Close()
	require.True(t, ok)
	tok := vocabOf(t, vocabFile)
	clock, err := time.Parse(time.RFC3339, now)
	require.NoError(t, err)
	encode := func(conv chat.Conversation) []int32 {
		opts := chat.Options{AddGenerationPrompt: true, Vars: map[string]any{"reasoning_effort": "high"}, Now: clock}
		text, err := chat.Render(template, conv, opts)
		require.NoError(t, err)
		built, err := chat.RenderHarmony(conv, opts)
		require.NoError(t, err)
		require.Equal(t, built, text, "the template and the built-in renderer agree")
		require.Contains(t, text, "Reasoning: high")
		ids := tok.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true})
		start, _ := tok.TokenID("<|start|>")
		require.Equal(t, int32(200006), start)
		require.Equal(t, start, ids[0], "<|start|> is one token")
		return ids
	}
	var conv chat.Conversation
	conv.Add("user", "Hello!")
	p1 := encode(conv)
	require.Equal(t, len(p1), rs[0].PromptTokens)
	require.Equal(t, len(p1), rs[0].Evaluated)
	require.Len(t, rs[0].Tokens, 8)
	require.Equal(t, "length", rs[0].Stop)
	for _, id := range rs[0].Tokens {
		require.Less(t, int(id), tok.VocabSize())
	}
	// The answer has no harmony markup: the parser takes it as the final
	// answer, and it goes back into the conversation as such.
	require.Equal(t, tok.DecodeWith(rs[0].Tokens, tokenizer.DecodeOptions{Special: true}), rs[0].Text)

	conv.Messages = append(conv.Messages, chat.ParseHarmony(rs[0].Text).Message())
	conv.Add("user", "What is 2+2?")
	p2 := encode(conv)
	reused := commonPrefix(heldAfter(p1, rs[0]), p2)
	require.GreaterOrEqual(t, reused, len(p1))
	require.Equal(t, len(p2), rs[1].PromptTokens)
	require.Equal(t, reused, rs[1].Reused)
	require.Equal(t, len(p2)-reused, rs[1].Evaluated, "turn 2 evaluates only its new tokens")
	t.Logf("turn 2 evaluated %d new tokens of %d (%d from the KV cache)", rs[1].Evaluated, rs[1].PromptTokens, rs[1].Reused)

	// o200k-harmony.gguf as --tokenizer: its vocabulary and template, the
	// same prompts and answers.
	stdout, stderr, code = minervacIn(t, script, append(args, "--tokenizer", vocabFile)...)
	require.Equal(t, 0, code, stderr)
	again := turns(t, stdout)
	for i := range rs { // timings differ from run to run
		rs[i].PromptMS, rs[i].GenMS, again[i].PromptMS, again[i].GenMS = 0, 0, 0, 0
	}
	require.Equal(t, rs, again)
}
