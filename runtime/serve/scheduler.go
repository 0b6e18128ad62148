package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/tokenizer"
)

// Errors Submit returns; the HTTP layer maps each to its status.
var (
	// ErrQueueFull: every slot is busy and the queue holds Config.Queue
	// requests (HTTP 429).
	ErrQueueFull = errors.New("the server is busy: every slot is in use and the queue is full; retry later")
	// ErrShuttingDown: the scheduler no longer admits requests (HTTP 503).
	ErrShuttingDown = errors.New("the server is shutting down")
)

// FinishReason says why a request's generation ended, in OpenAI's words
// where there is one.
type FinishReason string

const (
	FinishStop   FinishReason = "stop"   // an end-of-generation token or a stop string
	FinishLength FinishReason = "length" // max_tokens
	// FinishCancelled: the client went away, or the server shut down
	// before the request finished.
	FinishCancelled FinishReason = "cancelled"
	FinishError     FinishReason = "error" // the step failed (Event.Err)
)

// Config sizes a scheduler.
type Config struct {
	// Queue is the most requests waiting for a slot beyond the free ones;
	// one more is refused with ErrQueueFull. 0: 4·slots.
	Queue int
	// Chunk is the most prompt rows one step carries, all new prompts
	// together, beside the decode rows of every running sequence: a long
	// prompt is read in chunks, so it delays the running streams by one
	// chunk's time per step, never by its whole length. 0: DefaultChunk.
	Chunk int
	// Observer, when set, is told what happens (metrics).
	Observer Observer
}

// DefaultChunk is Config.Chunk's default. On two cores a 1B model's step
// is bound by arithmetic from about four rows on (TinyLlama Q4_0: one row
// and four rows cost the same, eight rows twice that), so larger chunks
// barely shorten a prompt's reading while each one delays every running
// stream by its whole length: 64 rows is about a third of a second there.
const DefaultChunk = 64

// Observer receives the scheduler's events; its methods are called from
// the scheduler's goroutine and must not block.
type Observer interface {
	// Step: a step of rows (prompt rows among them) took d.
	Step(rows, promptRows int, d time.Duration)
	// Token: a sequence produced a token; first marks its first (ttft is
	// then the time since Submit), else gap is the time since its last.
	Token(first bool, ttft, gap time.Duration)
	// Load: the queue's length and the busy slots changed.
	Load(queued, busy int)
}

// Request is one generation.
type Request struct {
	// Prompt is the tokens to continue (at least one).
	Prompt []int32
	// MaxTokens is the most tokens to generate (at least one); Prompt and
	// MaxTokens must fit the context: Submit refuses them otherwise, before
	// the request waits for anything.
	MaxTokens int
	Sampling  Sampling
	// Stop strings end generation when the text contains one; the text
	// ends before it.
	Stop []string
	// IgnoreEOS keeps generating after end-of-generation tokens.
	IgnoreEOS bool
	// Special decodes control tokens as their text (harmony output, which
	// a parser reads).
	Special bool
}

// Event is a piece of a request's output.
type Event struct {
	// Text is new final text (may be empty on the last event).
	Text string
	// Tokens is the number of tokens generated so far.
	Tokens int
	// Done marks the last event; Finish and Err say how it ended.
	Done   bool
	Finish FinishReason
	Err    error
}

// Stream is a submitted request's output, read with Next.
type Stream struct {
	// PromptTokens is the prompt's length.
	PromptTokens int

	mu     sync.Mutex
	evs    []Event
	wake   chan struct{}
	cancel context.CancelFunc
}

func newStream(n int, cancel context.CancelFunc) *Stream {
	return &Stream{PromptTokens: n, wake: make(chan struct{}, 1), cancel: cancel}
}

// push queues an event without ever blocking the scheduler.
func (st *Stream) push(e Event) {
	st.mu.Lock()
	st.evs = append(st.evs, e)
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// Next returns the next event, waiting for it; after the Done event it
// must not be called again. It fails only when ctx ends first.
func (st *Stream) Next(ctx context.Context) (Event, error) {
	for {
		st.mu.Lock()
		if len(st.evs) > 0 {
			e := st.evs[0]
			st.evs = st.evs[1:]
			st.mu.Unlock()
			return e, nil
		}
		st.mu.Unlock()
		select {
		case <-st.wake:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Cancel ends the request: its slot is freed before the next step, and
// its last event says FinishCancelled.
func (st *Stream) Cancel() { st.cancel() }

// seq is a request in the scheduler: queued, then holding a slot.
type seq struct {
	req     *Request
	ctx     context.Context
	out     *Stream
	slot    int
	read    int     // prompt tokens evaluated
	gen     []int32 // generated tokens
	history []int32 // prompt then generated (penalties)
	smp     *sampler
	text    *textOut
	submit  time.Time
	last    time.Time    // when the last token came
	end     FinishReason // set by the step that ends it
}

// Scheduler runs requests on a program's slots with continuous batching:
// each step carries one decode row for every sequence past its prompt and
// chunks of the prompts being read (runtime.Rows), so the weights are read
// once per step for all of them. Requests are admitted first come, first
// served; a sequence leaves its slot as soon as it ends or its client goes
// away.
type Scheduler struct {
	prog  runtime.Program
	tok   *tokenizer.Tokenizer
	cfg   Config
	slots int
	ctx   int

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*seq
	active  []*seq // in admission order
	free    []int  // free slots, lowest first
	closed  bool   // no more admissions
	stopped bool   // the loop has ended
	done    chan struct{}
}

// New starts a scheduler on prog (all its slots), which it owns from now
// on: nothing else may step or reset it while the scheduler runs.
func New(prog runtime.Program, tok *tokenizer.Tokenizer, cfg Config) (*Scheduler, error) {
	pc := prog.Config()
	if tok == nil {
		return nil, fmt.Errorf("serve: no tokenizer")
	}
	if cfg.Queue < 0 || cfg.Chunk < 0 {
		return nil, fmt.Errorf("serve: queue %d and chunk %d must be ≥ 0", cfg.Queue, cfg.Chunk)
	}
	if cfg.Queue == 0 {
		cfg.Queue = 4 * pc.Slots
	}
	if cfg.Chunk == 0 {
		cfg.Chunk = DefaultChunk
	}
	s := &Scheduler{prog: prog, tok: tok, cfg: cfg, slots: pc.Slots, ctx: pc.Context, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	for i := 0; i < pc.Slots; i++ {
		s.free = append(s.free, i)
	}
	go s.loop()
	return s, nil
}

// Slots is the number of sequences run at once; Context the positions of
// each.
func (s *Scheduler) Slots() int   { return s.slots }
func (s *Scheduler) Context() int { return s.ctx }

// Tokenizer is the model's tokenizer.
func (s *Scheduler) Tokenizer() *tokenizer.Tokenizer { return s.tok }

// Load reports the requests waiting and the slots in use.
func (s *Scheduler) Load() (queued, busy int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue), len(s.active)
}

// ContextError is a request that does not fit the context.
type ContextError struct{ Prompt, MaxTokens, Context int }

func (e ContextError) Error() string {
	if e.Prompt >= e.Context {
		return fmt.Sprintf("the prompt has %d tokens; the context is %d tokens, which must hold the prompt and at least one generated token", e.Prompt, e.Context)
	}
	return fmt.Sprintf("the prompt has %d tokens and max_tokens is %d: %d tokens, more than the context of %d (lower max_tokens to at most %d)",
		e.Prompt, e.MaxTokens, e.Prompt+e.MaxTokens, e.Context, e.Context-e.Prompt)
}

// fieldError is a bad request field: the HTTP layer names it (param).
type fieldError struct{ field, msg string }

func (e fieldError) Error() string { return e.msg }

// Submit checks r and queues it. The request ends when it finishes, when
// ctx ends (the client went away) or on Stream.Cancel; in each case its
// slot is free for the next step. Submit never blocks on the model.
func (s *Scheduler) Submit(ctx context.Context, r *Request) (*Stream, error) {
	if len(r.Prompt) == 0 {
		return nil, fieldError{"prompt", "the prompt is empty"}
	}
	limit := s.tok.VocabSize()
	for i, id := range r.Prompt {
		if id < 0 || int(id) >= limit {
			return nil, fieldError{"prompt", fmt.Sprintf("prompt token %d (#%d) is outside the vocabulary of %d", id, i, limit)}
		}
	}
	if r.MaxTokens < 1 {
		return nil, fieldError{"max_tokens", fmt.Sprintf("max_tokens %d must be ≥ 1", r.MaxTokens)}
	}
	if len(r.Prompt) >= s.ctx || len(r.Prompt)+r.MaxTokens > s.ctx {
		return nil, ContextError{len(r.Prompt), r.MaxTokens, s.ctx}
	}
	for _, st := range r.Stop {
		if st == "" {
			return nil, fieldError{"stop", "a stop string is empty"}
		}
	}
	smp, err := newSampler(r.Sampling)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	q := &seq{req: r, ctx: cctx, out: newStream(len(r.Prompt), cancel), slot: -1, smp: smp,
		text: newTextOut(s.tok, r.Special, r.Stop), submit: time.Now(),
		history: append(make([]int32, 0, len(r.Prompt)+min(r.MaxTokens, 1024)), r.Prompt...)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		cancel()
		return nil, ErrShuttingDown
	}
	// Requests for the free slots wait too until the loop admits them
	// (after the step under way), so they are counted beyond Queue.
	if len(s.queue) >= s.cfg.Queue+s.slots-len(s.active) {
		cancel()
		return nil, ErrQueueFull
	}
	s.queue = append(s.queue, q)
	// A request cancelled while it waits leaves the queue at once (the
	// loop wakes for it), so a crowd of departed clients never fills it.
	context.AfterFunc(cctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	s.observeLoad()
	s.cond.Broadcast()
	return q.out, nil
}

// observeLoad reports the load; s.mu is held.
func (s *Scheduler) observeLoad() {
	if s.cfg.Observer != nil {
		s.cfg.Observer.Load(len(s.queue), len(s.active))
	}
}

// Shutdown stops admitting requests, lets the running and queued ones
// finish until ctx ends, then cancels what is left (each gets its final
// event, FinishCancelled) and stops the loop. It returns when the loop has
// ended; the program is the caller's again. With ctx already done, the
// requests are cancelled before anyone sees the scheduler closed.
func (s *Scheduler) Shutdown(ctx context.Context) {
	cancelAll := func() {
		for _, q := range s.queue {
			q.out.cancel()
		}
		for _, q := range s.active {
			q.out.cancel()
		}
		s.cond.Broadcast()
	}
	s.mu.Lock()
	if ctx.Err() != nil {
		cancelAll()
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		cancelAll()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	for len(s.queue)+len(s.active) > 0 && !s.stopped {
		s.cond.Wait()
	}
	s.stopped = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.done
}

// finish ends q with its last event and frees its slot; s.mu is held.
func (s *Scheduler) finish(q *seq, reason FinishReason, err error) {
	if reason != FinishError && reason != FinishCancelled {
		if t := q.text.flush(); t != "" {
			q.out.push(Event{Text: t, Tokens: len(q.gen)})
		}
	}
	q.out.push(Event{Done: true, Finish: reason, Err: err, Tokens: len(q.gen)})
	q.out.cancel() // releases the context's resources
	if q.slot >= 0 {
		s.free = append(s.free, q.slot)
		for i := len(s.free) - 1; i > 0 && s.free[i] < s.free[i-1]; i-- {
			s.free[i], s.free[i-1] = s.free[i-1], s.free[i]
		}
		q.slot = -1
	}
}

// admit drops cancelled requests and moves queued ones into free slots,
// first come first served; s.mu is held. It reports whether anything is
// left to step.
func (s *Scheduler) admit() bool {
	keep := s.active[:0]
	for _, q := range s.active {
		if q.ctx.Err() != nil {
			s.finish(q, FinishCancelled, nil)
			continue
		}
		keep = append(keep, q)
	}
	clear(s.active[len(keep):])
	s.active = keep
	wait := s.queue[:0]
	for _, q := range s.queue {
		switch {
		case q.ctx.Err() != nil:
			s.finish(q, FinishCancelled, nil)
		case len(s.free) > 0:
			q.slot = s.free[0]
			s.free = s.free[1:]
			s.active = append(s.active, q)
		default:
			wait = append(wait, q)
		}
	}
	clear(s.queue[len(wait):])
	s.queue = wait
	s.observeLoad()
	return len(s.active) > 0
}

// loop steps the active sequences until Shutdown.
func (s *Scheduler) loop() {
	defer close(s.done)
	for {
		s.mu.Lock()
		for !s.admit() && !s.stopped {
			s.cond.Broadcast() // Shutdown waits for idleness
			s.cond.Wait()
		}
		if s.stopped {
			for _, q := range append(append([]*seq(nil), s.queue...), s.active...) {
				s.finish(q, FinishCancelled, nil)
			}
			s.queue, s.active = nil, nil
			s.observeLoad()
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		active := append([]*seq(nil), s.active...)
		s.mu.Unlock()

		err := s.step(active)

		s.mu.Lock()
		keep := s.active[:0]
		for _, q := range s.active {
			switch {
			case err != nil:
				// A failed step leaves its slots' caches undefined: every
				// sequence in it ends with the error.
				s.finish(q, FinishError, err)
			case q.end != "":
				s.finish(q, q.end, nil)
			default:
				keep = append(keep, q)
			}
		}
		clear(s.active[len(keep):])
		s.active = keep
		s.mu.Unlock()
	}
}

// step runs one step of the active sequences and samples the next token of
// each that has logits, marking those that end (seq.end).
//
// A new sequence does not clear its slot (Program.ResetSlot): it writes its
// cache rows from position 0 on, in order, and a row attends only to rows
// at positions up to its own, so it never reads what the slot's last
// sequence left. Clearing would zero the whole slot (TinyLlama at a 2048
// context: 92 MB) inside the loop, stalling every running stream for it:
// a tenth of the CPU time of a run of 32-token requests (BenchmarkScheduler)
// went there. TestCompletionMatchesRun reuses slots and holds each output to
// a fresh program's.
func (s *Scheduler) step(active []*seq) error {
	rows, owners, prompt := s.batch(active)
	if rows.Len() == 0 {
		return nil
	}
	start := time.Now()
	logits, err := runtime.StepRows(s.prog, rows)
	if err != nil {
		return err
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Step(rows.Len(), prompt, time.Since(start))
	}
	// Sampling and decoding are per sequence; a full sort of a 32000-token
	// vocabulary takes milliseconds, so several sequences sample at once.
	if len(owners) > 1 {
		var wg sync.WaitGroup
		for i, q := range owners {
			wg.Go(func() { s.next(q, logits[i]) })
		}
		wg.Wait()
	} else if len(owners) == 1 {
		s.next(owners[0], logits[0])
	}
	now := time.Now()
	for _, q := range owners {
		if s.cfg.Observer != nil {
			if len(q.gen) == 1 {
				s.cfg.Observer.Token(true, now.Sub(q.submit), 0)
			} else {
				s.cfg.Observer.Token(false, 0, now.Sub(q.last))
			}
		}
		q.last = now
	}
	return nil
}

// next samples q's next token from its logits row, streams the text that
// became final and decides whether q ends.
func (s *Scheduler) next(q *seq, logits []float32) {
	id := q.smp.next(logits, q.history)
	q.gen = append(q.gen, id)
	q.history = append(q.history, id)
	piece, stopped := q.text.add(id)
	if piece != "" {
		q.out.push(Event{Text: piece, Tokens: len(q.gen)})
	}
	switch {
	case stopped:
		q.end = FinishStop
	case !q.req.IgnoreEOS && s.tok.IsEOG(id):
		q.end = FinishStop
	case len(q.gen) >= q.req.MaxTokens:
		q.end = FinishLength
	case len(q.req.Prompt)+len(q.gen) > s.ctx:
		q.end = FinishLength // Submit's check makes this unreachable
	}
}

// batch builds a step: a decode row for each sequence past its prompt,
// then prompt chunks, first come first served, up to Config.Chunk prompt
// rows in all. owners[i] is the sequence whose logits are the step's i-th
// returned row; prompt counts the prompt rows.
func (s *Scheduler) batch(active []*seq) (r runtime.Rows, owners []*seq, prompt int) {
	r.Logits = []int{}
	for _, q := range active {
		if q.read == len(q.req.Prompt) && len(q.gen) > 0 {
			r.Add(q.slot, q.gen[len(q.gen)-1], int32(len(q.req.Prompt)+len(q.gen)-1))
			r.Logits = append(r.Logits, r.Len()-1)
			owners = append(owners, q)
		}
	}
	budget := s.cfg.Chunk
	for _, q := range active {
		p := q.req.Prompt
		if budget == 0 {
			break
		}
		if q.read == len(p) {
			continue
		}
		k := min(budget, len(p)-q.read)
		for j := q.read; j < q.read+k; j++ {
			r.Add(q.slot, p[j], int32(j))
		}
		q.read += k
		budget -= k
		prompt += k
		if q.read == len(p) {
			r.Logits = append(r.Logits, r.Len()-1)
			owners = append(owners, q)
		}
	}
	return r, owners, prompt
}
