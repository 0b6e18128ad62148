package serve_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/serve"
)

// scriptProgram is a runtime.Program whose greedy output after any prompt
// is script, then EOS: a row at position p of a slot whose prompt ended at
// position last puts its logits on script[p-last] (a step of more than one
// token, or one at position 0, is a prompt).
type scriptProgram struct {
	cfg    runtime.ProgramConfig
	vocab  int
	script []int32
	eos    int32

	mu   sync.Mutex
	last map[int]int32
}

func (p *scriptProgram) Config() runtime.ProgramConfig { return p.cfg }
func (p *scriptProgram) VocabSize() int                { return p.vocab }
func (p *scriptProgram) CacheBytes() int64             { return 0 }
func (p *scriptProgram) Close() error                  { return nil }
func (p *scriptProgram) ResetSlot(int) error           { return nil }

func (p *scriptProgram) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	if err := runtime.CheckStep(p.cfg, p.vocab, slot, tokens, pos); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(tokens) > 1 || pos[0] == 0 {
		p.last[slot] = pos[len(pos)-1]
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = make([]float32, p.vocab)
		next := p.eos
		if k := pos[i] - p.last[slot]; k >= 0 && int(k) < len(p.script) {
			next = p.script[k]
		}
		rows[i][next] = 1
	}
	return rows, nil
}

// A model whose chat template writes <think> (Qwen3's) gets its reasoning
// in reasoning_content and the rest in content, streamed and not.
func TestChatThinkReasoning(t *testing.T) {
	b, err := os.ReadFile(shared.Path(t, "golden/chat/qwen3.json"))
	require.NoError(t, err)
	var f struct {
		ChatTemplate string `json:"chat_template"`
	}
	require.NoError(t, json.Unmarshal(b, &f))

	m := loadStories(t)
	const output = "<think>\nThe user says hi.\n\nSo: hi.\n</think>\n\nHi there"
	p := &scriptProgram{cfg: runtime.ProgramConfig{Slots: 2, Context: 256}, vocab: m.tok.VocabSize(),
		script: m.tok.Encode(output, false), eos: m.tok.EOS(), last: map[int]int32{}}
	// SentencePiece's dummy prefix puts a space first, which the parser
	// skips as it waits for <think>.
	require.Equal(t, " "+output, m.tok.Decode(p.script), "the script does not decode to the output")
	srv := serve.NewServer(serve.Options{Model: "qwen3", ChatTemplate: f.ChatTemplate, Logger: discardLogger()})
	sched, err := serve.New(p, m.tok, serve.Config{Observer: srv.Observer()})
	require.NoError(t, err)
	require.NoError(t, srv.Ready(sched))
	base := newLoopback(t, srv)
	const reasoning, content = "The user says hi.\n\nSo: hi.", "Hi there"

	body := `{"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "max_tokens": 100}`
	code, out := post(t, base+"/v1/chat/completions", body)
	require.Equal(t, 200, code, "%s", out)
	var r struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				Reasoning string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(out, &r))
	require.Equal(t, reasoning, r.Choices[0].Message.Reasoning)
	require.Equal(t, content, r.Choices[0].Message.Content)

	req, err := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(strings.Replace(body, "{", `{"stream": true, `, 1)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var gotR, gotC strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					Reasoning *string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c))
		for _, ch := range c.Choices {
			if d := ch.Delta; d.Content != nil {
				gotC.WriteString(*d.Content)
			} else if d.Reasoning != nil {
				gotR.WriteString(*d.Reasoning)
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Equal(t, reasoning, gotR.String())
	require.Equal(t, content, gotC.String())
}
