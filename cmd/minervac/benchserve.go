package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/serve"
)

type benchServeCmd struct {
	Target    string `arg:"" help:"URL of a running OpenAI-compatible server (http://HOST:PORT), or a model file to serve here on loopback for the run."`
	Clients   string `help:"Comma-separated concurrency levels; each runs --requests requests with that many clients at once." default:"1,4,8,16"`
	Requests  int    `help:"Requests per level (0: 4 per client, at least 8)." default:"0"`
	PromptMin int    `name:"prompt-min" help:"Fewest prompt tokens of a request (lengths are drawn uniformly)." default:"16"`
	PromptMax int    `name:"prompt-max" help:"Most prompt tokens of a request." default:"128"`
	MaxTokens int    `name:"max-tokens" help:"Tokens each request generates (ignore_eos is set, so each generates exactly this many)." default:"64"`
	Seed      uint64 `help:"Seed of the prompts." default:"1"`
	APIKey    string `name:"api-key" help:"Bearer key for the server." env:"MINERVA_API_KEY"`
	JSON      bool   `help:"Print one JSON object instead of a table."`
	// For a model file:
	Parallel int    `help:"With a model file: slots of the server (0: the largest --clients level)." default:"0"`
	Ctx      int    `help:"With a model file: positions of each slot (0: enough for --prompt-max + --max-tokens)." default:"0"`
	Chunk    int    `help:"With a model file: most prompt tokens per step." default:"64"`
	Target2  string `name:"backend" short:"t" help:"With a model file: goasm (the CPU) or reference." default:"goasm"`
	// CPUProfile covers the server (with a model file) and the clients.
	CPUProfile string `name:"cpuprofile" help:"Write a pprof CPU profile of the load (server and clients, in this process with a model file) to this file." type:"path"`
}

// benchLevel is one concurrency level's result.
type benchLevel struct {
	Clients      int     `json:"clients"`
	Requests     int     `json:"requests"`
	Errors       int     `json:"errors"`
	OutputTokens int     `json:"output_tokens"`
	WallS        float64 `json:"wall_s"`
	OutputTokS   float64 `json:"output_tokens_s"`
	TTFTP50Ms    float64 `json:"ttft_p50_ms"`
	TTFTP99Ms    float64 `json:"ttft_p99_ms"`
	ITLP50Ms     float64 `json:"itl_p50_ms"`
	ITLP99Ms     float64 `json:"itl_p99_ms"`
	FirstError   string  `json:"first_error,omitempty"`
}

func (c *benchServeCmd) Run(bo *runtime.Options) error {
	var levels []int
	for _, f := range strings.Split(c.Clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return usageError{fmt.Sprintf("--clients: %q is not a client count ≥ 1", f)}
		}
		levels = append(levels, n)
	}
	switch {
	case c.PromptMin < 1 || c.PromptMax < c.PromptMin:
		return usageError{fmt.Sprintf("--prompt-min %d and --prompt-max %d: need 1 ≤ min ≤ max", c.PromptMin, c.PromptMax)}
	case c.MaxTokens < 1:
		return usageError{fmt.Sprintf("--max-tokens %d must be ≥ 1", c.MaxTokens)}
	case c.Requests < 0:
		return usageError{fmt.Sprintf("--requests %d must be ≥ 0", c.Requests)}
	}
	url := strings.TrimRight(c.Target, "/")
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		u, stop, err := c.serveHere(bo, slices.Max(levels))
		if err != nil {
			return err
		}
		defer stop()
		url = u
	}
	model, vocab, err := c.modelInfo(url)
	if err != nil {
		return err
	}
	load := loadAverage()
	stopProfile, err := startCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	var out []benchLevel
	for _, n := range levels {
		out = append(out, c.level(url, model, vocab, n))
	}
	stopProfile()
	if c.JSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"server": url, "model": model, "load_average": load,
			"prompt_tokens": []int{c.PromptMin, c.PromptMax}, "max_tokens": c.MaxTokens, "levels": out})
	}
	fmt.Fprintf(os.Stderr, "minervac: %s (%s), prompts %d–%d tokens, %d generated each, load average %s\n",
		url, model, c.PromptMin, c.PromptMax, c.MaxTokens, load)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\trequests\terrors\tout tok/s\tTTFT p50 ms\tTTFT p99 ms\tITL p50 ms\tITL p99 ms\twall s\t")
	for _, l := range out {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.1f\t\n", l.Clients, l.Requests, l.Errors, l.OutputTokS,
			l.TTFTP50Ms, l.TTFTP99Ms, l.ITLP50Ms, l.ITLP99Ms, l.WallS)
	}
	tw.Flush()
	for _, l := range out {
		if l.FirstError != "" {
			fmt.Fprintf(os.Stderr, "minervac: %d clients: first error: %s\n", l.Clients, l.FirstError)
		}
	}
	return nil
}

// serveHere serves the model file on a loopback port for the run.
func (c *benchServeCmd) serveHere(bo *runtime.Options, clients int) (string, func(), error) {
	sc := &serveCmd{Model: c.Target, Parallel: c.Parallel, Ctx: c.Ctx, Chunk: c.Chunk, Target: c.Target2}
	if sc.Parallel == 0 {
		sc.Parallel = clients
	}
	if sc.Ctx == 0 {
		sc.Ctx = c.PromptMax + c.MaxTokens + 1
	}
	srv := serve.NewServer(serve.Options{Model: "bench", APIKey: c.APIKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var m *runnable
	if err := sc.load(bo, srv, "", &m); err != nil {
		if m != nil {
			m.Close()
		}
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.Close()
		return "", nil, err
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Close()
		m.Close()
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// modelInfo asks the server for its model id and vocabulary size (the
// prompts are token ids below it; 256 when the server does not say).
func (c *benchServeCmd) modelInfo(url string) (string, int, error) {
	req, err := http.NewRequest("GET", url+"/v1/models", nil)
	if err != nil {
		return "", 0, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	var r struct {
		Data []struct {
			ID   string `json:"id"`
			Meta struct {
				NVocab int `json:"n_vocab"`
			} `json:"meta"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Data) == 0 {
		return "", 0, fmt.Errorf("%s/v1/models: status %d, no model listed", url, resp.StatusCode)
	}
	vocab := r.Data[0].Meta.NVocab
	if vocab <= 0 {
		vocab = 256
	}
	return r.Data[0].ID, vocab, nil
}

// level runs the requests with n clients at once.
func (c *benchServeCmd) level(url, model string, vocab, n int) benchLevel {
	total := c.Requests
	if total == 0 {
		total = max(8, 4*n)
	}
	rng := rand.New(rand.NewPCG(c.Seed, uint64(n)))
	bodies := make([][]byte, total)
	for i := range bodies {
		ids := make([]int, c.PromptMin+rng.IntN(c.PromptMax-c.PromptMin+1))
		for j := range ids {
			// Ids past the first few hundred are ordinary pieces in the
			// vocabularies of llama and gpt2 alike.
			ids[j] = min(vocab-1, 300+rng.IntN(max(1, min(vocab, 20000)-300)))
		}
		bodies[i], _ = json.Marshal(map[string]any{"model": model, "prompt": ids, "max_tokens": c.MaxTokens,
			"temperature": 0, "ignore_eos": true, "stream": true, "stream_options": map[string]any{"include_usage": true}})
	}
	var mu sync.Mutex
	res := benchLevel{Clients: n, Requests: total}
	var ttft, itl []float64
	next := make(chan []byte)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < n; w++ {
		wg.Go(func() {
			for body := range next {
				t0, gaps, tokens, err := c.oneRequest(url, body)
				mu.Lock()
				if err != nil {
					res.Errors++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
				} else {
					ttft = append(ttft, t0)
					itl = append(itl, gaps...)
					res.OutputTokens += tokens
				}
				mu.Unlock()
			}
		})
	}
	for _, b := range bodies {
		next <- b
	}
	close(next)
	wg.Wait()
	res.WallS = time.Since(start).Seconds()
	res.OutputTokS = float64(res.OutputTokens) / res.WallS
	res.TTFTP50Ms, res.TTFTP99Ms = percentile(ttft, 50)*1e3, percentile(ttft, 99)*1e3
	res.ITLP50Ms, res.ITLP99Ms = percentile(itl, 50)*1e3, percentile(itl, 99)*1e3
	return res
}

// requestSeq numbers bench-serve's requests for their idempotency keys.
var requestSeq atomic.Int64

// oneRequest streams one completion: the time to its first text, the gaps
// between later pieces, and the tokens the usage chunk counts.
func (c *benchServeCmd) oneRequest(url string, body []byte) (float64, []float64, int, error) {
	req, err := http.NewRequest("POST", url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// A server that closes kept-alive connections (llama-server does) races
	// the client's reuse of them: net/http retries a request that failed on
	// a reused connection before anything was written only when it is
	// idempotent, which for a POST this key declares. Each request is sent
	// once: the key is unique.
	req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-serve-%d-%d", os.Getpid(), requestSeq.Add(1)))
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, nil, 0, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var first float64
	var gaps []float64
	var last time.Time
	tokens := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return 0, nil, 0, fmt.Errorf("bad chunk %q: %v", data, err)
		}
		if ch.Usage != nil {
			tokens = ch.Usage.CompletionTokens
		}
		if len(ch.Choices) == 0 || ch.Choices[0].Text == "" {
			continue
		}
		now := time.Now()
		if last.IsZero() {
			first = now.Sub(start).Seconds()
		} else {
			gaps = append(gaps, now.Sub(last).Seconds())
		}
		last = now
	}
	if err := sc.Err(); err != nil {
		return 0, nil, 0, err
	}
	if last.IsZero() {
		return 0, nil, 0, fmt.Errorf("no text came")
	}
	return first, gaps, tokens, nil
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// loadAverage is /proc/loadavg's first three fields ("" elsewhere): a
// benchmark on a shared machine reports how busy it was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
