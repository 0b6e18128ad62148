package ir

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// buildAllOps uses every op, with optional operands present and absent, and
// every attribute kind: integers, floats (including ones with integral
// values, which must stay floats), strings needing escapes, integer lists
// (empty too) and a key that is not an identifier.
func buildAllOps() *Builder {
	b := NewBuilder("all \"ops\"\t✓")
	ids := b.Input("tokens", typ(I32, "T"))
	pos := b.Input("pos", typ(I32, "T"))
	table := b.Weight("embd", typ(F16, 100, 128))
	x := b.Embed(table, ids)
	x = b.RMSNorm(x, nil, 1e-6)
	x = b.RMSNorm(x, b.Weight("norm", typ(BF16, 128)), 1)
	x = b.MatMul(x, b.Weight("w", typ(MXFP4, 128, 128)), b.Weight("bias", typ(F32, 128)))
	x = b.AddV(x, b.Weight("vec", typ(F32, 128))) // broadcast of a [D] vector onto [T, D]
	x = b.Mul(x, x)
	x = b.GELU(b.SiLU(x))
	q := b.RoPE(x, pos, Attrs{
		"head_dim": 32, "n_rot": 16, "base": 1e6, "mode": "neox", "freq_scale": 0.25,
		"freq_factors": []float64{1, 1, 2.44226, 8, 8, 8, 8, 8},
		"ext_factor":   -0.0, "attn_factor": 1.0, "beta_fast": 32.0, "beta_slow": 1.0, "orig_ctx": 4096,
	})
	kv := b.MatMul(x, b.Weight("wkv", typ(Q5_K, 32, 128)), nil)
	kc := b.KVWrite(b.State("k", typ(F32, "C", 32)), kv, pos)
	vc := b.KVWrite(b.State("v", typ(BF16, "C", 32)), kv, pos)
	a := b.Attention(q, kc, vc, pos, b.Weight("sinks", typ(F32, 4)), Attrs{
		"n_head": 4, "n_kv_head": 1, "head_dim": 32, "scale": 0.125, "window": 128,
	})
	heads := b.Reshape(a, S("T", 4, 32))
	p := b.Softmax(heads)
	flat := b.Reshape(p, S(4, "T", 32))
	meta := b.Add(OpInput, Attrs{
		"name":     "meta",
		"dims":     []int64{1, -2, math.MaxInt64, math.MinInt64},
		"empty":    []int64{},
		"odd key":  "value",
		"":         "empty key",
		"text":     "tab\t, quote \", backslash \\, newline \n, nul \x00, bad utf-8 \xff, é, 😀 ; // not a comment",
		"neg":      -7,
		"big":      1e300,
		"tiny":     5e-324,
		"negzero":  math.Copysign(0, -1),
		"whole":    3.0,
		"inf":      math.Inf(1),
		"ninf":     math.Inf(-1),
		"exp":      1e21,
		"fraction": 0.1,
	}, &Type{I64, S()})
	b.Output("logits", p)
	b.Output("flat", flat)
	b.Output("k", kc)
	b.Output("", meta)
	b.Output("v ✓", vc)
	return b
}

// roundTripGraphs are the graphs the round-trip test and the fuzz seeds use.
func roundTripGraphs(t testing.TB) map[string]*Graph {
	graphs := map[string]*Graph{}
	for name, b := range map[string]*Builder{
		"block": buildBlock(),
		"all":   buildAllOps(),
		"empty": NewBuilder(""),
	} {
		g, err := b.Finish()
		require.NoError(t, err, name)
		graphs[name] = g
	}
	// A graph a pass left with gaps in its numbering keeps its IDs.
	g, err := buildBlock().Finish()
	require.NoError(t, err)
	for _, v := range g.Values {
		v.ID = 3*v.ID + 7
	}
	graphs["sparse ids"] = g
	return graphs
}

func TestRoundTrip(t *testing.T) {
	for name, g := range roundTripGraphs(t) {
		t.Run(name, func(t *testing.T) {
			text := Print(g)
			require.Equal(t, text, g.String())
			parsed, err := Parse(text)
			require.NoError(t, err, "\n%s", text)
			require.Equal(t, text, Print(parsed))
			requireSameGraph(t, g, parsed)
		})
	}
}

// requireSameGraph compares graphs structurally: the printed forms agreeing is
// not enough, as that would miss e.g. a float attribute coming back an int.
func requireSameGraph(t *testing.T, want, got *Graph) {
	t.Helper()
	require.Equal(t, want.Name, got.Name)
	require.Len(t, got.Values, len(want.Values))
	for i, w := range want.Values {
		g := got.Values[i]
		require.Equal(t, w.ID, g.ID)
		require.Equal(t, w.Op, g.Op)
		require.True(t, w.Type.Equal(g.Type), "%v: %s vs %s", w, w.Type, g.Type)
		require.Len(t, g.Args, len(w.Args))
		for j := range w.Args {
			require.Equal(t, w.Args[j].ID, g.Args[j].ID)
			require.Same(t, got.Values[indexOf(want, w.Args[j])], g.Args[j], "operands point into the parsed graph")
		}
		require.Equal(t, len(w.Attrs), len(g.Attrs), "%v", w)
		for k, wv := range w.Attrs {
			gv, ok := g.Attrs[k]
			require.True(t, ok, "%v: attribute %q", w, k)
			require.IsType(t, wv, gv, "%v: attribute %q", w, k)
			if l, ok := wv.([]int64); ok && len(l) == 0 {
				// Builders store an empty list as nil, the parser as []int64{}.
				require.Empty(t, gv, "%v: attribute %q", w, k)
				continue
			}
			if f, ok := wv.(float64); ok {
				// Compare bits so that -0 and 0 differ.
				require.Equal(t, math.Float64bits(f), math.Float64bits(gv.(float64)), "%v: attribute %q", w, k)
				continue
			}
			require.Equal(t, wv, gv, "%v: attribute %q", w, k)
		}
	}
	require.Len(t, got.Outputs, len(want.Outputs))
	for i, o := range want.Outputs {
		require.Equal(t, o.Name, got.Outputs[i].Name)
		require.Same(t, got.Values[indexOf(want, o.Value)], got.Outputs[i].Value)
	}
}

func indexOf(g *Graph, v *Value) int {
	for i, x := range g.Values {
		if x == v {
			return i
		}
	}
	return -1
}

func TestPrintFormat(t *testing.T) {
	g, err := buildBlock().Finish()
	require.NoError(t, err)
	lines := strings.Split(Print(g), "\n")
	require.Equal(t, `graph "llama" {`, lines[0])
	require.Equal(t, `  %0 = input {name = "tokens"} : i32[T]`, lines[1])
	require.Equal(t, `  %3 = embed %2, %0 : f32[T, 256]`, lines[4])
	require.Equal(t, `  %5 = rmsnorm %3, %4 {eps = 1e-05} : f32[T, 256]`, lines[6])
	require.Contains(t, lines, `  %13 = rope %7, %1 {base = 10000.0, head_dim = 32, mode = "normal", n_rot = 32} : f32[T, 256]`)
	require.Equal(t, `  output "cache.0.v" = %18`, lines[len(lines)-3])
	require.Equal(t, "}", lines[len(lines)-2])
	require.Equal(t, "", lines[len(lines)-1], "text ends in a newline")
}

func TestFormatAttr(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{int64(-3), "-3"},
		{3, "3"},
		{1.0, "1.0"},
		{10000.0, "10000.0"},
		{-2.0, "-2.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1e-05, "1e-05"},
		{1e21, "1e+21"},
		{0.1, "0.1"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
		{math.NaN(), "NaN"},
		{"a\"b", `"a\"b"`},
		{[]int64{1, 2, 3}, "[1, 2, 3]"},
		{[]int64{}, "[]"},
		{[]int64(nil), "[]"},
		{true, "<bool true>"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, formatAttr(tc.v), "%#v", tc.v)
	}
}

func TestParseNaN(t *testing.T) {
	src := "graph \"g\" {\n  %0 = input {name = \"x\", x = NaN, y = Inf, z = -Inf, w = +Inf} : f32[]\n}\n"
	g, err := Parse(src)
	require.NoError(t, err)
	a := g.Values[0].Attrs
	require.True(t, math.IsNaN(a.Float("x", 0)))
	require.True(t, math.IsInf(a.Float("y", 0), 1))
	require.True(t, math.IsInf(a.Float("z", 0), -1))
	require.True(t, math.IsInf(a.Float("w", 0), 1))
	require.Equal(t, "graph \"g\" {\n  %0 = input {name = \"x\", w = +Inf, x = NaN, y = +Inf, z = -Inf} : f32[]\n}\n", Print(g))
}

// TestParseLenient: the parser accepts forms Print never writes (free
// spacing, comments, upper-case dtypes, non-canonical numbers) and Print
// then writes the canonical form.
func TestParseLenient(t *testing.T) {
	src := `; a golden file's header
// in either comment style
graph "g"{%0=input{name=";not a comment"}:I32[T] ; trailing comment
  %5 = weight {name = "w", "quoted key" = 1, l = [ 007 , -0 ]} : Q4_K [ 2 , 256 ] // another
  %009 = input {name = "x", f = 1.50, g = 2E3, h = 1., i = +4} : f32[T,256]
  %7 = matmul %9, %5 {} : f32[T, 2]
  output "y" = %7 output "x" = %9
}
; after the graph
`
	g, err := Parse(src)
	require.NoError(t, err)
	want := `graph "g" {
  %0 = input {name = ";not a comment"} : i32[T]
  %5 = weight {l = [7, 0], name = "w", "quoted key" = 1} : q4_k[2, 256]
  %9 = input {f = 1.5, g = 2000.0, h = 1.0, i = 4, name = "x"} : f32[T, 256]
  %7 = matmul %9, %5 : f32[T, 2]
  output "y" = %7
  output "x" = %9
}
`
	require.Equal(t, want, Print(g))
}

func TestParseErrors(t *testing.T) {
	const head = "graph \"g\" {\n  %0 = input {name = \"x\"} : f32[T, 4]\n"
	tests := []struct {
		name string
		src  string
		err  string // the whole error must start with this
	}{
		{"empty input", "", `1:1: expected "graph", found end of input`},
		{"only a comment", "; nothing\n", `2:1: expected "graph", found end of input`},
		{"missing graph keyword", `grph "g" {}`, `1:1: expected "graph", found identifier "grph"`},
		{"unquoted graph name", "graph g {\n}", `1:7: expected the graph's name as a quoted string, found identifier "g"`},
		{"missing opening brace", "graph \"g\"\n  %0 = input {name = \"x\"} : f32[4]\n}", `2:3: expected "{" after the graph's name, found %0`},
		{"missing closing brace", head, `3:1: expected a value (%N = ...), "output" or "}", found end of input`},
		{"garbage after the graph", head + "}\nextra", `4:1: expected end of input after the graph, found identifier "extra"`},
		{"second graph", head + "}\ngraph \"h\" {}", `4:1: expected end of input after the graph`},
		{"unknown op", head + "  %1 = frobnicate %0 : f32[T, 4]\n}", `3:8: unknown op "frobnicate"`},
		{"op is a number", head + "  %1 = 12 : f32[T, 4]\n}", `3:8: expected an op name, found number 12`},
		{"missing equals", head + "  %1 silu %0 : f32[T, 4]\n}", `3:6: expected "=" after %1, found identifier "silu"`},
		{"bad dtype", head + "  %1 = silu %0 : f33[T, 4]\n}", `3:18: unknown dtype "f33"`},
		{"missing type", head + "  %1 = silu %0\n}", `4:1: expected ":" and the value's type, found "}"`},
		{"missing shape", head + "  %1 = silu %0 : f32\n}", `4:1: expected "[" and the shape after the dtype, found "}"`},
		{"unclosed shape", head + "  %1 = silu %0 : f32[T, 4\n}", `4:1: expected "," or "]" in the shape, found "}"`},
		{"negative dim", head + "  %1 = silu %0 : f32[T, -4]\n}", `3:25: dimension must be a non-negative integer or a symbol, found -4`},
		{"float dim", head + "  %1 = silu %0 : f32[T, 4.0]\n}", `3:25: dimension must be a non-negative integer or a symbol, found 4.0`},
		{"string dim", head + "  %1 = silu %0 : f32[\"T\", 4]\n}", `3:22: expected a dimension (integer or symbol), found string "T"`},
		{"undefined operand", head + "  %1 = silu %5 : f32[T, 4]\n}", `3:13: %5 is not defined before use`},
		{"forward reference", "graph \"g\" {\n  %0 = silu %1 : f32[4]\n  %1 = input {name = \"x\"} : f32[4]\n}", `2:13: %1 is not defined before use`},
		{"self reference", head + "  %1 = silu %1 : f32[T, 4]\n}", `3:13: %1 is not defined before use`},
		{"trailing comma in operands", head + "  %1 = add %0, : f32[T, 4]\n}", `3:16: expected an operand (%N) after ",", found ":"`},
		{"percent without number", head + "  %x = silu %0 : f32[T, 4]\n}", `3:3: expected a value number after '%'`},
		{"huge id", head + "  %99999999999999999999999 = silu %0 : f32[T, 4]\n}", `3:3: value number %99999999999999999999999 is out of range`},
		{"duplicate id", head + "  %0 = silu %0 : f32[T, 4]\n}", `3:3: duplicate value %0 (first defined at 2:3)`},
		{"bad attribute value", head + "  %1 = rmsnorm %0 {eps = small} : f32[T, 4]\n}", `3:26: expected an attribute value (number, string or list of numbers), found identifier "small"`},
		{"attribute without value", head + "  %1 = rmsnorm %0 {eps} : f32[T, 4]\n}", `3:23: expected "=" after attribute "eps", found "}"`},
		{"attribute name a number", head + "  %1 = rmsnorm %0 {1 = 2} : f32[T, 4]\n}", `3:20: expected an attribute name, found number 1`},
		{"unclosed attributes", head + "  %1 = rmsnorm %0 {eps = 1e-5 : f32[T, 4]\n}", `3:31: expected "," or "}" in the attributes, found ":"`},
		{"duplicate attribute", head + "  %1 = rmsnorm %0 {eps = 1.0, eps = 2.0} : f32[T, 4]\n}", `3:31: attribute "eps" given twice`},
		{"integer out of range", head + "  %1 = rmsnorm %0 {eps = 9223372036854775808} : f32[T, 4]\n}", `3:26: integer 9223372036854775808 is out of range`},
		{"float out of range", head + "  %1 = rmsnorm %0 {eps = 1e999} : f32[T, 4]\n}", `3:26: number 1e999 is out of range`},
		{"malformed exponent", head + "  %1 = rmsnorm %0 {eps = 1e} : f32[T, 4]\n}", `3:26: malformed number "1e": exponent has no digits`},
		{"float in an integer list", head + "  %1 = silu %0 {l = [1, 2.5]} : f32[T, 4]\n}", `3:25: list mixes integers and floats at 2.5`},
		{"integer in a float list", head + "  %1 = silu %0 {l = [1.5, 2]} : f32[T, 4]\n}", `3:27: list mixes floats and integers at 2`},
		{"string in a list", head + "  %1 = silu %0 {l = [\"a\"]} : f32[T, 4]\n}", `3:22: expected a number in the list, found string "a"`},
		{"unclosed list", head + "  %1 = silu %0 {l = [1 2]} : f32[T, 4]\n}", `3:24: expected "," or "]" in the list, found number 2`},
		{"unterminated string", head + "  %1 = input {name = \"y} : f32[4]\n}", `3:22: unterminated string`},
		{"string at end of input", "graph \"g", `1:7: unterminated string`},
		{"bad escape", head + "  %1 = input {name = \"a\\qb\"} : f32[4]\n}", `3:22: malformed string literal "\"a\\qb\""`},
		{"unexpected character", head + "  %1 = silu %0 @ : f32[T, 4]\n}", `3:16: unexpected character '@'`},
		{"invalid utf-8", head + "  %1 = silu \xff\n}", `3:13: unexpected byte 0xff`},
		{"single slash", head + "  / comment\n}", `3:3: unexpected character '/'`},
		{"column counts characters", "graph \"ééé\" x", `1:13: expected "{" after the graph's name, found identifier "x"`},
		// Rules Verify enforces, reported where the text breaks them.
		{"wrong arity", head + "  %1 = matmul %0 : f32[T, 4]\n}", `3:8: %1 (matmul): matmul takes 2 to 3 operands, got 1`},
		{"missing attribute", head + "  %1 = rmsnorm %0 : f32[T, 4]\n}", `3:8: %1 (rmsnorm): rmsnorm needs attribute "eps"`},
		{"type differs from inference", head + "  %1 = silu %0 : f32[T, 5]\n}", `3:18: %1 (silu): type is f32[T, 5], operands give f32[T, 4]`},
		{"inference fails", head + "  %1 = embed %0, %0 : f32[T, 4]\n}", `3:8: %1 (embed): embed ids must be i32[T], got f32[T, 4]`},
		{"bad reshape", head + "  %1 = reshape %0 : f32[T, 3]\n}", `3:21: %1 (reshape): [T, 4] and [T, 3] hold different element counts`},
		{"leaf without name", head + "  %1 = state {name = 3} : f32[4]\n}", `3:8: %1 (state): needs a non-empty string attribute "name"`},
		{"duplicate leaf name", head + "  %1 = input {name = \"x\"} : f32[4]\n}", `3:8: %1: input "x" declared twice (first at 2:8)`},
		{"output of undefined value", head + "  output \"o\" = %3\n}", `3:16: %3 is not defined before use`},
		{"output name unquoted", head + "  output o = %0\n}", `3:10: expected the output's name as a quoted string, found identifier "o"`},
		{"output without value", head + "  output \"o\" = x\n}", `3:16: expected the output's value (%N), found identifier "x"`},
		{"duplicate output", head + "  output \"o\" = %0\n  output \"o\" = %0\n}", `4:10: output "o" listed twice`},
		{"value after outputs", head + "  output \"o\" = %0\n  %1 = silu %0 : f32[T, 4]\n}", `4:3: values must come before the outputs`},
	}
	require.GreaterOrEqual(t, len(tests), 12)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse(tc.src)
			require.Nil(t, g)
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), tc.err), "got  %s\nwant %s", err, tc.err)
			require.NotContains(t, err.Error(), "\n", "errors are one line")
		})
	}
}

// TestGolden keeps hand-readable copies of the printed graphs in testdata.
// Each file is a comment header and then exactly Print's output; run
// `go test ./ir -run Golden -update` after a deliberate format change.
func TestGolden(t *testing.T) {
	graphs := roundTripGraphs(t)
	for _, name := range []string{"block", "all"} {
		path := filepath.Join("testdata", name+".ir")
		text := Print(graphs[name])
		if *update {
			header := "; " + name + ": written by `go test ./ir -run Golden -update`, checked by TestGolden.\n"
			require.NoError(t, os.WriteFile(path, []byte(header+text), 0o644))
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		g, err := Parse(string(data))
		require.NoError(t, err)
		require.Equal(t, text, Print(g))
		require.Equal(t, text, stripHeader(string(data)))
	}
}

func stripHeader(s string) string {
	for strings.HasPrefix(s, ";") || strings.HasPrefix(s, "//") {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return ""
		}
		s = s[i+1:]
	}
	return s
}

func FuzzParse(f *testing.F) {
	for _, g := range roundTripGraphs(f) {
		f.Add(Print(g))
	}
	f.Add("graph \"g\" {\n  %0 = input {name = \"x\", f = NaN, l = []} : f32[]\n  output \"x\" = %0\n}\n")
	f.Add("; header\ngraph \"g\" {} // trailing\n")
	f.Add("graph \"g\" {\n  %0 = input {name = \"x\"} : f32[T, 4]\n  %1 = reshape %0 : f32[4, T]\n}")
	f.Fuzz(func(t *testing.T, src string) {
		g, err := Parse(src)
		if err != nil {
			if g != nil {
				t.Fatalf("graph and error both returned: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if err := Verify(g); err != nil {
			t.Fatalf("parsed graph does not verify: %v", err)
		}
		text := Print(g)
		g2, err := Parse(text)
		if err != nil {
			t.Fatalf("printed graph does not parse: %v\n%s", err, text)
		}
		if text2 := Print(g2); text2 != text {
			t.Fatalf("print is not stable:\n%s\n---\n%s", text, text2)
		}
	})
}

// TestPrintInvalidGraph: Print is a debugging aid too, so it must cope with
// graphs that do not verify, and what it writes for them must not parse.
func TestPrintInvalidGraph(t *testing.T) {
	x := &Value{ID: 0, Op: OpInput, Attrs: Attrs{"name": "x", "k": struct{}{}}, Type: typ(DType(99), 2)}
	y := &Value{ID: 1, Op: OpSiLU, Args: []*Value{nil}, Type: typ(F32, 2)}
	g := &Graph{Name: "bad", Values: []*Value{x, nil, y}, Outputs: []Output{{"o", nil}}}
	want := `graph "bad" {
  %0 = input {k = <struct {} {}>, name = "x"} : dtype(99)[2]
  %<nil>
  %1 = silu %<nil> : f32[2]
  output "o" = %<nil>
}
`
	require.Equal(t, want, Print(g))
	_, err := Parse(Print(g))
	require.Error(t, err)
}
