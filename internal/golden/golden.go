// Package golden reads the reference engine's outputs in ../shared/golden
// (see its README.md): end-to-end cases with prompt tokens, greedy
// continuations and logits, and the tolerances each model kind is held to.
package golden

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
)

// Case is one end-to-end case (a case.json).
type Case struct {
	Name         string    `json:"case"`
	Model        string    `json:"model"`
	PromptText   *string   `json:"prompt_text"`
	AddBOS       bool      `json:"add_bos"`
	PromptTokens []int32   `json:"prompt_tokens"`
	NVocab       int       `json:"n_vocab"`
	NGen         int       `json:"n_gen"`
	GenTokens    []int32   `json:"gen_tokens"`
	GenText      string    `json:"gen_text"`
	GenTextHex   string    `json:"gen_text_hex"`
	Margins      []float64 `json:"gen_top1_margin"`
	ModelInfo    struct {
		MatrixTypes []string `json:"matrix_types"`
	} `json:"model_info"`

	Dir       string      `json:"-"` // absolute folder of the case
	ModelPath string      `json:"-"` // absolute path of the GGUF
	LogitsAll [][]float32 `json:"-"` // [n_prompt][n_vocab]
	GenLogits [][]float32 `json:"-"` // [min(8, n_gen)][n_vocab]
}

// Cases loads every case listed in e2e/<index> (index.json for llama,
// index-gptoss.json for gpt-oss), logits included.
func Cases(t testing.TB, index string) []*Case {
	t.Helper()
	root := shared.Path(t, "golden")
	var idx struct {
		Cases []struct {
			Case string `json:"case"`
		} `json:"cases"`
	}
	readJSON(t, filepath.Join(root, "e2e", index), &idx)
	if len(idx.Cases) == 0 {
		t.Fatalf("golden index %s lists no cases", index)
	}
	cases := make([]*Case, 0, len(idx.Cases))
	for _, e := range idx.Cases {
		c := &Case{Dir: filepath.Join(root, "e2e", e.Case)}
		readJSON(t, filepath.Join(c.Dir, "case.json"), c)
		c.ModelPath = filepath.Join(filepath.Dir(root), c.Model)
		c.LogitsAll = ReadRows(t, filepath.Join(c.Dir, "logits_all.f32"), c.NVocab)
		c.GenLogits = ReadRows(t, filepath.Join(c.Dir, "gen_logits.f32"), c.NVocab)
		if len(c.LogitsAll) != len(c.PromptTokens) {
			t.Fatalf("%s: %d logits rows for %d prompt tokens", c.Name, len(c.LogitsAll), len(c.PromptTokens))
		}
		cases = append(cases, c)
	}
	return cases
}

// Tolerance is the bound on max|a−b| / max|ref| that README.md gives for a
// model whose matrices have these types: 1e-4 for F32 and MLX affine
// (README-hf.md), 2e-3 for F16 and BF16, 5e-2 for the ggml quantized types.
func (c *Case) Tolerance() float64 {
	tol := 1e-4
	for _, ty := range c.ModelInfo.MatrixTypes {
		switch ty {
		case "F32":
		case "F16", "BF16":
			tol = math.Max(tol, 2e-3)
		case "MLX_AFFINE_Q4_G32", "MLX_AFFINE_Q4_G64", "MLX_AFFINE_Q4_G128", "MLX_AFFINE_Q8_G32", "MLX_AFFINE_Q8_G64", "MLX_AFFINE_Q8_G128":
			// README-hf.md: the reference ran its F32 twin of the exactly
			// dequantized values, activations float on both sides.
		default:
			tol = math.Max(tol, 5e-2)
		}
	}
	return tol
}

// RelErr returns max|a−b| / max|ref|, the README's comparison measure.
func RelErr(got, ref []float32) float64 {
	var diff, scale float64
	for i, r := range ref {
		diff = math.Max(diff, math.Abs(float64(got[i])-float64(r)))
		scale = math.Max(scale, math.Abs(float64(r)))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}

// MaxAbs returns max|x|.
func MaxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// CompareTokens applies the README's near-tie rule: tokens must be equal,
// except that a mismatch at step i whose reference top-1 margin is at most
// 2·tol·scale is a numerical tie, after which the sequences may diverge. It
// returns the number of steps compared and an error for a real mismatch.
func (c *Case) CompareTokens(got []int32, tol float64) (int, error) {
	if len(got) < len(c.GenTokens) {
		return 0, fmt.Errorf("generated %d tokens, want %d", len(got), len(c.GenTokens))
	}
	scale := MaxAbs(c.LogitsAll[len(c.LogitsAll)-1])
	for i, want := range c.GenTokens {
		if got[i] == want {
			continue
		}
		if i < len(c.GenLogits) {
			scale = MaxAbs(c.GenLogits[i])
		}
		if tol > 1e-4 && c.Margins[i] <= 2*tol*scale {
			return i, nil
		}
		return i, fmt.Errorf("step %d: token %d, want %d (reference margin %.3g, not a near tie)", i, got[i], want, c.Margins[i])
	}
	return len(c.GenTokens), nil
}

// ReadRows reads a raw little-endian float32 file as rows of width n.
func ReadRows(t testing.TB, path string, n int) [][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 || len(b)%(4*n) != 0 {
		t.Fatalf("%s: %d bytes is not a whole number of rows of %d float32", path, len(b), n)
	}
	v := ReadF32(b)
	rows := make([][]float32, len(v)/n)
	for i := range rows {
		rows[i] = v[i*n : (i+1)*n]
	}
	return rows
}

// ReadF32 decodes raw little-endian float32 bytes.
func ReadF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Evaluator appends tokens to a sequence and returns the logits row of each
// (runtime.Session does).
type Evaluator interface {
	Eval(tokens []int32) ([][]float32, error)
}

// RequireTeacherForced evaluates the prompt in one step, then the golden
// tokens one at a time, and requires every prompt row and every stored
// generated row to be within tol·max|ref| of the reference. It returns the
// worst relative error seen.
func (c *Case) RequireTeacherForced(t testing.TB, s Evaluator, tol float64) float64 {
	t.Helper()
	rows, err := s.Eval(c.PromptTokens)
	require.NoError(t, err)
	worst := 0.0
	for i, ref := range c.LogitsAll {
		e := RelErr(rows[i], ref)
		require.LessOrEqualf(t, e, tol, "prompt position %d: logits error %.3g > %.3g", i, e, tol)
		worst = max(worst, e)
	}
	last := rows[len(rows)-1]
	for i, ref := range c.GenLogits {
		e := RelErr(last, ref)
		require.LessOrEqualf(t, e, tol, "generated step %d: logits error %.3g > %.3g", i, e, tol)
		worst = max(worst, e)
		r, err := s.Eval([]int32{c.GenTokens[i]})
		require.NoError(t, err)
		last = r[0]
	}
	return worst
}
