package quant_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// dequantEntry is one tensor of golden/dequant/*.json.
type dequantEntry struct {
	File      string   `json:"file"`
	Fixture   string   `json:"fixture"`
	ModelRoot string   `json:"model_root"`
	Tensor    string   `json:"tensor"`
	GGMLType  string   `json:"ggml_type"`
	NE        []uint64 `json:"ne"`
	N         int      `json:"n_elements"`
}

func readIndex(t *testing.T, rel string) []dequantEntry {
	t.Helper()
	b, err := os.ReadFile(shared.Path(t, rel))
	require.NoError(t, err)
	var idx struct {
		Tensors []dequantEntry `json:"tensors"`
	}
	require.NoError(t, json.Unmarshal(b, &idx))
	require.NotEmpty(t, idx.Tensors, rel)
	return idx.Tensors
}

// openGGUF opens a fixture relative to shared/ and closes it with the test.
func openGGUF(t *testing.T, rel string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, rel))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func tensorData(t *testing.T, f *gguf.File, name string) (*gguf.TensorInfo, []byte) {
	t.Helper()
	ti, ok := f.Tensor(name)
	require.True(t, ok, "tensor %s missing", name)
	data := f.TensorData(ti)
	require.NotNil(t, data, "tensor %s has no data", name)
	return ti, data
}

// firstMismatch returns the first index where the float32 bit patterns of a
// and b differ, or -1. Bit equality, not ==: -0 must stay -0 and NaN NaN.
func firstMismatch(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestGoldenDequant decodes every tensor listed in the dequantization goldens
// and requires the result to equal the reference engine's float32 output bit
// for bit. This is the acceptance test of the package: it covers Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, Q2_K..Q6_K (llama.cpp) and MXFP4 (ik_llama.cpp).
func TestGoldenDequant(t *testing.T) {
	var entries []dequantEntry
	for _, idx := range []string{"golden/dequant/dequant.json", "golden/dequant/gptoss-dequant.json"} {
		entries = append(entries, readIndex(t, idx)...)
	}
	seen := map[ir.DType]bool{}
	for _, e := range entries {
		t.Run(e.File, func(t *testing.T) {
			require.Equal(t, "shared", e.ModelRoot)
			want, ok := ir.ParseDType(e.GGMLType)
			require.True(t, ok, "unknown ggml_type %q", e.GGMLType)
			seen[want] = true

			f := openGGUF(t, e.Fixture)
			ti, data := tensorData(t, f, e.Tensor)
			require.Equal(t, want, ti.Type)
			require.Equal(t, e.NE, ti.Dims)
			require.Equal(t, int64(e.N), ti.Elements())
			require.True(t, quant.Supported(ti.Type))

			got := make([]float32, e.N)
			require.NoError(t, quant.Dequantize(ti.Type, data, got))

			raw, err := os.ReadFile(shared.Path(t, filepath.Join("golden/dequant", e.File)))
			require.NoError(t, err)
			require.Len(t, raw, 4*e.N)
			ref := make([]float32, e.N)
			for i := range ref {
				ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			if i := firstMismatch(got, ref); i >= 0 {
				require.Failf(t, "dequantization differs from the reference",
					"%s %s: first mismatch at element %d (row %d, col %d): got %g (%#08x), want %g (%#08x)",
					e.GGMLType, e.Tensor, i, i/int(e.NE[0]), i%int(e.NE[0]),
					got[i], math.Float32bits(got[i]), ref[i], math.Float32bits(ref[i]))
			}
		})
	}
	// The goldens are meant to cover every quantized format of the fixtures;
	// catch an index that silently lost a type.
	for _, d := range []ir.DType{ir.Q4_0, ir.Q4_1, ir.Q5_0, ir.Q5_1, ir.Q8_0, ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K, ir.MXFP4} {
		require.True(t, seen[d], "no golden for %s", d)
	}
}

// TestQuantizeMatchesReferenceFiles quantizes the float32 master weights of the
// synthetic fixtures and requires the exact bytes that the reference's
// llama-quantize (no importance matrix, so quantize_row_*_ref) wrote. All the
// llama-p-* files come from one F32 master; the gpt-oss MXFP4 experts come from
// the F32 experts of gptoss-g1-q8emb.gguf.
func TestQuantizeMatchesReferenceFiles(t *testing.T) {
	type source struct {
		master, quantized string
		tensors           []string
	}
	llama := func(typ string) source {
		return source{
			master:    "models/gguf/synthetic/llama-p-F32.gguf",
			quantized: "models/gguf/synthetic/llama-p-" + typ + ".gguf",
			// Both shapes: ne [512 256] (rows of 512) and ne [256 512].
			tensors: []string{"blk.0.ffn_down.weight", "token_embd.weight", "blk.1.attn_k.weight"},
		}
	}
	cases := map[string]source{
		"MXFP4": {
			master:    "models/gguf/synthetic/gptoss-g1-q8emb.gguf",
			quantized: "models/gguf/synthetic/gptoss-g1-mxfp4.gguf",
			tensors:   []string{"blk.0.ffn_down_exps.weight", "blk.1.ffn_gate_exps.weight"},
		},
	}
	for _, typ := range []string{"F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"} {
		cases[typ] = llama(typ)
	}
	for typ, src := range cases {
		t.Run(typ, func(t *testing.T) {
			d, ok := ir.ParseDType(typ)
			require.True(t, ok)
			mf := openGGUF(t, src.master)
			qf := openGGUF(t, src.quantized)
			for _, name := range src.tensors {
				mi, mdata := tensorData(t, mf, name)
				require.Equal(t, ir.F32, mi.Type, "%s: master is not F32", name)
				x := make([]float32, mi.Elements())
				require.NoError(t, quant.Dequantize(ir.F32, mdata, x))

				qi, want := tensorData(t, qf, name)
				require.Equal(t, d, qi.Type, "%s", name)
				require.Equal(t, mi.Dims, qi.Dims, "%s", name)
				got := make([]byte, len(want))
				require.NoError(t, quant.Quantize(d, x, got))
				if !bytes.Equal(got, want) {
					bb := d.BlockBytes()
					for i := 0; i < len(want); i += bb {
						if !bytes.Equal(got[i:i+bb], want[i:i+bb]) {
							require.Failf(t, "quantized bytes differ from the reference file",
								"%s %s: first differing block %d: got %x, want %x", typ, name, i/bb, got[i:i+bb], want[i:i+bb])
						}
					}
				}
			}
		})
	}
}
