package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/hf"
)

// inspectDir prints a model directory: its files (each shard's tensors and
// metadata), config.json, the quantization, generation defaults and
// tokenizer, every module with its layout and the graph weight it becomes,
// and the architecture summary, or why this build cannot run the model.
func inspectDir(w io.Writer, src *frontend.Source) error {
	m := src.HF
	fmt.Fprintf(w, "directory: %s\n", src.Path)
	class := m.Class
	if class == "" {
		class = "an architecture this build does not run"
	}
	fmt.Fprintf(w, "format: Hugging Face model directory (%s), %d files, %d bytes\n", class, len(m.Parts), src.Size())

	fmt.Fprintf(w, "\nfiles:\n")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	shards := map[string]int{}
	if m.Tensors != nil {
		for _, f := range m.Tensors.Files {
			shards[filepath.Base(f.Path)] = len(f.Tensors)
		}
	}
	for _, p := range m.Parts {
		extra := ""
		if p.Role == "shard" {
			for _, f := range m.Tensors.Files {
				if f.Path == p.Path {
					extra = fmt.Sprintf("%d tensors, header %d bytes, data at byte %d, metadata %v", len(f.Tensors), f.HeaderLen, f.DataOffset(), f.Metadata)
				}
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d bytes\t%s\n", filepath.Base(p.Path), p.Role, p.Size, extra)
	}
	tw.Flush()

	keys := m.ConfigKeys()
	fmt.Fprintf(w, "\nconfig.json (%d keys):\n", len(keys))
	for _, kv := range keys {
		fmt.Fprintf(w, "  %-32s %s\n", kv[0], kv[1])
	}
	if q := m.Quantization(); q != "" {
		fmt.Fprintf(w, "\nquantization: %s\n", q)
	} else {
		fmt.Fprintf(w, "\nquantization: none (float weights)\n")
	}
	g := m.Generation
	s := g.Sampling()
	fmt.Fprintf(w, "generation: eos %v (with the tokenizer's: %v), bos %d; sampling defaults: temperature %g, top-k %d, top-p %g, min-p %g, repeat penalty %g\n",
		g.EOS, m.EOS(), g.BOS, s.Temperature, s.TopK, s.TopP, s.MinP, s.RepeatPenalty)
	if m.HasTokenizer {
		v, _ := m.Vocab()
		fmt.Fprintf(w, "tokenizer: %s, %s, %d tokens, BOS %d, EOS %d, add BOS %v; chat template %d bytes\n",
			hf.TokenizerName, v.Model, len(v.Tokens), v.BOS, v.EOS, v.AddBOS, len(m.ChatTemplate()))
	} else {
		fmt.Fprintf(w, "tokenizer: none (the model runs from token ids)\n")
	}

	mods := m.Modules()
	layouts := map[string]int{}
	for _, md := range mods {
		layouts[md.Layout]++
	}
	var ls []string
	for l, n := range layouts {
		ls = append(ls, fmt.Sprintf("%d %s", n, l))
	}
	sort.Strings(ls)
	fmt.Fprintf(w, "\nmodules (%d: %s):\n", len(mods), strings.Join(ls, ", "))
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, md := range mods {
		graph := strings.Join(md.Graph, ", ")
		if graph == "" {
			graph = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t→ %s\n", md.Name, md.Layout, strings.Join(md.Tensors, "; "), graph)
	}
	tw.Flush()

	fmt.Fprintf(w, "\narchitecture: %s", m.Architecture())
	if m.Architecture() != "" {
		fmt.Fprintf(w, " (the graph of frontend/arch's %s family; q/k rows in rotate-half order, NEOX RoPE)", m.Architecture())
	}
	fmt.Fprintln(w)
	printArchSummary(w, src)
	return nil
}
