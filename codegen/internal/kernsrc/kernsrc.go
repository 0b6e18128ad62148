// Package kernsrc holds what the source-emitting backends (codegen/metal,
// codegen/cuda) share: float literals, shape helpers and constant templates.
// The kernels themselves stay per target.
package kernsrc

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/template"

	"github.com/minerva-llm/minerva/ir"
)

// FloatLiteral renders x as a C-family float literal ("1.5f", "2.0f",
// "1e-05f") that reads back as float32(x); non-finite or out-of-range
// values are an error.
func FloatLiteral(x float64) (string, error) {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > math.MaxFloat32 {
		return "", fmt.Errorf("constant %v is not a finite float", x)
	}
	s := strconv.FormatFloat(float64(float32(x)), 'g', -1, 32)
	if !strings.ContainsAny(s, ".en") {
		s += ".0"
	}
	return s + "f", nil
}

// Rows returns the rows of a [..., W] value: the product of its constant
// leading dims, and whether one of them is T (then there are n·T rows).
func Rows(t ir.Type) (n int64, perToken bool, err error) {
	n = 1
	for _, x := range t.Shape[:len(t.Shape)-1] {
		switch {
		case x.IsConst():
			n *= x.N
		case x.Sym == "T" && !perToken:
			perToken = true
		default:
			return n, perToken, fmt.Errorf("leading dimension %s of %s is not T or a constant", x, t)
		}
	}
	return n, perToken, nil
}

// LastConst returns the constant positive last dimension of t.
func LastConst(t ir.Type) (int64, error) {
	if len(t.Shape) == 0 || !t.Shape.Last().IsConst() || t.Shape.Last().N <= 0 {
		return 0, fmt.Errorf("needs a constant positive last dimension, got %s", t)
	}
	return t.Shape.Last().N, nil
}

// CeilDiv is a/b rounded up.
func CeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Render executes a constant template over plain data; a template that
// does not parse or execute is a programming error and panics.
func Render(src string, data any) string {
	var b bytes.Buffer
	if err := template.Must(template.New("").Parse(src)).Execute(&b, data); err != nil {
		panic(err)
	}
	return b.String()
}
