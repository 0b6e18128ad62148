package hf

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Module is one module of the model as the directory stores it: its
// tensors, how they encode the weights, and the graph weight it becomes.
type Module struct {
	Name string // "model.layers.0.self_attn.q_proj"
	// Layout is the encoding: a float dtype ("BF16"), "MLX affine, 4
	// bits, group 64" (a .scales beside the weight), or "MXFP4" (openai's
	// _blocks and _scales).
	Layout string
	// Tensors describes each tensor: "weight U32 [512 8] in model.safetensors".
	Tensors []string
	// Graph lists the graph weights the module becomes, each with the type
	// the graph reads it in ("blk.0.attn_q.weight BF16"); empty when none
	// is read.
	Graph []string
}

// moduleSuffixes split a tensor name into its module and its part.
var moduleSuffixes = []string{".weight", ".bias", ".scales", ".biases", "_blocks", "_scales", "_bias"}

// Modules lists the directory's modules, sorted by name, with each one's
// layout and quantization as the tensors and config.json say. It works on
// a model that cannot run (opened with Inspect), to show why.
func (m *Model) Modules() []Module {
	if m.Tensors == nil {
		return nil
	}
	parts := map[string][]string{}
	for _, name := range m.Tensors.Names() {
		mod, part := name, ""
		for _, s := range moduleSuffixes {
			if strings.HasSuffix(name, s) {
				mod, part = strings.TrimSuffix(name, s), strings.TrimPrefix(s, ".")
				break
			}
		}
		parts[mod] = append(parts[mod], part)
	}
	// A graph weight may consume several tensors (MLX weight, scales,
	// biases) and a tensor may feed several weights (openai's gate_up
	// blocks: the gate and up experts), so each module lists each once.
	graph := map[string][]string{}
	for gg, d := range m.weights {
		for _, p := range d.parts {
			graph[p] = append(graph[p], gg+" "+strings.ToUpper(d.info.Type.String()))
		}
	}
	var out []Module
	for _, mod := range slices.Sorted(maps.Keys(parts)) {
		md := Module{Name: mod}
		has, listed := map[string]bool{}, map[string]bool{}
		for _, p := range parts[mod] {
			has[p] = true
			name := mod
			if p != "" {
				if strings.HasPrefix(p, "_") {
					name += p
				} else {
					name += "." + p
				}
			}
			t, f, _ := m.Tensors.Tensor(name)
			label := p
			if label == "" {
				label = "tensor"
			}
			md.Tensors = append(md.Tensors, fmt.Sprintf("%s %s %v in %s", strings.TrimPrefix(label, "_"), t.DType, t.Shape, filepath.Base(f.Path)))
			for _, g := range graph[name] {
				if !listed[g] {
					listed[g] = true
					md.Graph = append(md.Graph, g)
				}
			}
		}
		switch {
		case has["scales"]:
			if q := m.quant.lookup(mod); q != nil {
				md.Layout = "MLX " + q.String()
			} else {
				md.Layout = "MLX-style .scales, but config.json has no quantization for it"
			}
		case has["_blocks"]:
			md.Layout = "MXFP4"
		default:
			main := mod + ".weight"
			if !has["weight"] {
				main = mod
				if len(parts[mod]) == 1 && parts[mod][0] != "" {
					main = mod + "." + parts[mod][0]
				}
			}
			if t, _, ok := m.Tensors.Tensor(main); ok {
				md.Layout = string(t.DType)
			}
		}
		sort.Strings(md.Tensors)
		sort.Strings(md.Graph)
		out = append(out, md)
	}
	return out
}
