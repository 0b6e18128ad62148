package ir

import "fmt"

// Builder appends values to a graph, inferring each result type as it goes.
// The first error is kept and returned by Finish, so frontends can build a
// whole model without checking every call; after an error the builder keeps
// returning placeholder values.
type Builder struct {
	g   *Graph
	err error
}

// NewBuilder starts an empty graph.
func NewBuilder(name string) *Builder { return &Builder{g: &Graph{Name: name}} }

// Err returns the first error met so far.
func (b *Builder) Err() error { return b.err }

func (b *Builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Add appends a value of op with the given operands and attributes. For leaf
// ops and reshape the type is taken from declared; otherwise it is inferred.
func (b *Builder) Add(op Op, attrs Attrs, declared *Type, args ...*Value) *Value {
	a, err := attrs.Clone()
	if err != nil {
		b.fail(fmt.Errorf("%s: %w", op, err))
	}
	v := &Value{ID: len(b.g.Values), Op: op, Args: args, Attrs: a}
	if b.err == nil {
		for _, x := range args {
			if x == nil {
				b.fail(fmt.Errorf("%s: nil operand", op))
			}
		}
	}
	if b.err == nil {
		t, err := Infer(op, args, v.Attrs)
		if err != nil {
			what := string(op)
			if name := attrs.Str("name", ""); name != "" {
				what += " " + name
			}
			b.fail(fmt.Errorf("%s: %w", what, err))
		}
		if declared != nil {
			t = *declared
		}
		v.Type = t
	}
	b.g.Values = append(b.g.Values, v)
	return v
}

// Input declares a per-step input such as the token ids.
func (b *Builder) Input(name string, t Type) *Value {
	return b.Add(OpInput, Attrs{"name": name}, &t)
}

// Weight declares a model tensor (shape row-major: a GGUF ne=[K, N] is [N, K]).
func (b *Builder) Weight(name string, t Type) *Value {
	return b.Add(OpWeight, Attrs{"name": name}, &t)
}

// State declares a buffer that persists across steps (a KV cache).
func (b *Builder) State(name string, t Type) *Value {
	return b.Add(OpState, Attrs{"name": name}, &t)
}

func (b *Builder) Embed(table, ids *Value) *Value { return b.Add(OpEmbed, nil, nil, table, ids) }

// RMSNorm normalises over the last axis; gain may be nil.
func (b *Builder) RMSNorm(x, gain *Value, eps float64) *Value {
	if gain == nil {
		return b.Add(OpRMSNorm, Attrs{"eps": eps}, nil, x)
	}
	return b.Add(OpRMSNorm, Attrs{"eps": eps}, nil, x, gain)
}

// MatMul computes x·wᵀ (+ bias when bias is not nil).
func (b *Builder) MatMul(x, w, bias *Value) *Value {
	if bias == nil {
		return b.Add(OpMatMul, nil, nil, x, w)
	}
	return b.Add(OpMatMul, nil, nil, x, w, bias)
}

func (b *Builder) AddV(x, y *Value) *Value { return b.Add(OpAdd, nil, nil, x, y) }
func (b *Builder) Mul(x, y *Value) *Value  { return b.Add(OpMul, nil, nil, x, y) }
func (b *Builder) SiLU(x *Value) *Value    { return b.Add(OpSiLU, nil, nil, x) }
func (b *Builder) GELU(x *Value) *Value    { return b.Add(OpGELU, nil, nil, x) }
func (b *Builder) Softmax(x *Value) *Value { return b.Add(OpSoftmax, nil, nil, x) }
func (b *Builder) RoPE(x, pos *Value, attrs Attrs) *Value {
	return b.Add(OpRoPE, attrs, nil, x, pos)
}

func (b *Builder) KVWrite(cache, x, pos *Value) *Value {
	return b.Add(OpKVWrite, nil, nil, cache, x, pos)
}

// Attention over the cache; sinks may be nil.
func (b *Builder) Attention(q, k, v, pos, sinks *Value, attrs Attrs) *Value {
	if sinks == nil {
		return b.Add(OpAttention, attrs, nil, q, k, v, pos)
	}
	return b.Add(OpAttention, attrs, nil, q, k, v, pos, sinks)
}

// Reshape views x with a new shape of the same element count.
func (b *Builder) Reshape(x *Value, s Shape) *Value {
	t := Type{Shape: s}
	if x != nil { // a nil x is reported by Add like any other nil operand
		t.DType = x.Type.DType
	}
	return b.Add(OpReshape, nil, &t, x)
}

// Output names a result of the graph.
func (b *Builder) Output(name string, v *Value) {
	b.g.Outputs = append(b.g.Outputs, Output{Name: name, Value: v})
}

// Finish verifies the graph and returns it, or the first error met.
func (b *Builder) Finish() (*Graph, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := Verify(b.g); err != nil {
		return nil, err
	}
	return b.g, nil
}
