package serve_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/passes"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu"
	"github.com/minerva-llm/minerva/runtime/serve"
	"github.com/minerva-llm/minerva/tokenizer"
)

// stories is stories260K compiled as `minervac run` compiles it: the
// pass pipeline's fused graph on the CPU backend.
type storiesModel struct {
	g   *ir.Graph
	w   eval.Weights
	tok *tokenizer.Tokenizer
}

var (
	storiesOnce sync.Once
	stories     storiesModel
	storiesErr  error
)

func loadStories(t testing.TB) storiesModel {
	t.Helper()
	path := shared.Path(t, "models/gguf/stories260K.gguf")
	storiesOnce.Do(func() { stories, storiesErr = loadModel(path) })
	require.NoError(t, storiesErr)
	return stories
}

// loadModel opens a model file and runs the pass pipeline on its graph.
// The source stays open for the test binary's life: the weights are its
// mapping.
func loadModel(path string) (storiesModel, error) {
	src, err := frontend.Open(path)
	if err != nil {
		return storiesModel{}, err
	}
	m, err := src.Build(arch.Options{})
	if err != nil {
		return storiesModel{}, err
	}
	list, err := passes.Pipeline()
	if err == nil {
		_, err = passes.Run(m.Graph, list, passes.Options{})
	}
	if err != nil {
		return storiesModel{}, err
	}
	tok, err := tokenizer.New(m.Vocab)
	if err != nil {
		return storiesModel{}, err
	}
	return storiesModel{g: m.Graph, w: m.Weights, tok: tok}, nil
}

// program compiles the model on the CPU backend with slots sequences of
// ctx positions.
func (m storiesModel) program(t testing.TB, slots, ctx int) runtime.Program {
	t.Helper()
	p, err := cpu.Backend{Threads: 2}.Compile(m.g, m.w, runtime.ProgramConfig{Context: ctx, Slots: slots})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// generate is what `minervac run` prints for prompt: runtime.Generate on a
// one-slot session, greedy, n tokens.
func (m storiesModel) generate(t testing.TB, prompt string, n int) string {
	t.Helper()
	p := m.program(t, 1, 512)
	s, err := runtime.NewProgramSession(p, 0)
	require.NoError(t, err)
	ids := m.tok.Encode(prompt, m.tok.AddBOS())
	res, err := runtime.Generate(context.Background(), s, ids, runtime.GenerateOptions{
		MaxTokens: n, Sampler: runtime.DefaultSampler(), EOS: m.tok.EOS(), Decode: m.tok.Decode})
	require.NoError(t, err)
	return res.Text
}

// testServer is a server on loopback with a scheduler of slots sequences.
type testServer struct {
	*httptest.Server
	srv   *serve.Server
	sched *serve.Scheduler
}

type serverConfig struct {
	slots, ctx, queue, chunk int
	opts                     serve.Options
}

func startServer(t testing.TB, c serverConfig) *testServer {
	t.Helper()
	m := loadStories(t)
	if c.ctx == 0 {
		c.ctx = 256
	}
	if c.slots == 0 {
		c.slots = 4
	}
	if c.opts.Logger == nil {
		c.opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.opts.Model == "" {
		c.opts.Model = "stories260K"
	}
	srv := serve.NewServer(c.opts)
	sched, err := serve.New(m.program(t, c.slots, c.ctx), m.tok, serve.Config{Queue: c.queue, Chunk: c.chunk, Observer: srv.Observer()})
	require.NoError(t, err)
	require.NoError(t, srv.Ready(sched))
	hs := httptest.NewServer(srv.Handler()) // listens on 127.0.0.1
	ts := &testServer{Server: hs, srv: srv, sched: sched}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.CloseClientConnections()
		srv.Shutdown(ctx)
		hs.Close()
	})
	return ts
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newLoopback serves srv on 127.0.0.1 for the test and returns its URL.
func newLoopback(t testing.TB, srv *serve.Server) string {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL
}

// get returns a GET's status and body.
func get(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// yield lets other goroutines run while a test waits for a state it
// polls (never for a duration).
func yield() { goruntime.Gosched() }

// shutdownGate shuts srv down at once, letting the steps its scheduler
// still asks of p through once the scheduler is closed (and so has
// cancelled everything: Shutdown does both in one critical section).
func shutdownGate(t testing.TB, p *gateProgram, srv *serve.Server, sched *serve.Scheduler) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		srv.Shutdown(ctx)
		close(done)
	}()
	for {
		// A probe is queued (and cancelled with the rest) or refused
		// until the scheduler is closed.
		_, err := sched.Submit(context.Background(), &serve.Request{Prompt: []int32{1}, MaxTokens: 1})
		if errors.Is(err, serve.ErrShuttingDown) {
			break
		}
		yield()
	}
	for {
		select {
		case <-done:
			return
		case p.gate <- struct{}{}:
		}
	}
}
