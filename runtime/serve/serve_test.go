package serve_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// post sends a JSON body and returns the status and body.
func post(t testing.TB, url, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// completion asks for a greedy completion and returns its text.
func completion(t testing.TB, base, prompt string, n int) string {
	t.Helper()
	code, b := post(t, base+"/v1/completions", fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "temperature": 0}`, prompt, n))
	require.Equal(t, 200, code, "%s", b)
	var r struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(b, &r))
	require.Len(t, r.Choices, 1)
	return r.Choices[0].Text
}

// streamCompletion reads a streamed completion's text pieces.
func streamCompletion(t testing.TB, base, prompt string, n int) (string, []map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/completions", strings.NewReader(
		fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}`, prompt, n)))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var text strings.Builder
	var chunks []map[string]any
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		require.True(t, ok, "line %q", line)
		require.False(t, done, "data after [DONE]")
		if data == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &c))
		chunks = append(chunks, c)
		if ch, _ := c["choices"].([]any); len(ch) == 1 {
			text.WriteString(ch[0].(map[string]any)["text"].(string))
		}
	}
	require.True(t, done, "the stream ends with [DONE]")
	return text.String(), chunks
}

var storyPrompts = []string{
	"Once upon a time", "The little dog", "Lily and Tom went to the park", "One day, a big bird",
	"The sun was hot", "Sam had a red ball", "Mom said", "There was a cat",
}

// Greedy text through the server, streamed or not, is what `minervac run`
// (runtime.Generate on one slot) prints for the same prompt.
func TestCompletionMatchesRun(t *testing.T) {
	m := loadStories(t)
	ts := startServer(t, serverConfig{slots: 2})
	for _, p := range storyPrompts[:3] {
		want := m.generate(t, p, 64)
		require.Equal(t, want, completion(t, ts.URL, p, 64), "prompt %q", p)
		got, chunks := streamCompletion(t, ts.URL, p, 64)
		require.Equal(t, want, got, "prompt %q streamed", p)
		last := chunks[len(chunks)-1]
		require.Equal(t, []any{}, last["choices"])
		u := last["usage"].(map[string]any)
		require.Equal(t, float64(64), u["completion_tokens"])
	}
}

// Batch invariance through the server: eight concurrent greedy requests on
// eight slots give exactly the text each gives alone.
func TestConcurrentGreedyEqualsSolo(t *testing.T) {
	solo := startServer(t, serverConfig{slots: 1})
	want := make([]string, len(storyPrompts))
	for i, p := range storyPrompts {
		want[i] = completion(t, solo.URL, p, 48)
	}
	ts := startServer(t, serverConfig{slots: 8, chunk: 4})
	got := make([]string, len(storyPrompts))
	var wg sync.WaitGroup
	for i, p := range storyPrompts {
		wg.Go(func() { got[i] = completion(t, ts.URL, p, 48) })
	}
	wg.Wait()
	for i := range want {
		require.Equal(t, want[i], got[i], "prompt %q", storyPrompts[i])
	}
	q, busy := ts.sched.Load()
	require.Zero(t, q+busy)
	// They did share steps: run one after the other, the 8·48 tokens
	// would take 8·48 steps (a prompt step gives the first token). How
	// many they shared depends on when each arrived.
	_, metrics := get(t, ts.URL+"/metrics")
	steps := regexp.MustCompile(`(?m)^minerva_steps_total (\d+)$`).FindSubmatch(metrics)
	require.NotNil(t, steps)
	n, err := strconv.Atoi(string(steps[1]))
	require.NoError(t, err)
	require.Less(t, n, 8*48, "steps for 384 tokens of 8 requests")
	t.Logf("8 requests of 48 tokens in %d steps", n)
}

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(bytes.TrimSpace(b))
}
