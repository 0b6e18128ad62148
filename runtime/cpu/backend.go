// Package cpu is the CPU backend, registered as "goasm": weights stay in
// their file format (quantized rows are read in place from the mmapped
// model), activations are quantized once per matmul to the format ggml pairs
// with the weight type, and the matmul family, attention and the other ops
// run row-parallel on a persistent worker pool.
//
// Activate it with a blank import:
//
//	import _ "github.com/minerva-llm/minerva/runtime/cpu"
package cpu

import (
	"fmt"
	goruntime "runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/minerva-llm/minerva/internal/mmap"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/ir/rope"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// Name is the backend's registry key.
const Name = "goasm"

func init() { runtime.RegisterBackend(Backend{}) }

// Backend compiles graphs for the CPU. Threads is the number of workers of
// each program: 0 means the program config's Options.Threads, and when
// that is 0 too DefaultThreads (the physical cores).
type Backend struct {
	Threads int
}

func (Backend) Name() string { return Name }

// threads resolves the worker count.
func (b Backend) threads(o runtime.Options) int {
	if b.Threads > 0 {
		return b.Threads
	}
	if o.Threads > 0 {
		return o.Threads
	}
	return DefaultThreads()
}

// DefaultThreads is the worker count when neither Backend.Threads nor
// Options.Threads sets one: the physical cores among GOMAXPROCS CPUs.
func DefaultThreads() int { return physicalCores() }

// cval is a value that depends on weights only: raw bytes in dtype dt
// (mmapped for plain weights), and its float32 form when some op needs it.
type cval struct {
	dt    ir.DType
	shape []int64
	data  []byte
	f32   []float32
	// packed is the matrix interleaved for the group kernels (kern.Pack),
	// when it feeds a matmul and the active kernels have them for dt.
	packed *kern.Packed
	// experts are a MoE expert tensor's [E, n, k] matrices packed one per
	// expert (packableExperts), nil until a step selects the expert, all
	// in expertArena (one anonymous mapping; expertUnmap releases it).
	experts     []*kern.Packed
	expertArena []byte
	expertUnmap func() error
	// mem is the mapping that data lives in when a fold made data (a
	// concatenation), for release once nothing reads data; nil for bytes
	// the value does not own (a file's, or its operand's for a reshape).
	mem *offHeap
}

// rows returns N, K and the bytes of one row of a 2-D constant.
func (c *cval) matrix() (n, k, rowBytes int, err error) {
	if len(c.shape) != 2 {
		return 0, 0, 0, fmt.Errorf("weight matrix has shape %v", c.shape)
	}
	rb, err := c.dt.RowBytes(c.shape[1])
	return int(c.shape[0]), int(c.shape[1]), int(rb), err
}

func numel(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

// state is one KV cache: per slot C rows of Width elements (the slot's
// part, slotStride elements after the previous slot's), in one of f32,
// f16 and q8_0 (q8: blocks of 32 elements, 34 bytes each).
type state struct {
	info runtime.StateInfo
	f32  []float32
	f16  []uint16
	q8   []byte
	// A slot's rows are stored head by head: head h's rows, one per
	// position, are the ctx·hw elements from h·ctx·hw of the slot's part
	// (at). Attention walks one KV head's rows position after position,
	// and with the heads side by side in each row (rows 512 bytes apart
	// in TinyLlama's f16 cache, 128 of them its head's) a decode step read
	// a cold cache at about half the speed of dense rows (kern's
	// BenchmarkGroupedAttentionCold: 110–180 against 64–87 ns a row), the
	// hardware prefetchers starting over every eight rows at each 4 KB
	// page.
	// hw is the elements of one head's row (head_dim for keys, the value
	// width per head for values; the whole row for a state that no
	// attention reads) and ctx the rows of a slot (the program's context).
	ctx, hw int
	heads   bool // hw was set by an op that reads or writes heads
	// slotStride is the elements from one slot's part to the next: ctx
	// rows of Width and then the other states' parts (kvArena).
	slotStride int
}

// at returns the element offset of head h's row at position pos in the
// slot whose part starts at element base (exec.base).
func (s *state) at(base, pos, h int) int { return base + (h*s.ctx+pos)*s.hw }

// setHeads lays the state out as n heads of hw elements, as attention or
// a QKV op reads and writes it; every op must agree.
func (s *state) setHeads(hw, n int) error {
	if hw <= 0 || n <= 0 || hw*n != s.info.Width {
		return fmt.Errorf("state %q: %d heads of %d elements do not make its rows of %d", s.info.Name, n, hw, s.info.Width)
	}
	if s.heads && s.hw != hw {
		return fmt.Errorf("state %q is read as heads of %d elements and of %d", s.info.Name, s.hw, hw)
	}
	s.hw, s.heads = hw, true
	return nil
}

// node is one non-leaf, non-constant value to compute per step.
type node struct {
	v    *ir.Value
	idx  int
	args []int
	// tpow and elems give the element count: elems · T^tpow.
	elems int64
	tpow  int
	// the state this value aliases (kvwrite results), or -1
	st int
	// arena is the value's offset in float32s per token of the step's
	// arena (the memory plan's arena_offset / 4), or -1: a buffer of its
	// own.
	arena int64
	// What the attributes say, read once at compile rather than from
	// the attribute map at every step (1–2 µs an op, about 135 µs of a
	// TinyLlama decode step): the operands of the matmul ops, and the
	// rotation of the rope and QKV ops.
	parts ir.Parts
	rope  rope.Params
	// step is the op's entry in the op table (steps), and attn the
	// attention ops' and QKV op's head shape (n_head, n_kv_head,
	// head_dim and the attention attributes): looked up once, since every
	// map read at step time is a few cache misses after the weights
	// streamed through (TinyLlama's decode step made 200 of them).
	step func(*exec, *node) error
	attn attnShape
	// ix is parts' operands as value indexes (-1 where absent), for the
	// same reason: p.index is a map.
	ix partIndex
	// order is the node's index in program.nodes, and next that of the
	// first matmul after it (the step's first after the last; -1 when
	// there is none): what the workers read ahead in its runs' tails
	// (pool.run).
	order, next int
	// one is a matmul's plan for one activation row (decodePlan), made
	// at its first use.
	one *oneRow
}

// partIndex is the value index of each of a matmul op's operands (ir.Parts),
// -1 for those it does not have.
type partIndex struct {
	x, w, gain, bias, residual, pos, kCache, vCache, qNorm, kNorm int
}

// indexParts returns parts' operands as value indexes.
func (p *program) indexParts(parts ir.Parts) partIndex {
	at := func(v *ir.Value) int {
		if v == nil {
			return -1
		}
		return p.index[v]
	}
	return partIndex{x: at(parts.X), w: at(parts.W), gain: at(parts.Gain), bias: at(parts.Bias),
		residual: at(parts.Residual), pos: at(parts.Pos), kCache: at(parts.KCache), vCache: at(parts.VCache),
		qNorm: at(parts.QNorm), kNorm: at(parts.KNorm)}
}

type program struct {
	mu     sync.Mutex
	ks     kern.Kernels // the kernel variant (Options.CPUKernels)
	cfg    runtime.ProgramConfig
	sig    runtime.Signature
	g      *ir.Graph
	pool   *pool
	consts []*cval // by value index; nil for non-constants
	stOf   []int   // by value index: the state a value is or aliases, or -1
	states []*state
	kv     *kvArena // the f32 and f16 states' memory
	nodes  []node
	index  map[*ir.Value]int
	tokIdx int
	posIdx int
	logits int

	// per-step storage
	vals [][]float32 // f32 activations by value index
	bufs [][]float32 // owned buffers by value index (values the plan does not place)
	// arena holds every planned activation of a step: arenaPT float32s
	// per token (the graph's arena_bytes_per_token / 4), so activation
	// memory is bounded by the step's tokens, not the layer count.
	arena   []float32
	arenaPT int64
	// mem holds the mappings that the states, the arena and folded
	// weights live in (offheap.go), released by Close.
	mem        *offHeapSet
	scratch    [][]float32 // per worker
	acts       []byte
	bounds     []int // matmul work item boundaries (splitRows)
	headBounds []int // the QKV op's (splitHeads)
	xnorm      []float32
	xsel       []float32 // the logits matmul's wanted activation rows
	rsel       []float32 // and its residual's
	// logitRowsDone counts the rows the logits matmul computed, over the
	// program's life (tests: a prompt step asking for its last row
	// computes one).
	logitRowsDone int64
	part          []float32   // attention's partials when split across the workers
	attnPart      [][]float32 // per worker: one attention item's partials
	tokenRuns     []int       // attentionTokenRuns' run boundaries
	moeBuf        *moeBuffers
	// q82: round Q8_0 activations with ik_llama.cpp's Q8_2 recipe (the
	// graph's act_rounding attribute; refround.go).
	q82 bool
	// packing is the mapping that prepare packs weight matrices into
	// (packarena.go), nil for a mapping each.
	packing *packArena
	// readBy says, by value index, how a constant is read (constUses):
	// prepare and fold release the source bytes of those read only once.
	readBy []constUse
	closed bool
	// opTimes, while KernelTimes runs, is each node's time in the step.
	opTimes []time.Duration
}

func (b Backend) Compile(g *ir.Graph, w eval.Weights, cfg runtime.ProgramConfig) (runtime.Program, error) {
	if cfg.Context <= 0 {
		return nil, fmt.Errorf("context length %d must be positive", cfg.Context)
	}
	if cfg.Slots < 0 {
		return nil, fmt.Errorf("slot count %d must be positive", cfg.Slots)
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	sig, err := runtime.CheckGraph(g)
	if err != nil {
		return nil, err
	}
	p := &program{cfg: cfg, sig: sig, g: g, index: map[*ir.Value]int{}, tokIdx: -1, posIdx: -1, mem: &offHeapSet{}}
	// A program dropped without Close (or a Compile that fails) gives its
	// mappings back when collected.
	goruntime.AddCleanup(p, func(s *offHeapSet) { s.releaseAll() }, p.mem)
	if p.ks, err = kern.Use(cfg.Options.CPUKernels); err != nil {
		return nil, err
	}
	if p.q82, err = actRounding(g); err != nil {
		return nil, err
	}
	n := len(g.Values)
	p.consts = make([]*cval, n)
	p.stOf = make([]int, n)
	p.vals = make([][]float32, n)
	p.bufs = make([][]float32, n)
	for i, v := range g.Values {
		p.index[v] = i
		p.stOf[i] = -1
	}
	if err := p.allocStates(sig.States, cfg.Context, cfg.Slots); err != nil {
		return nil, err
	}
	stateIdx := map[string]int{}
	for i, info := range sig.States {
		stateIdx[info.Name] = i
	}
	isConst := ir.ConstValues(g)
	p.readBy = constUses(g, isConst, p.index)
	p.reservePacking(g, isConst)
	for i, v := range g.Values {
		switch {
		case v.Op == ir.OpInput:
			if v.Name() == "tokens" {
				p.tokIdx = i
			} else {
				p.posIdx = i
			}
		case v.Op == ir.OpState:
			p.stOf[i] = stateIdx[v.Name()]
		case v.Op == ir.OpWeight:
			c, err := loadWeight(v, w)
			if err != nil {
				return nil, err
			}
			p.consts[i] = c
		case isConst[v]:
			c, err := p.fold(v)
			if err != nil {
				return nil, fmt.Errorf("%v (%s): folding weights: %w", v, v.Op, err)
			}
			p.consts[i] = c
		default:
			nd := node{v: v, idx: i, st: -1, arena: p.arenaOffset(v)}
			for _, a := range v.Args {
				nd.args = append(nd.args, p.index[a])
			}
			if v.Op == ir.OpKVWrite || (v.Op == ir.OpReshape && p.stOf[nd.args[0]] >= 0) {
				nd.st = p.stOf[nd.args[0]]
				p.stOf[i] = nd.st
			}
			nd.elems = 1
			for _, d := range v.Type.Shape {
				switch {
				case d.IsConst():
					nd.elems *= d.N
				case d.Sym == "T":
					nd.tpow++
				case d.Sym == "C" && nd.st >= 0:
				default:
					return nil, fmt.Errorf("%v (%s): dimension %s is not supported", v, v.Op, d)
				}
			}
			if err := p.prepare(&nd); err != nil {
				return nil, fmt.Errorf("%v (%s): %w", v, v.Op, err)
			}
			nd.order = len(p.nodes)
			p.nodes = append(p.nodes, nd)
		}
	}
	p.linkNext()
	p.dropPackedSources()
	p.logits = p.index[g.Output("logits")]
	if p.consts[p.logits] != nil {
		return nil, fmt.Errorf("logits do not depend on the tokens")
	}
	p.pool = newPool(b.threads(cfg.Options))
	p.scratch = make([][]float32, p.pool.n)
	p.attnPart = make([][]float32, p.pool.n)
	goruntime.AddCleanup(p, func(pl *pool) { pl.stop() }, p.pool)
	return p, nil
}

// arenaOffset is v's place in the step's arena in float32s per token, or
// -1 when the graph has no memory plan (an unfused graph, or one the pass
// left unplanned) or v is not in it. Every planned activation is a float32
// [T, n] buffer, so byte offsets and sizes are whole float32s.
func (p *program) arenaOffset(v *ir.Value) int64 {
	per := p.g.Attrs.Int("arena_bytes_per_token", 0)
	if _, ok := v.Attrs["arena_offset"]; per <= 0 || !ok || v.Type.DType != ir.F32 || v.Op == ir.OpReshape {
		return -1
	}
	o := v.Attrs.Int("arena_offset", -1)
	if o < 0 || o%4 != 0 || per%4 != 0 {
		return -1
	}
	p.arenaPT = per / 4
	return o / 4
}

// dropPackedSources forgets the original bytes of matrices that are read
// only through their packed form (whole groups of eight rows, no other op
// reading them raw), so that folded copies (the concatenated q/k/v and
// gate/up matrices, a third of a llama's weights) can be collected. Bytes
// that lie in a file mapping (a GGUF file, a plan, an app) and that no step
// reads — packed matrices' sources, the weights a fold copied — are
// released from the resident set (mmap.ReleaseMapped): otherwise their
// pages, read once while packing, count beside the packed copy, the
// weights twice in RSS. Bytes that a step reads raw (embeddings, unpacked
// and q8_2 float-path matrices, MoE experts, float32 views) are kept:
// releasing them would only refault them each step.
func (p *program) dropPackedSources() {
	raw := map[*cval]bool{}
	for _, nd := range p.nodes {
		for j, a := range nd.args {
			c := p.consts[a]
			if c == nil {
				continue
			}
			if j == 1 && matmulFamily(nd.v.Op) && c.packed != nil {
				continue
			}
			raw[c] = true
		}
	}
	var live [][]byte // bytes some step reads (a reshape fold shares its operand's)
	for c := range raw {
		live = append(live, c.data, asBytes(c.f32))
	}
	for _, c := range p.consts {
		if c == nil || raw[c] {
			continue
		}
		unread := !overlapsAny(c.data, live)
		if unread {
			mmap.ReleaseMapped(c.data)
		}
		if c.packed != nil && c.packed.Rows()%8 == 0 {
			c.data = nil
			if unread {
				c.mem.release()
			}
		}
	}
}

// constUse is how the values that use a constant read it.
type constUse uint8

const (
	readRaw    constUse = iota // some step reads its bytes (or it is an output, or unused)
	packedOnly                 // only as a matmul's weight operand (packed when the kernels can)
	foldedOnly                 // only by folds at load time
)

// constUses classifies every constant by its uses, by value index.
func constUses(g *ir.Graph, isConst map[*ir.Value]bool, index map[*ir.Value]int) []constUse {
	out := make([]constUse, len(g.Values))
	uses := g.Uses()
	counted := map[*ir.Value]int{}
	packed, folded := map[*ir.Value]int{}, map[*ir.Value]int{}
	for _, v := range g.Values {
		for j, a := range v.Args {
			if !isConst[a] {
				continue
			}
			counted[a]++
			switch {
			case isConst[v]:
				folded[a]++
			case j == 1 && matmulFamily(v.Op):
				packed[a]++
			}
		}
	}
	for a, n := range counted {
		switch {
		case n != uses[a]: // an output too
		case packed[a] == n:
			out[index[a]] = packedOnly
		case folded[a] == n:
			out[index[a]] = foldedOnly
		}
	}
	return out
}

// overlapsAny reports whether b shares a byte with any of the slices in bs.
func overlapsAny(b []byte, bs [][]byte) bool {
	if len(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	for _, o := range bs {
		if len(o) == 0 {
			continue
		}
		olo := uintptr(unsafe.Pointer(unsafe.SliceData(o)))
		if olo < hi && lo < olo+uintptr(len(o)) {
			return true
		}
	}
	return false
}

// loadWeight resolves a weight's bytes once: kept as given (mmapped), no copy.
func loadWeight(v *ir.Value, w eval.Weights) (*cval, error) {
	shape, err := v.Type.Shape.Bind(nil)
	if err != nil {
		return nil, fmt.Errorf("weight %q has a symbolic shape", v.Name())
	}
	if w == nil {
		return nil, fmt.Errorf("no weight source for %q", v.Name())
	}
	raw, err := w.WeightBytes(v.Name())
	if err != nil {
		return nil, err
	}
	want, err := v.Type.DType.RowBytes(numel(shape))
	if err != nil {
		return nil, fmt.Errorf("weight %q: %w", v.Name(), err)
	}
	if int64(len(raw)) != want {
		return nil, fmt.Errorf("weight %q has %d bytes, %s%s needs %d", v.Name(), len(raw), v.Type.DType, v.Type.Shape, want)
	}
	return &cval{dt: v.Type.DType, shape: shape, data: raw}, nil
}

// prepare checks what a node needs and materializes the float32 form of
// constant operands that are read as floats (gains, biases, sinks).
func (p *program) prepare(nd *node) error {
	v := nd.v
	rawArg := -1 // operand read in its own dtype
	nd.step = steps[v.Op]
	if nd.step == nil {
		return fmt.Errorf("op %s is not supported", v.Op)
	}
	switch v.Op {
	case ir.OpQKVRoPE, ir.OpAttention, ir.OpFlashAttention:
		nd.attn = attnShapeOf(v)
	}
	switch v.Op {
	case ir.OpRoPE:
		var err error
		if nd.rope, err = rope.FromAttrs(v.Attrs); err != nil {
			return err
		}
	case ir.OpMatMul, ir.OpFusedMatMul, ir.OpSwiGLU, ir.OpQKVRoPE:
		var err error
		switch v.Op {
		case ir.OpMatMul:
			nd.parts = ir.Parts{X: v.Args[0], W: v.Args[1]}
			if len(v.Args) == 3 {
				nd.parts.Bias = v.Args[2]
			}
		case ir.OpQKVRoPE:
			if nd.parts, err = ir.MatMulParts(v); err == nil {
				nd.rope, err = rope.FromAttrs(v.Attrs)
			}
		default:
			nd.parts, err = ir.MatMulParts(v)
		}
		if err != nil {
			return err
		}
		nd.ix = p.indexParts(nd.parts)
		rawArg = 1
		c := p.consts[nd.args[1]]
		if c == nil {
			return fmt.Errorf("the weight operand must be constant")
		}
		if !kernSupported(c.dt) {
			return fmt.Errorf("weights of type %s are not supported", c.dt)
		}
		n, k, _, err := c.matrix()
		if err != nil {
			return err
		}
		// A q8_2 graph's k-quant matmuls take the float path (refround.go),
		// which reads the original rows.
		if c.packed == nil && p.packs(c.dt, n) {
			c.packed = p.pack(c.dt, n, k, c.data)
			if p.readBy[nd.args[1]] == packedOnly {
				// Nothing reads the original bytes again: release them now
				// rather than in dropPackedSources, so that the load's peak
				// RSS does not hold every source beside its packed copy.
				mmap.ReleaseMapped(c.data)
				c.data = nil
				c.mem.release()
			}
		}
	case ir.OpEmbed:
		rawArg = 0
		c := p.consts[nd.args[0]]
		if c == nil {
			return fmt.Errorf("the table must be constant")
		}
		if err := p.hugeTable(c); err != nil {
			return err
		}
	case ir.OpAttention, ir.OpFlashAttention:
		ks, vs := p.stOf[nd.args[1]], p.stOf[nd.args[2]]
		if ks < 0 || vs < 0 {
			return fmt.Errorf("keys and values must be KV cache states")
		}
		if err := p.checkHeads(v, p.states[ks], p.states[vs]); err != nil {
			return err
		}
	case ir.OpKVWrite:
		if nd.st < 0 {
			return fmt.Errorf("the cache must be a state")
		}
	case ir.OpMoE:
		return p.prepareMoE(nd)
	case ir.OpRMSNorm, ir.OpAdd, ir.OpMul, ir.OpSiLU, ir.OpGELU, ir.OpSoftmax, ir.OpReshape, ir.OpConcat,
		ir.OpTopKSoftmax:
	default:
		return fmt.Errorf("op %s is not supported by the %s backend", v.Op, Name)
	}
	if v.Op == ir.OpQKVRoPE {
		pp := nd.parts
		ks, vs := p.stOf[p.index[pp.KCache]], p.stOf[p.index[pp.VCache]]
		if ks < 0 || vs < 0 {
			return fmt.Errorf("the caches must be states")
		}
		if err := p.checkHeads(v, p.states[ks], p.states[vs]); err != nil {
			return err
		}
	}
	for j, a := range nd.args {
		if c := p.consts[a]; c != nil && j != rawArg {
			if err := c.ensureF32(); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkHeads refuses a q8_0 cache whose heads do not start on a block
// (heads are written and read one at a time) and lays both caches out in
// the op's heads (state.setHeads).
func (p *program) checkHeads(v *ir.Value, k, vs *state) error {
	hd := int(v.Attrs.Int("head_dim", 0))
	nkv := int(v.Attrs.Int("n_kv_head", 1))
	if k.q8 != nil && hd%q8Block != 0 {
		return fmt.Errorf("a q8_0 K cache needs a head dimension that is a multiple of %d, not %d", q8Block, hd)
	}
	dv := vs.info.Width / max(1, nkv)
	if vs.q8 != nil && (dv%q8Block != 0 || v.Op == ir.OpQKVRoPE && hd%q8Block != 0) {
		return fmt.Errorf("a q8_0 V cache needs a head dimension that is a multiple of %d, not %d", q8Block, dv)
	}
	if err := k.setHeads(hd, nkv); err != nil {
		return err
	}
	return vs.setHeads(dv, nkv)
}

func (p *program) Config() runtime.ProgramConfig { return p.cfg }
func (p *program) VocabSize() int                { return p.sig.VocabSize }

func (p *program) CacheBytes() int64 {
	return runtime.StatesBytes(p.sig.States, p.cfg.Slots*p.cfg.Context)
}

func (p *program) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, runtime.ErrClosed
	}
	return p.slotStep(slot, tokens, pos, nil)
}

// slotStep checks and runs a step of one slot (step's want: the logits
// rows to return, every row when nil); the caller holds p.mu.
func (p *program) slotStep(slot int, tokens, pos []int32, want []int) ([][]float32, error) {
	if err := runtime.CheckStep(p.cfg, p.sig.TokenLimit, slot, tokens, pos); err != nil {
		return nil, err
	}
	slots := make([]int, len(tokens))
	for i := range slots {
		slots[i] = slot
	}
	return p.step(tokens, pos, slots, want)
}

// step runs the graph over rows (token, position, slot) and returns
// copies of the logits rows want names (every row when nil).
func (p *program) step(tokens, pos []int32, slots []int, want []int) ([][]float32, error) {
	e := &exec{p: p, T: len(tokens), tokens: tokens, pos: pos, slots: slots, want: want, coldKV: oneRowPerSlot(slots)}
	if err := p.growArena(int(p.arenaPT) * len(tokens)); err != nil {
		return nil, err
	}
	for i := range p.nodes {
		nd := &p.nodes[i]
		var t0 time.Time
		if p.opTimes != nil {
			t0 = time.Now()
		}
		if e.T == 1 {
			if d := p.decodePlan(nd.next); d != nil {
				p.pool.tail = d.warm
			}
		}
		if err := e.run(nd); err != nil {
			return nil, fmt.Errorf("%v (%s): %w", nd.v, nd.v.Op, err)
		}
		p.pool.tail = nil
		if p.opTimes != nil {
			p.opTimes[i] = time.Since(t0)
		}
	}
	out := p.vals[p.logits]
	nv := p.sig.VocabSize
	// The logits matmul computed the wanted rows alone (exec.logitRows),
	// or every row.
	compact := want != nil && len(out) == len(want)*nv && len(want) != len(tokens)
	if !compact && len(out) != len(tokens)*nv {
		return nil, fmt.Errorf("logits have %d values, want %d×%d", len(out), len(tokens), nv)
	}
	if want == nil {
		want = make([]int, len(tokens))
		for i := range want {
			want[i] = i
		}
	}
	all := make([]float32, len(want)*nv)
	rows := make([][]float32, len(want))
	for i, r := range want {
		if compact {
			r = i
		}
		rows[i] = all[i*nv : (i+1)*nv : (i+1)*nv]
		copy(rows[i], out[r*nv:(r+1)*nv])
	}
	return rows, nil
}

func (p *program) ResetSlot(slot int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return runtime.ErrClosed
	}
	if slot < 0 || slot >= p.cfg.Slots {
		return fmt.Errorf("slot %d is out of range (the program has %d)", slot, p.cfg.Slots)
	}
	p.resetSlot(slot)
	return nil
}

// Quiesce implements runtime.Quiescer: the pool's helpers, which poll for
// the next run for a while after each (pool's spinFor), park now.
func (p *program) Quiesce() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.pool.quiesce()
	}
}

func (p *program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.pool.stop()
	for _, c := range p.consts {
		if c != nil && c.packed != nil {
			c.packed.Free()
			c.packed = nil
		}
		if c != nil && c.experts != nil {
			c.experts, c.expertArena = nil, nil
			_ = c.expertUnmap()
		}
	}
	p.states, p.kv, p.consts, p.vals, p.bufs, p.arena, p.packing = nil, nil, nil, nil, nil, nil, nil
	p.mem.releaseAll()
	return nil
}

// growArena makes the step arena n floats long. It grows to the largest
// step (a micro-batch, or a serving step's rows) and stays: a smaller step
// touches only the start of it.
func (p *program) growArena(n int) error {
	if cap(p.arena) >= n {
		p.arena = p.arena[:n]
		return nil
	}
	a, mem, err := offHeapSlice[float32](n, false)
	if err != nil {
		return fmt.Errorf("activation arena of %d floats: %w", n, err)
	}
	p.mem.setArena(mem)
	p.arena = a
	return nil
}

// PackedExperts reports how many experts of a CPU program's MoE expert
// tensors are packed for the group kernels, summed over the tensors (ok is
// false for another backend's program). Experts are packed when a step
// first selects them.
func PackedExperts(p runtime.Program) (n int, ok bool) {
	pr, ok := p.(*program)
	if !ok {
		return 0, false
	}
	for _, c := range pr.consts {
		if c == nil {
			continue
		}
		for _, q := range c.experts {
			if q != nil {
				n++
			}
		}
	}
	return n, true
}

// ProgramSettings reports the kernel variant and worker count a CPU
// program runs with (ok is false for another backend's program).
func ProgramSettings(p runtime.Program) (variant string, threads int, ok bool) {
	pr, ok := p.(*program)
	if !ok {
		return "", 0, false
	}
	return pr.ks.Name(), pr.pool.n, true
}

// linkNext sets each node's next: the first matmul after it, wrapping
// around from the step's last matmul to its first.
func (p *program) linkNext() {
	next := -1
	for pass := 0; pass < 2; pass++ {
		for i := len(p.nodes) - 1; i >= 0; i-- {
			nd := &p.nodes[i]
			if pass == 1 {
				nd.next = next
			}
			if p.isMatMul(i) {
				next = i
			}
		}
	}
}
