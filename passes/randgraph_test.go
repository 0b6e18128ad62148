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
	return gr, g.info
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
	eps := g.eps()
	x := g.x
	n := x
	var gain *ir.Value
	noNorm := opt(10)
	if !noNorm {
		if !opt(4) {
			gain = g.vec("attn_norm", g.d)
		}
		n = b.RMSNorm(x, gain, eps)
	}
	dt := g.dtype(g.d)
	dtk, dtv := dt, dt
	if opt(3) { // mixed dtypes, as Q4_K_M files mix q4_k and q6_k
		dtk, dtv = g.dtype(g.d), g.dtype(g.d)
	}
	wq := g.mat("attn_q", nh*hd, g.d, dt)
	wk := g.mat("attn_k", nkv*hd, g.d, dtk)
	wv := wk // k and v share one weight (a merge may still concat it twice)
	if dv != hd || !opt(8) {
		wv = g.mat("attn_v", nkv*dv, g.d, dtv)
	}
	bias := func(kind string, n int) *ir.Value {
		if opt(4) {
			return g.vec(kind, n)
		}
		return nil
	}
	q := b.MatMul(n, wq, bias("attn_q.bias", nh*hd))
	nk := n
	if !noNorm && g.intn(5) == 4 {
		// The same norm built twice: cse must merge it before fuse-qkv sees
		// one input (allowed in canonical blocks).
		nk = b.RMSNorm(x, gain, eps)
	}
	k := b.MatMul(nk, wk, bias("attn_k.bias", nkv*hd))
	v := b.MatMul(nk, wv, bias("attn_v.bias", nkv*dv))

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
	krope, _ := rope.Clone()
	if opt(6) {
		krope["base"] = 20000.0 // q and k rotated differently
	}
	if opt(8) {
		krope["head_dim"], krope["n_rot"] = hd/2, hd/2 // k rotated with other head boundaries
	}
	if !opt(10) {
		q = b.RoPE(q, g.pos, rope)
	}
	if opt(6) {
		g.output(k) // the k projection has a second user
	}
	kr := b.RoPE(k, g.pos, krope)
	ct := []ir.DType{ir.F32, ir.F16}[g.intn(2)]
	kc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.k", l), ir.Type{DType: ct, Shape: ir.S("C", nkv*hd)}), kr, g.pos)
	vc := b.KVWrite(b.State(fmt.Sprintf("cache.%d.v", l), ir.Type{DType: ct, Shape: ir.S("C", nkv*dv)}), v, g.pos)
	attrs := ir.Attrs{"n_head": nh, "n_kv_head": nkv, "head_dim": hd, "scale": 1 / math.Sqrt(float64(hd))}
	if g.intn(3) == 2 {
		attrs["window"] = 2 + g.intn(3)
	}
	var sinks *ir.Value
	if g.intn(3) == 2 {
		sinks = g.b.Weight(g.name("attn_sinks"), ir.Type{DType: ir.F32, Shape: ir.S(nh)})
	}
	a := b.Attention(q, kc, vc, g.pos, sinks, attrs)
	g.info.Attention++
	if !opt(8) {
		b.Output(fmt.Sprintf("cache.%d.k", l), kc)
		b.Output(fmt.Sprintf("cache.%d.v", l), vc)
	}
	if opt(6) {
		g.output(a)
	}
	wo := g.mat("attn_output", g.d, nh*dv, g.dtype(nh*dv))
	o := b.MatMul(a, wo, bias("attn_output.bias", g.d))
	if opt(6) {
		g.output(o) // the projection has two users: the add and an output
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

// ffn adds x += down(silu(gate(n)) · up(n)), n = rmsnorm(x).
func (g *rgGen) ffn() {
	b := g.b
	near := g.intn(2) == 1
	opt := g.opt(near)
	f := []int{64, 96, 128, 32, 48}[g.intn(5)]
	eps := g.eps()
	x := g.x
	var gain *ir.Value
	if !opt(4) {
		gain = g.vec("ffn_norm", g.d)
	}
	n := b.RMSNorm(x, gain, eps)
	dt := g.dtype(g.d)
	dtu := dt
	if opt(3) {
		dtu = g.dtype(g.d)
	}
	wg := g.mat("ffn_gate", f, g.d, dt)
	wu := wg // gate and up share one weight
	if !opt(8) {
		wu = g.mat("ffn_up", f, g.d, dtu)
	}
	bias := func(kind string, n int) *ir.Value {
		if opt(5) {
			return g.vec(kind, n)
		}
		return nil
	}
	gate := b.MatMul(n, wg, bias("ffn_gate.bias", f))
	nu := n
	switch {
	case g.intn(5) == 4:
		nu = b.RMSNorm(x, gain, eps) // a duplicate for cse
	case opt(6):
		nu = b.RMSNorm(x, gain, eps*10) // another norm: not one input
	}
	var up *ir.Value
	if opt(6) {
		// A gate without an up projection of the same input.
		up = b.MatMul(x, wu, nil)
	} else {
		up = b.MatMul(nu, wu, bias("ffn_up.bias", f))
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
	if opt(3) {
		h = b.Mul(up, act)
	} else {
		h = b.Mul(act, up)
	}
	if opt(8) {
		g.output(h)
	}
	down := b.MatMul(h, g.mat("ffn_down", g.d, f, g.dtype(f)), bias("ffn_down.bias", g.d))
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
// vector, duplicated subexpressions, a shared weight, a dead branch.
func (g *rgGen) miscBlock() {
	b := g.b
	switch g.intn(4) {
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
	default: // a dead branch with its own weights, then mul by a weight vector
		n := b.RMSNorm(g.x, g.vec("dead_norm", g.d), g.eps())
		b.SiLU(b.MatMul(n, g.mat("dead", 32, g.d, g.dtype(g.d)), nil))
		g.b.Weight(g.name("unused"), ir.Type{DType: ir.F32, Shape: ir.S(g.d)})
		g.x = b.Mul(g.x, g.vec("rescale", g.d))
	}
	g.info.Blocks = append(g.info.Blocks, "misc")
}
