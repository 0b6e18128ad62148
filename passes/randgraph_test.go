package passes

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/minerva-llm/minerva/ir"
)

// The random graph generator builds valid graphs of the shape frontends
// produce — an embedding, a stack of blocks on a residual stream, a final
// norm and logits — so that the whole pipeline can be run on thousands of
// graphs and compared with the interpreter (differential_test.go).
//
// Blocks are llama-like attention and FFN blocks and a set of near misses:
// graphs that look almost like a fusion pattern but must be left alone, or
// handled carefully, because fusing them as if they matched would change
// the result (mixed weight dtypes, biases, an intermediate with a second
// user or an output, a gate without an up projection, ropes that differ
// between q and k, value heads of another size, norms that also feed an add,
// 3-D matmuls behind a reshape, …). Every decision is drawn from a chooser,
// which is either a PRNG or the bytes of a fuzz input.

// rgChooser is the source of every decision the generator makes.
type rgChooser interface {
	// intn returns a number in [0, n); 0 is the plainest choice.
	intn(n int) int
}

type rgRand struct{ r *rand.Rand }

func (c rgRand) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return c.r.IntN(n)
}

// rgBytes takes one byte per decision. When the bytes run out every decision
// is 0, the plainest choice, so every byte string (the empty one included)
// gives a valid graph: a plain llama layer.
type rgBytes struct{ b []byte }

func (c *rgBytes) intn(n int) int {
	if n <= 1 || len(c.b) == 0 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

// rgInfo records what the generator built, so a test can tell how much
// fusion the pipeline owes: canonical blocks (no near-miss option drawn)
// must be fused whatever the rest of the graph looks like.
type rgInfo struct {
	Blocks    []string // block kinds in order; a "~" suffix marks a near miss
	CanonAttn int      // llama attention blocks: one qkv_rope and a residual fused_matmul each
	CanonFFN  int      // llama FFN blocks: one swiglu and a residual fused_matmul each
	Attention int      // attention ops (each must become flash_attention)
}

type rgGen struct {
	c      rgChooser
	b      *ir.Builder
	tokens *ir.Value
	pos    *ir.Value
	posB   *ir.Value // "pos2", declared on first use
	table  *ir.Value // embedding table [V, D]
	x      *ir.Value // residual stream f32[T, D]
	d      int
	nw     int // weights declared (for unique names)
	layer  int // attention blocks (cache names)
	extra  int // extra outputs
	info   rgInfo
}

// randomGraph builds a random valid graph from r.
func randomGraph(r *rand.Rand) *ir.Graph {
	g, _ := randomGraphInfo(r)
	return g
}

func randomGraphInfo(r *rand.Rand) (*ir.Graph, rgInfo) {
	return rgBuild(rgRand{r})
}

// graphFromBytes builds a valid graph whose every decision is taken from b.
func graphFromBytes(b []byte) *ir.Graph {
	g, _ := rgBuild(&rgBytes{b})
	return g
}

func graphFromBytesInfo(b []byte) (*ir.Graph, rgInfo) {
	return rgBuild(&rgBytes{b})
}

// rgBlockKinds is the menu of blocks; llama blocks are drawn most often.
var rgBlockKinds = []string{"attn", "ffn", "attn", "ffn", "attn", "ffn", "gelu", "softmax", "reshape", "misc"}

func rgBuild(c rgChooser) (*ir.Graph, rgInfo) {
	g := &rgGen{c: c, b: ir.NewBuilder("rand")}
	b := g.b
	g.d = []int{64, 32, 96}[g.intn(3)]
	vocab := []int{48, 64, 40, 72}[g.intn(4)]
	g.tokens = b.Input("tokens", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	g.pos = b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	g.table = g.mat("token_embd", vocab, g.d, g.dtype(g.d))
	g.x = b.Embed(g.table, g.tokens)

	// 2 to 5 blocks; with the bytes exhausted, an attention block then an
	// FFN block: one llama layer.
	n := 2 + g.intn(4)
	for i := 0; i < n; i++ {
		kind := rgBlockKinds[(g.intn(len(rgBlockKinds))+i)%len(rgBlockKinds)]
		switch kind {
		case "attn":
			g.attention()
		case "ffn":
			g.ffn()
		case "gelu":
			g.geluMLP()
		case "softmax":
			g.softmaxBlock()
		case "reshape":
			g.reshapeBlock()
		case "misc":
			g.miscBlock()
		}
	}

	// Final norm and logits; the output matrix is sometimes the embedding
	// table (tied), a weight with two users of different ops.
	var gain *ir.Value
	if g.intn(4) != 3 {
		gain = g.vec("output_norm", g.d)
	}
	xn := b.RMSNorm(g.x, gain, 1e-5)
	w := g.table
	if g.intn(3) != 2 {
		w = g.mat("output", vocab, g.d, g.dtype(g.d))
	}
	b.Output("logits", b.MatMul(xn, w, nil))
	if g.intn(6) == 5 {
		g.output(g.x) // the last residual is also an output
	}
	gr, err := b.Finish()
	if err != nil {
		panic(fmt.Sprintf("randgraph: the generator built an invalid graph: %v", err))
	}
	if g.intn(2) == 1 {
		rgShuffle(gr, c)
		if err := ir.Verify(gr); err != nil {
			panic(fmt.Sprintf("randgraph: shuffling broke the graph: %v", err))
		}
	}
	return gr, g.info
}

// rgShuffle puts the values in another topological order, drawn from c:
// weights and states late or early, projections in any order, a value far
// from its users. The meaning does not change (state is only read through
// the results of the ops that write it), but passes that insert values must
// place them where all their operands are defined.
func rgShuffle(gr *ir.Graph, c rgChooser) {
	placed := make(map[*ir.Value]bool, len(gr.Values))
	rest := append([]*ir.Value(nil), gr.Values...)
	out := make([]*ir.Value, 0, len(rest))
	for len(rest) > 0 {
		var ready []int
		for i, v := range rest {
			ok := true
			for _, a := range v.Args {
				ok = ok && placed[a]
			}
			if ok {
				ready = append(ready, i)
			}
		}
		i := ready[c.intn(len(ready))]
		placed[rest[i]] = true
		out = append(out, rest[i])
		rest = append(rest[:i], rest[i+1:]...)
	}
	gr.Values = out
	gr.Renumber()
}

func (g *rgGen) intn(n int) int { return g.c.intn(n) }

// opt returns a function that draws one near-miss option: never when near is
// false, otherwise with probability 1/n.
func (g *rgGen) opt(near bool) func(n int) bool {
	return func(n int) bool { return near && g.intn(n) == n-1 }
}

func (g *rgGen) name(kind string) string {
	g.nw++
	return fmt.Sprintf("w%d.%s", g.nw, kind)
}

// rgScores enables values of type [T, T] (a matmul whose weight operand is an
// activation). plan-memory cannot express them in bytes per token and leaves
// such graphs unplanned (graph attribute memory_unplanned); the other passes
// must still keep their meaning.
const rgScores = true

var rgMatTypes = []ir.DType{ir.F32, ir.F16, ir.Q8_0, ir.Q4_0}

// dtype draws a matrix dtype for rows of length k (quantized types need k a
// multiple of 32).
func (g *rgGen) dtype(k int) ir.DType {
	if k%32 == 0 {
		return rgMatTypes[g.intn(len(rgMatTypes))]
	}
	return rgMatTypes[g.intn(2)]
}

func (g *rgGen) mat(kind string, n, k int, dt ir.DType) *ir.Value {
	return g.b.Weight(g.name(kind), ir.Type{DType: dt, Shape: ir.S(n, k)})
}

// vec declares a 1-D float weight (a norm gain, a bias, sinks).
func (g *rgGen) vec(kind string, n int) *ir.Value {
	dt := []ir.DType{ir.F32, ir.F16}[g.intn(2)]
	return g.b.Weight(g.name(kind), ir.Type{DType: dt, Shape: ir.S(n)})
}

func (g *rgGen) output(v *ir.Value) {
	g.b.Output(fmt.Sprintf("extra.%d", g.extra), v)
	g.extra++
}

func (g *rgGen) eps() float64 { return []float64{1e-5, 1e-6, 1e-3}[g.intn(3)] }

// deadUse sometimes adds a computation on v that no output needs (dce removes
// it before the fusions look at use counts).
func (g *rgGen) deadUse(v *ir.Value) {
	switch g.intn(8) {
	case 1:
		g.b.SiLU(v)
	case 2:
		if k := v.Type.Shape.Last(); k.IsConst() {
			w := g.mat("dead", 16, int(k.N), g.dtype(int(k.N)))
			g.b.GELU(g.b.MatMul(v, w, nil))
		}
	case 3:
		g.b.AddV(v, v)
	}
}

// attention adds x += o(attention(rope(q(n)), cache ← rope(k(n)), cache ← v(n))), n = rmsnorm(x).
func (g *rgGen) attention() {
	b := g.b
	near := g.intn(2) == 1
	opt := g.opt(near)
	eps := g.eps()
	x := g.x
	var n, gain *ir.Value
	noNorm := opt(10)
	if noNorm {
		// Projections of a value that is not an rmsnorm (but is bounded: the
		// raw residual would make scores so large that float32 rounding
		// differences show).
		n = b.GELU(b.RMSNorm(x, nil, eps))
	} else {
		if !opt(4) {
			gain = g.gainVec("attn_norm", g.d, opt)
		}
		n = b.RMSNorm(x, gain, eps)
	}
	// Sometimes the same norm is built again for k and v: cse must merge it
	// before fuse-qkv sees one input (allowed in canonical blocks).
	nk := n
	if !noNorm && g.intn(5) == 4 {
		nk = b.RMSNorm(x, gain, eps)
	}
	pos := g.pos
	if opt(8) {
		pos = g.pos2() // the whole block on other positions
	}
	o := g.attnCore(n, nk, x, pos, opt)
	if opt(6) {
		// Two attentions read the same norm (parallel heads groups): the
		// q, k, v of one must not be merged with those of the other.
		o2 := g.attnCore(n, nk, x, pos, opt)
		o = b.AddV(o, o2)
	}
	if opt(4) {
		g.x = b.AddV(o, x)
	} else {
		g.x = b.AddV(x, o)
	}
	if !noNorm {
		if opt(6) {
			g.x = b.AddV(g.x, n) // the norm also feeds an add
		} else if opt(6) {
			g.output(n)
		}
	}
	g.deadUse(n)
	if near {
		g.info.Blocks = append(g.info.Blocks, "attn~")
	} else {
		g.info.Blocks = append(g.info.Blocks, "attn")
		g.info.CanonAttn++
	}
}

// attnCore builds the projections of n (k and v of nk, which is n or an
// identical norm), the ropes, the cache writes, the attention and the output
// projection, and returns the projection. x is the block's input (a
// different input for a near miss).
func (g *rgGen) attnCore(n, nk, x, pos *ir.Value, opt func(int) bool) *ir.Value {
	b := g.b
	l := g.layer
	g.layer++
	hd := []int{16, 8, 32}[g.intn(3)]
	nkv := []int{2, 1, 4}[g.intn(3)]
	group := []int{2, 1, 4}[g.intn(3)] // GQA: query heads per kv head
	for nkv*group*hd > 128 {
		if group > 1 {
			group /= 2
		} else {
			nkv /= 2
		}
	}
	nh := nkv * group
	dv := hd
	if opt(6) {
		dv = []int{8, 16, 24}[g.intn(3)] // value heads of another size: no qkv_rope
		if dv == hd {
			dv = 24
		}
	}
	dt := g.dtype(g.d)
	dtk, dtv := dt, dt
	if opt(3) { // mixed dtypes, as Q4_K_M files mix q4_k and q6_k
		dtk, dtv = g.dtype(g.d), g.dtype(g.d)
	}
	wq := g.matw("attn_q", nh*hd, g.d, dt, opt)
	wk := g.matw("attn_k", nkv*hd, g.d, dtk, opt)
	wv := wk // k and v share one weight (a merge may still concat it twice)
	if dv != hd || !opt(8) {
		wv = g.matw("attn_v", nkv*dv, g.d, dtv, opt)
	}
	bias := func(kind string, n int) *ir.Value {
		if opt(4) {
			return g.biasVec(kind, n, opt)
		}
		return nil
	}
	nq := n
	if opt(10) {
		nq = b.RMSNorm(x, nil, 1e-2) // q of another input than k and v
	}
	// The three projections in a random order (the graph order is shuffled
	// later too).
	var q, k, v *ir.Value
	for _, i := range []int{0, 1, 2, 0, 1}[g.intn(3):][:3] {
		switch i {
		case 0:
			q = b.MatMul(nq, wq, bias("attn_q.bias", nh*hd))
		case 1:
			k = b.MatMul(nk, wk, bias("attn_k.bias", nkv*hd))
		case 2:
			v = b.MatMul(nk, wv, bias("attn_v.bias", nkv*dv))
		}
	}
	rope := ir.Attrs{"head_dim": hd, "n_rot": hd, "base": 10000.0, "freq_scale": 1.0, "mode": "normal"}
	if opt(3) {
		rope["mode"] = "neox"
	}
	if opt(3) {
		rope["n_rot"] = hd / 2
	}
	if opt(4) {
		rope["freq_scale"] = 0.25
	}
	if opt(4) {
		rope["base"] = 500000.0
	}
	if opt(5) { // YaRN
		rope["freq_scale"], rope["ext_factor"], rope["attn_factor"] = 0.25, 1.0, 1.0
		rope["beta_fast"], rope["beta_slow"], rope["orig_ctx"] = 32.0, 1.0, 64
	}
	if opt(8) {
		// Rope heads of half the attention head size, on q and k alike.
		rope["head_dim"], rope["n_rot"] = hd/2, hd/2
	}
	krope, _ := rope.Clone()
	switch {
	case opt(6):
		krope["base"] = 20000.0 // q and k rotated differently
	case opt(8):
		krope["head_dim"], krope["n_rot"] = hd/2, hd/2 // k rotated with other head boundaries
	case opt(8):
		krope["attn_factor"] = 0.5
	}
	qpos := pos
	if opt(10) {
		qpos = g.pos2() // q rotated by other positions
	}
	if opt(6) {
		g.output(q) // projections with a second user
	} else if opt(6) {
		g.output(v)
	}
	if opt(6) {
		g.output(k)
	}
	if !opt(10) {
		q = b.RoPE(q, qpos, rope)
	}
	if dv == hd && opt(10) {
		v = b.RoPE(v, pos, krope) // v rotated too: not what qkv_rope does
	}
	kr := k
	if !opt(10) {
		kr = b.RoPE(k, pos, krope)
	}
	if opt(8) {
		g.output(q) // the rotated q is an output too
	}
	ct := []ir.DType{ir.F32, ir.F16}[g.intn(2)]
	kc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.k", l), ir.Type{DType: ct, Shape: ir.S("C", nkv*hd)}), kr, pos)
	vc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.v", l), ir.Type{DType: ct, Shape: ir.S("C", nkv*dv)}), v, pos)
	attrs := ir.Attrs{"n_head": nh, "n_kv_head": nkv, "head_dim": hd, "scale": 1 / math.Sqrt(float64(hd))}
	if g.intn(3) == 2 {
		attrs["window"] = 2 + g.intn(3)
	}
	var sinks *ir.Value
	if g.intn(3) == 2 {
		sinks = g.b.Weight(g.name("attn_sinks"), ir.Type{DType: ir.F32, Shape: ir.S(nh)})
	}
	a := b.Attention(q, kc, vc, pos, sinks, attrs)
	g.info.Attention++
	if !opt(8) {
		b.Output(fmt.Sprintf("cache.%d.k", l), kc)
		b.Output(fmt.Sprintf("cache.%d.v", l), vc)
	}
	if opt(6) {
		g.output(a)
	}
	wo := g.matw("attn_output", g.d, nh*dv, g.dtype(nh*dv), opt)
	o := b.MatMul(a, wo, bias("attn_output.bias", g.d))
	if opt(6) {
		g.output(o) // the projection has two users: the add and an output
	}
	return o
}

// pos2 returns a second positions input. randomInputs fills i32 inputs that
// index no table with zeros: every token at position 0.
func (g *rgGen) pos2() *ir.Value {
	if g.posB == nil {
		g.posB = g.b.Input("pos2", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	}
	return g.posB
}

// matw declares a matrix weight, or for a near miss an f32 matrix computed
// from weights at load time (a rescaled or summed weight).
func (g *rgGen) matw(kind string, n, k int, dt ir.DType, opt func(int) bool) *ir.Value {
	if dt == ir.F32 && opt(6) {
		w := g.mat(kind, n, k, ir.F32)
		if g.intn(2) == 0 {
			return g.b.Mul(w, g.vec(kind+".scale", k))
		}
		return g.b.AddV(w, g.mat(kind+".delta", n, k, []ir.DType{ir.F32, ir.F16}[g.intn(2)]))
	}
	return g.mat(kind, n, k, dt)
}

// gainVec declares a norm gain, or for a near miss an f32 gain computed from
// two weights.
func (g *rgGen) gainVec(kind string, n int, opt func(int) bool) *ir.Value {
	if opt(8) {
		return g.b.Mul(g.b.Weight(g.name(kind), ir.Type{DType: ir.F32, Shape: ir.S(n)}), g.vec(kind+".scale", n))
	}
	return g.vec(kind, n)
}

// biasVec declares a bias, or for a near miss a bias computed as a matmul of
// a constant vector.
func (g *rgGen) biasVec(kind string, n int, opt func(int) bool) *ir.Value {
	if opt(8) {
		x := g.b.Weight(g.name(kind+".x"), ir.Type{DType: ir.F32, Shape: ir.S(32)})
		return g.b.MatMul(x, g.mat(kind, n, 32, g.dtype(32)), nil)
	}
	return g.vec(kind, n)
}

// ffn adds x += down(silu(gate(n)) · up(n)), n = rmsnorm(x).
func (g *rgGen) ffn() {
	b := g.b
	near := g.intn(2) == 1
	opt := g.opt(near)
	eps := g.eps()
	x := g.x
	var gain *ir.Value
	if !opt(4) {
		gain = g.gainVec("ffn_norm", g.d, opt)
	}
	n := b.RMSNorm(x, gain, eps)
	nu := n
	switch {
	case g.intn(5) == 4:
		nu = b.RMSNorm(x, gain, eps) // a duplicate for cse (allowed in canonical blocks)
	case opt(6):
		nu = b.RMSNorm(x, gain, eps*10) // another norm: not one input
	}
	down := g.ffnCore(n, nu, x, opt)
	if opt(6) {
		// Two gated units on the same norm: each gate must stay with its up.
		down = b.AddV(down, g.ffnCore(n, nu, x, opt))
	}
	if opt(4) {
		g.x = b.AddV(down, x)
	} else {
		g.x = b.AddV(x, down)
	}
	if opt(6) {
		g.x = b.AddV(g.x, n)
	} else if opt(6) {
		g.output(n)
	}
	g.deadUse(n)
	if near {
		g.info.Blocks = append(g.info.Blocks, "ffn~")
	} else {
		g.info.Blocks = append(g.info.Blocks, "ffn")
		g.info.CanonFFN++
	}
}

// ffnCore builds gate(n), up(nu), the gated product and the down projection,
// and returns the projection.
func (g *rgGen) ffnCore(n, nu, x *ir.Value, opt func(int) bool) *ir.Value {
	b := g.b
	f := []int{64, 96, 128, 32, 48}[g.intn(5)]
	dt := g.dtype(g.d)
	dtu := dt
	if opt(3) {
		dtu = g.dtype(g.d)
	}
	wg := g.matw("ffn_gate", f, g.d, dt, opt)
	wu := wg // gate and up share one weight
	if !opt(8) {
		wu = g.matw("ffn_up", f, g.d, dtu, opt)
	}
	bias := func(kind string, n int) *ir.Value {
		if opt(5) {
			return g.biasVec(kind, n, opt)
		}
		return nil
	}
	var gate, up *ir.Value
	mkGate := func() { gate = b.MatMul(n, wg, bias("ffn_gate.bias", f)) }
	mkUp := func() {
		if opt(6) {
			up = b.MatMul(x, wu, nil) // a gate without an up projection of the same input
		} else {
			up = b.MatMul(nu, wu, bias("ffn_up.bias", f))
		}
	}
	if g.intn(2) == 0 {
		mkGate()
		mkUp()
	} else {
		mkUp()
		mkGate()
	}
	var act *ir.Value
	if opt(5) {
		act = b.GELU(gate)
	} else {
		act = b.SiLU(gate)
	}
	if opt(8) {
		g.output(gate)
	}
	if opt(8) {
		g.output(act)
	}
	if opt(8) {
		g.output(up)
	}
	var h *ir.Value
	switch {
	case opt(3):
		h = b.Mul(up, act)
	case opt(12):
		h = b.Mul(act, act) // silu(gate)² : the "up" is the gate itself
	case opt(12):
		h = b.Mul(act, gate)
	default:
		h = b.Mul(act, up)
	}
	if opt(8) {
		g.output(h)
	}
	return b.MatMul(h, g.matw("ffn_down", g.d, f, g.dtype(f), opt), bias("ffn_down.bias", g.d))
}

// geluMLP adds x += w2(gelu(w1(n) [+ b1])), n = rmsnorm(x): no swiglu here.
func (g *rgGen) geluMLP() {
	b := g.b
	f := []int{64, 96, 32}[g.intn(3)]
	n := b.RMSNorm(g.x, g.vec("mlp_norm", g.d), g.eps())
	var b1 *ir.Value
	if g.intn(2) == 1 {
		b1 = g.vec("mlp_up.bias", f)
	}
	h := b.GELU(b.MatMul(n, g.mat("mlp_up", f, g.d, g.dtype(g.d)), b1))
	if g.intn(3) == 2 {
		h = b.Mul(h, b.SiLU(h)) // silu · something that is not a matmul
	}
	g.x = b.AddV(g.x, b.MatMul(h, g.mat("mlp_down", g.d, f, g.dtype(f)), nil))
	g.info.Blocks = append(g.info.Blocks, "gelu")
}

// softmaxBlock adds x += softmax(w(n))·x or a matmul of it.
func (g *rgGen) softmaxBlock() {
	b := g.b
	n := b.RMSNorm(g.x, nil, g.eps())
	s := b.Softmax(b.MatMul(n, g.mat("sm", g.d, g.d, g.dtype(g.d)), nil))
	if g.intn(2) == 0 {
		g.x = b.AddV(g.x, b.Mul(s, g.x))
	} else {
		g.x = b.AddV(b.MatMul(s, g.mat("sm_out", g.d, g.d, g.dtype(g.d)), nil), g.x)
	}
	g.info.Blocks = append(g.info.Blocks, "softmax")
}

// reshapeBlock views the stream as [T, 2, D/2] and back, with a norm and a
// 3-D matmul in between, or as a plain round trip.
func (g *rgGen) reshapeBlock() {
	b := g.b
	half := g.d / 2
	r := b.Reshape(g.x, ir.S("T", 2, half))
	switch g.intn(3) {
	case 0:
		var gain *ir.Value
		if g.intn(2) == 0 {
			gain = g.vec("half_norm", half)
		}
		m := b.MatMul(b.RMSNorm(r, gain, g.eps()), g.mat("half", half, half, g.dtype(half)), nil)
		if g.intn(2) == 0 {
			m = b.AddV(r, m) // a residual add on 3-D values
		}
		g.x = b.AddV(g.x, b.Reshape(m, ir.S("T", g.d)))
	case 1:
		back := b.Reshape(b.Reshape(r, ir.S("T", 2*half)), ir.S("T", g.d))
		g.x = b.AddV(g.x, b.Mul(back, g.vec("scale", g.d)))
	default:
		h := b.Mul(r, g.vec("half_scale", half)) // broadcast over the two halves
		g.x = b.Reshape(b.AddV(r, h), ir.S("T", g.d))
	}
	g.info.Blocks = append(g.info.Blocks, "reshape")
}

// miscBlock holds the smaller near misses: a norm without gain times a [D]
// vector, duplicated subexpressions, a shared weight, a dead branch, a matmul
// added to itself, a bias-like broadcast add, an activation as a matmul's
// weight, ropes that differ only in attributes.
func (g *rgGen) miscBlock() {
	b := g.b
	switch g.intn(8) {
	case 0: // rmsnorm(x)·gain spelt as a broadcast mul, then a matmul
		n := b.Mul(b.RMSNorm(g.x, nil, g.eps()), g.vec("gain", g.d))
		g.x = b.AddV(g.x, b.MatMul(n, g.mat("proj", g.d, g.d, g.dtype(g.d)), nil))
	case 1: // the same matmul twice (cse), and a near duplicate with another eps
		eps := g.eps()
		gain := g.vec("dup_norm", g.d)
		w := g.mat("dup", g.d, g.d, g.dtype(g.d))
		a1 := b.MatMul(b.RMSNorm(g.x, gain, eps), w, nil)
		a2 := b.MatMul(b.RMSNorm(g.x, gain, eps), w, nil)
		a3 := b.MatMul(b.RMSNorm(g.x, gain, eps*2), w, nil)
		g.x = b.AddV(b.AddV(g.x, a1), b.AddV(a2, a3))
	case 2: // one weight used by two matmuls of different inputs
		w := g.mat("shared", g.d, g.d, g.dtype(g.d))
		n := b.RMSNorm(g.x, g.vec("shared_norm", g.d), g.eps())
		a := b.MatMul(n, w, nil)
		c := b.MatMul(b.SiLU(g.x), w, nil)
		g.x = b.AddV(b.AddV(g.x, a), c)
	case 3: // a dead branch with its own weights, then mul by a weight vector
		n := b.RMSNorm(g.x, g.vec("dead_norm", g.d), g.eps())
		b.SiLU(b.MatMul(n, g.mat("dead", 32, g.d, g.dtype(g.d)), nil))
		g.b.Weight(g.name("unused"), ir.Type{DType: ir.F32, Shape: ir.S(g.d)})
		g.x = b.Mul(g.x, g.vec("rescale", g.d))
	case 4: // a matmul added to itself: not a residual of itself
		m := b.MatMul(b.RMSNorm(g.x, g.vec("self_norm", g.d), g.eps()), g.mat("self", g.d, g.d, g.dtype(g.d)), nil)
		g.x = b.AddV(g.x, b.AddV(m, m))
	case 5: // a matmul plus a broadcast vector: a bias, not a residual
		m := b.MatMul(b.RMSNorm(g.x, nil, g.eps()), g.mat("bcast", g.d, g.d, g.dtype(g.d)), nil)
		m = b.AddV(m, g.vec("bcast.bias", g.d))
		if g.intn(2) == 0 {
			m = b.Mul(m, g.vec("bcast.scale", g.d))
		}
		g.x = b.AddV(m, g.x)
	case 6: // a norm as a matmul's weight operand, not its input
		n := b.RMSNorm(g.x, g.vec("wnorm_in", g.d), g.eps())
		w := b.RMSNorm(g.mat("wnorm", g.d, g.d, ir.F32), g.vec("wnorm.gain", g.d), 1e-5)
		if rgScores && g.intn(2) == 0 {
			// Activations as the weight: scores n·nᵀ of type [T, T].
			g.output(b.Softmax(b.MatMul(n, n, nil)))
		}
		g.x = b.AddV(g.x, b.MatMul(n, w, nil))
	default: // ropes of one value that differ only in attributes (cse must keep both)
		hd := []int{16, 32}[g.intn(2)]
		r1 := ir.Attrs{"head_dim": hd, "n_rot": hd, "base": 10000.0}
		r2, _ := r1.Clone()
		switch g.intn(3) {
		case 0:
			r2["mode"] = "neox"
		case 1:
			r2["base"] = 10000.5
		default:
			r2["n_rot"] = hd / 2
		}
		n := b.RMSNorm(g.x, nil, g.eps()) // keeps the product bounded
		a := b.RoPE(n, g.pos, r1)
		c := b.RoPE(n, g.pos, r2)
		g.x = b.AddV(g.x, b.Mul(a, c))
	}
	g.info.Blocks = append(g.info.Blocks, "misc")
}
