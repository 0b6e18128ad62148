package serve_test

import (
	"context"
	"errors"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/runtime/serve"
)

func gateScheduler(t *testing.T, slots, ctx int, cfg serve.Config) (*gateProgram, *serve.Scheduler) {
	t.Helper()
	m := loadStories(t)
	p := newGateProgram(slots, ctx, m.tok.VocabSize())
	s, err := serve.New(p, m.tok, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() {
			// Steps blocked on the gate may still be asked for.
			for {
				select {
				case p.gate <- struct{}{}:
				case <-done:
					return
				}
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.Shutdown(ctx)
		close(done)
	})
	return p, s
}

func prompt(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(1 + i%200)
	}
	return ids
}

func greedy() serve.Sampling { return serve.Sampling{} }

// next returns the stream's next event, letting steps run one at a time
// until it comes. A step is let through only when the scheduler waits at
// the gate, and then every event of the steps before has been pushed, so
// no step runs ahead of the test; an idle scheduler has pushed everything.
func next(t *testing.T, p *gateProgram, s *serve.Scheduler, st *serve.Stream) serve.Event {
	t.Helper()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		if ev, err := st.Next(done); err == nil {
			return ev
		}
		for !p.waiting.Load() {
			if q, busy := s.Load(); q+busy == 0 {
				break
			}
			goruntime.Gosched()
		}
		if ev, err := st.Next(done); err == nil {
			return ev
		}
		if !p.waiting.Load() {
			t.Fatal("the scheduler is idle and the stream has no event")
		}
		p.step()
	}
}

// A client that goes away frees its slot before the next step: after the
// cancellation at most the step already under way carries its row, and
// its stream ends with FinishCancelled.
func TestCancelFreesSlotWithinOneStep(t *testing.T) {
	p, s := gateScheduler(t, 2, 64, serve.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := s.Submit(ctx, &serve.Request{Prompt: prompt(3), MaxTokens: 40, Sampling: greedy()})
	require.NoError(t, err)
	other, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(5), MaxTokens: 40, Sampling: greedy()})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		ev := next(t, p, s, st)
		require.False(t, ev.Done)
	}
	_, busy := s.Load()
	require.Equal(t, 2, busy)
	cancel()
	at := p.stepCount()
	var ev serve.Event
	for !ev.Done {
		ev = next(t, p, s, st)
	}
	require.Equal(t, serve.FinishCancelled, ev.Finish)
	require.LessOrEqual(t, p.stepsWith(0, at), 1, "steps with the cancelled slot after the cancellation")
	_, busy = s.Load()
	require.Equal(t, 1, busy)
	// The other request goes on to its end.
	for ev = next(t, p, s, other); !ev.Done; ev = next(t, p, s, other) {
	}
	require.Equal(t, serve.FinishLength, ev.Finish)
	require.Equal(t, 40, ev.Tokens)
}

// Requests are admitted first come, first served; the queue is bounded
// (ErrQueueFull beyond it), and a queued request whose client leaves
// frees its place.
func TestFIFOAndQueueBound(t *testing.T) {
	p, s := gateScheduler(t, 1, 64, serve.Config{Queue: 2})
	a, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 2, Sampling: greedy()})
	require.NoError(t, err)
	next(t, p, s, a) // a holds the slot
	bctx, bcancel := context.WithCancel(context.Background())
	b, err := s.Submit(bctx, &serve.Request{Prompt: prompt(2), MaxTokens: 2, Sampling: greedy()})
	require.NoError(t, err)
	c, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(4), MaxTokens: 2, Sampling: greedy()})
	require.NoError(t, err)
	_, err = s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 2, Sampling: greedy()})
	require.ErrorIs(t, err, serve.ErrQueueFull)
	q, busy := s.Load()
	require.Equal(t, [2]int{2, 1}, [2]int{q, busy})
	bcancel()
	ev := next(t, p, s, b)
	require.True(t, ev.Done)
	require.Equal(t, serve.FinishCancelled, ev.Finish)
	d, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(6), MaxTokens: 2, Sampling: greedy()})
	require.NoError(t, err, "the cancelled request's place is free")
	// a ends, then c and d run in their order, each in slot 0.
	for _, st := range []*serve.Stream{a, c, d} {
		var ev serve.Event
		for !ev.Done {
			ev = next(t, p, s, st)
		}
		require.Equal(t, serve.FinishLength, ev.Finish)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var prompts []int
	for _, r := range p.steps {
		if r.Pos[0] == 0 {
			prompts = append(prompts, r.Len())
		}
	}
	require.Equal(t, []int{2, 4, 6}, prompts, "prompt steps in admission order")
}

// A long prompt is read in chunks of at most Config.Chunk rows, each step
// also carrying the decode row of the running sequence, which so never
// waits more than one chunk for its next token.
func TestLongPromptIsChunked(t *testing.T) {
	p, s := gateScheduler(t, 2, 256, serve.Config{Chunk: 16})
	a, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(3), MaxTokens: 100, Sampling: greedy()})
	require.NoError(t, err)
	next(t, p, s, a)
	at := p.stepCount()
	b, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(100), MaxTokens: 1, Sampling: greedy()})
	require.NoError(t, err)
	var ev serve.Event
	for !ev.Done {
		ev = next(t, p, s, b)
	}
	require.Equal(t, serve.FinishLength, ev.Finish)
	p.mu.Lock()
	defer p.mu.Unlock()
	chunks := 0
	for _, r := range p.steps[at:] {
		promptRows, decodeA := 0, 0
		for i, sl := range r.Slots {
			if sl == 1 {
				promptRows++
			} else if r.Pos[i] >= 3 {
				decodeA++
			}
		}
		if promptRows == 0 {
			continue
		}
		chunks++
		require.LessOrEqual(t, promptRows, 16)
		require.Equal(t, 1, decodeA, "the running sequence decodes in every step")
	}
	require.Equal(t, 7, chunks, "100 prompt rows in chunks of 16")
}

// Submit refuses what cannot run before it waits: prompts that do not fit
// the context with max_tokens, empty prompts, bad ids and settings.
func TestSubmitChecks(t *testing.T) {
	_, s := gateScheduler(t, 1, 32, serve.Config{})
	for _, c := range []struct {
		r    serve.Request
		want string
	}{
		{serve.Request{Prompt: prompt(32), MaxTokens: 1}, "the prompt has 32 tokens; the context is 32"},
		{serve.Request{Prompt: prompt(20), MaxTokens: 13}, "lower max_tokens to at most 12"},
		{serve.Request{Prompt: nil, MaxTokens: 1}, "the prompt is empty"},
		{serve.Request{Prompt: []int32{1, 99999}, MaxTokens: 1}, "outside the vocabulary"},
		{serve.Request{Prompt: prompt(2), MaxTokens: 0}, "max_tokens 0 must be ≥ 1"},
		{serve.Request{Prompt: prompt(2), MaxTokens: 1, Stop: []string{""}}, "a stop string is empty"},
		{serve.Request{Prompt: prompt(2), MaxTokens: 1, Sampling: serve.Sampling{Temperature: -1}}, "temperature -1"},
	} {
		_, err := s.Submit(context.Background(), &c.r)
		require.ErrorContains(t, err, c.want)
	}
	var ce serve.ContextError
	_, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(20), MaxTokens: 13})
	require.ErrorAs(t, err, &ce)
}

// Shutdown lets running requests finish while its context lasts, then
// cancels the rest with a final event; later submissions are refused.
func TestShutdownCancelsWithFinalEvent(t *testing.T) {
	p, s := gateScheduler(t, 1, 64, serve.Config{})
	a, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 50, Sampling: greedy()})
	require.NoError(t, err)
	b, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 50, Sampling: greedy()})
	require.NoError(t, err)
	next(t, p, s, a)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() { s.Shutdown(ctx); close(done) }()
	for {
		// Once Submit sees the scheduler closed, both are cancelled.
		// Until then the queue may fill (Shutdown's goroutine not yet
		// run on a busy machine): a full queue is an answer too.
		_, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 1})
		if errors.Is(err, serve.ErrShuttingDown) {
			break
		}
		if !errors.Is(err, serve.ErrQueueFull) {
			require.NoError(t, err)
		}
		goruntime.Gosched()
	}
	for _, st := range []*serve.Stream{a, b} {
		var ev serve.Event
		for !ev.Done {
			ev = next(t, p, s, st)
		}
		require.Equal(t, serve.FinishCancelled, ev.Finish)
	}
	<-done
}

// While a step is under way, requests for free slots wait in the queue
// until the loop admits them; the bound counts them beyond Queue, so the
// queue never grows past Queue plus the free slots.
func TestQueueBoundWithFreeSlots(t *testing.T) {
	p, s := gateScheduler(t, 3, 64, serve.Config{Queue: 1})
	a, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 5, Sampling: greedy()})
	require.NoError(t, err)
	next(t, p, s, a)         // a runs; the next step waits at the gate
	for i := 0; i < 3; i++ { // two for the free slots, one for the queue
		_, err := s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 5, Sampling: greedy()})
		require.NoError(t, err, "request %d", i)
	}
	_, err = s.Submit(context.Background(), &serve.Request{Prompt: prompt(2), MaxTokens: 5, Sampling: greedy()})
	require.ErrorIs(t, err, serve.ErrQueueFull)
	q, busy := s.Load()
	require.Equal(t, [2]int{3, 1}, [2]int{q, busy})
}
