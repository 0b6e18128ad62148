package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime/serve"
)

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSpace(l.b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// loadRequest is one client's request and what it saw.
type loadRequest struct {
	chat       bool
	body       string
	disconnect bool // read two events, then hang up
	want       string

	id     string
	text   string
	finish string
	tokens int
	done   bool // saw [DONE]
}

var words = strings.Fields("once upon a time there was a little girl named lily she loved to play outside in the park " +
	"one day she saw a big red ball and wanted it but it was too high her mom said no")

func randomPrompt(r *rand.Rand) string {
	n := 1 + r.IntN(60)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = words[r.IntN(len(words))]
	}
	return strings.Join(ws, " ")
}

// streamOne sends a streaming request and reads it as a client does.
func streamOne(ctx context.Context, url string, q *loadRequest) error {
	path := "/v1/completions"
	if q.chat {
		path = "/v1/chat/completions"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+path, strings.NewReader(q.body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	events := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			q.done = true
			break
		}
		var c struct {
			ID      string `json:"id"`
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				Finish *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return err
		}
		if q.id == "" {
			q.id = c.ID
		} else if q.id != c.ID {
			return fmt.Errorf("chunk ids %s and %s in one stream", q.id, c.ID)
		}
		for _, ch := range c.Choices {
			q.text += ch.Text + ch.Delta.Content
			if ch.Finish != nil {
				q.finish = *ch.Finish
			}
		}
		if c.Usage != nil {
			q.tokens = c.Usage.CompletionTokens
		}
		events++
		if q.disconnect && events == 2 {
			return nil // the deferred cancel and Close hang up mid-stream
		}
	}
	return sc.Err()
}

// 64 clients at once on 8 slots, prompts of random length, a fifth of
// them hanging up mid-stream: every other request completes with [DONE],
// its greedy text equal to its text alone; no request is lost or answered
// twice (one log line and one id each); every slot and queue place is
// free afterwards. The load runs twice, and after the second the process is
// where the first left it (memoryAfter): a request leaves nothing behind.
func TestLoadWithDisconnects(t *testing.T) {
	var logs lockedBuffer
	opts := serve.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	ts := startServer(t, serverConfig{slots: 8, ctx: 256, queue: 64, chunk: 32, opts: opts})
	solo := startServer(t, serverConfig{slots: 1, ctx: 256})
	r := rand.New(rand.NewPCG(17, 1))
	reqs := make([]*loadRequest, 64)
	for i := range reqs {
		q := &loadRequest{chat: i%3 == 1, disconnect: i%5 == 2}
		p := randomPrompt(r)
		n := 8 + r.IntN(40)
		if q.chat {
			q.body = jsonBody(map[string]any{"messages": []any{map[string]any{"role": "user", "content": p}},
				"max_tokens": n, "temperature": 0, "stream": true, "stream_options": map[string]any{"include_usage": true}})
		} else {
			q.body = jsonBody(map[string]any{"prompt": p, "max_tokens": n, "temperature": 0, "stream": true,
				"stream_options": map[string]any{"include_usage": true}})
		}
		if !q.disconnect {
			// What the request gives alone, on a one-slot server.
			w := &loadRequest{chat: q.chat, body: q.body}
			require.NoError(t, streamOne(context.Background(), solo.URL, w))
			q.want = w.text
		}
		reqs[i] = q
	}
	runLoad(t, ts, &logs, reqs)
	first := settle(t)
	runLoad(t, ts, &logs, reqs)
	second := settle(t)
	t.Logf("after the first run: %s; after the second: %s", first, second)
	require.NoError(t, second.within(first))
	_, metrics := get(t, ts.URL+"/metrics")
	m := string(metrics)
	require.Contains(t, m, "minerva_slots_busy 0\n")
	require.Contains(t, m, "minerva_queue_depth 0\n")
	require.Contains(t, m, `minerva_requests_total{code="200",endpoint="/v1/chat/completions"} 42`)
	require.Contains(t, m, `minerva_requests_total{code="200",endpoint="/v1/completions"} 86`)
	require.Contains(t, m, "minerva_time_to_first_token_seconds_count 128")
}

// runLoad sends every request of reqs at once (fresh copies) and checks
// what each saw, then waits until the server has freed every slot and
// logged every request.
func runLoad(t *testing.T, ts *testServer, logs *lockedBuffer, tmpl []*loadRequest) {
	t.Helper()
	reqs := make([]*loadRequest, len(tmpl))
	for i, q := range tmpl {
		reqs[i] = &loadRequest{chat: q.chat, body: q.body, disconnect: q.disconnect, want: q.want}
	}
	before := len(logs.lines())
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	for i, q := range reqs {
		wg.Go(func() { errs[i] = streamOne(context.Background(), ts.URL, q) })
	}
	wg.Wait()
	ids := map[string]bool{}
	for i, q := range reqs {
		require.NoError(t, errs[i], "request %d", i)
		require.NotEmpty(t, q.id)
		require.False(t, ids[q.id], "id %s answered twice", q.id)
		ids[q.id] = true
		if q.disconnect {
			continue
		}
		require.True(t, q.done, "request %d ends with [DONE]", i)
		require.Contains(t, []string{"stop", "length"}, q.finish, "request %d", i)
		require.Positive(t, q.tokens)
		require.Equal(t, q.want, q.text, "request %d: its text alone", i)
	}
	// Hung-up clients are noticed by the server as their connections
	// close; wait (without a time limit of the test's own) until each has
	// left its slot and logged its line.
	deadline := time.Now().Add(time.Minute)
	for {
		q, busy := ts.sched.Load()
		if q+busy == 0 && len(logs.lines())-before == len(reqs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %d queued, %d busy, %d of %d requests logged", q, busy, len(logs.lines())-before, len(reqs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	gone := 0
	for _, l := range logs.lines()[before:] {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		require.Equal(t, "request", rec["msg"])
		require.EqualValues(t, 200, rec["status"])
		if rec["finish"] == "client gone" || rec["finish"] == "cancelled" {
			gone++
		}
	}
	require.LessOrEqual(t, gone, 13, "only the clients that hung up")
}

// memoryAfter is the process after a load run, its connections closed and
// a garbage collection: the Go heap in use, the goroutines, and the
// resident set (0 where /proc/self/status is not).
type memoryAfter struct {
	heap, rss  uint64
	goroutines int
}

func (m memoryAfter) String() string {
	return fmt.Sprintf("heap %.2f MiB, %d goroutines, RSS %.1f MiB", float64(m.heap)/(1<<20), m.goroutines, float64(m.rss)/(1<<20))
}

// The bounds of a second run against the first: the heap may grow by what
// the metrics, the log buffer (its capacity doubles) and the allocator's own
// bookkeeping add — 0.2 MiB when this was written — and no more than 512
// KiB, which 64 requests each leaving 8 KiB behind (a sequence's token
// history, text buffers and events) would pass; the resident set by the
// runtime's retained spans. A goroutine left per request fails at once.
const (
	heapSlack = 512 << 10
	rssSlack  = 16 << 20
)

func (m memoryAfter) within(base memoryAfter) error {
	if m.goroutines > base.goroutines {
		return fmt.Errorf("%d goroutines, %d after the first run", m.goroutines, base.goroutines)
	}
	if m.heap > base.heap+heapSlack {
		return fmt.Errorf("heap grew from %d to %d bytes (bound %d)", base.heap, m.heap, heapSlack)
	}
	if base.rss > 0 && m.rss > base.rss+rssSlack {
		return fmt.Errorf("RSS grew from %d to %d bytes (bound %d)", base.rss, m.rss, rssSlack)
	}
	return nil
}

// settle closes the client's idle connections, waits until the goroutine
// count stops falling (the server's connection goroutines end as their
// peers close), collects garbage, returns freed memory to the system and
// measures.
func settle(t *testing.T) memoryAfter {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	n, still := goruntime.NumGoroutine(), 0
	for deadline := time.Now().Add(time.Minute); still < 50; {
		time.Sleep(10 * time.Millisecond)
		if m := goruntime.NumGoroutine(); m < n {
			n, still = m, 0
		} else {
			still++
		}
		if time.Now().After(deadline) {
			t.Fatalf("the goroutine count never settled (%d)", n)
		}
	}
	debug.FreeOSMemory() // a GC, then the freed spans back to the system
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return memoryAfter{heap: ms.HeapInuse, rss: residentBytes(), goroutines: n}
}

// residentBytes is VmRSS from /proc/self/status, 0 without it.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
