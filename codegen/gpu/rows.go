package gpu

import (
	"fmt"

	"github.com/minerva-llm/minerva/codegen/internal/kernsrc"
	"github.com/minerva-llm/minerva/ir"
)

func (e *Emitter) rmsnorm(v *ir.Value) error {
	k, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	p := &Params{K: k, Gain: len(v.Args) == 2}
	if p.Eps, err = kernsrc.FloatLiteral(v.Attrs.Float("eps", 0)); err != nil {
		return err
	}
	args := []Arg{val(v.Args[0])}
	p.GainT = "float"
	if p.Gain {
		if p.GainT, err = e.operandType("gain", v.Args[1]); err != nil {
			return err
		}
		args = append(args, val(v.Args[1]))
	}
	p.Name = fmt.Sprintf("rmsnorm%s_%d", map[bool]string{true: "_gain"}[p.Gain], k)
	if p.GainT == e.Lang.F16 {
		p.Name += "_f16"
	}
	return e.rowKernel(v, "rmsnorm", p, append(args, val(v)))
}

func (e *Emitter) softmax(v *ir.Value) error {
	k, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	p := &Params{Name: fmt.Sprintf("softmax_%d", k), K: k}
	return e.rowKernel(v, "softmax", p, []Arg{val(v.Args[0]), val(v)})
}

// rowKernel adds a kernel of one warp (simdgroup) per row and its launch.
func (e *Emitter) rowKernel(v *ir.Value, family string, p *Params, args []Arg) error {
	rows, err := RowsOf(v.Type)
	if err != nil {
		return err
	}
	p.bind(args)
	name, err := e.Add(family, "", p)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: name, Threads: 32, Args: args,
		Grid: [3]GridDim{{N: 1}, rows, {N: 1}}})
	return nil
}

// eltwise: add and mul broadcast b over a's leading dims (b is a's trailing
// shape); silu and gelu are unary.
func (e *Emitter) eltwise(v *ir.Value) error {
	k, err := kernsrc.LastConst(v.Type)
	if err != nil {
		return err
	}
	p := &Params{K: k, Threads: 32}
	args := []Arg{val(v.Args[0])}
	switch v.Op {
	case ir.OpAdd, ir.OpMul:
		b := v.Args[1]
		if p.BT, err = e.operandType("right operand", b); err != nil {
			return err
		}
		p.Binary = true
		args = append(args, val(b))
		op := map[ir.Op]string{ir.OpAdd: "+", ir.OpMul: "*"}[v.Op]
		p.Expr = "x " + op + " y"
		// b is a's trailing shape: the whole of a (index at), or rows that
		// cycle.
		switch {
		case b.Type.Shape.Equal(v.Args[0].Type.Shape):
			p.BIndex = "at"
			p.Name = fmt.Sprintf("%s_%d", v.Op, k)
		default:
			bn := int64(1)
			for _, d := range b.Type.Shape {
				if !d.IsConst() {
					return fmt.Errorf("broadcast operand %s has a symbolic dimension", b.Type)
				}
				bn *= d.N
			}
			p.BIndex = fmt.Sprintf("at %% %du", bn)
			p.Name = fmt.Sprintf("%s_%d_b%d", v.Op, k, bn)
		}
	case ir.OpSiLU:
		p.Expr, p.Name = fmt.Sprintf("x / (1.0f + %s(-x))", e.Lang.math("expf")), fmt.Sprintf("silu_%d", k)
	case ir.OpGELU:
		p.Expr = fmt.Sprintf("0.5f * x * (1.0f + %s(0.7978845608028654f * (x + 0.044715f * x * x * x)))", e.Lang.math("tanhf"))
		p.Name = fmt.Sprintf("gelu_%d", k)
	}
	if p.BT == e.Lang.F16 {
		p.Name += "_f16"
	}
	rows, err := RowsOf(v.Type)
	if err != nil {
		return err
	}
	args = append(args, val(v))
	p.bind(args)
	name, err := e.Add("eltwise", "", p)
	if err != nil {
		return err
	}
	e.Launch(Launch{Value: v.ID, Kernel: name, Threads: 32, Args: args,
		Grid: [3]GridDim{{N: kernsrc.CeilDiv(k, 32)}, rows, {N: 1}}})
	return nil
}
