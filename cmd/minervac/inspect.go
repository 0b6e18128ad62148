package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/minerva-llm/minerva/frontend/arch"
)

type inspectCmd struct {
	File string `arg:"" help:"Model file (.gguf)." type:"path"`
}

func (c *inspectCmd) Run() error {
	f, err := openGGUF(c.File)
	if err != nil {
		return err
	}
	defer f.Close()
	w := os.Stdout
	fmt.Fprintf(w, "file: %s\nformat: GGUF v%d, %d bytes, alignment %d, data at byte %d\n", c.File, f.Version, f.Size(), f.Alignment, f.DataOffset)
	fmt.Fprintf(w, "\nmetadata (%d keys):\n", len(f.KV))
	for _, kv := range f.KV {
		fmt.Fprintf(w, "  %-45s %s\n", kv.Key, kv.Value.String())
	}
	fmt.Fprintf(w, "\ntensors (%d):\n", len(f.Tensors))
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	var total uint64
	byType := map[string]uint64{}
	for _, t := range f.Tensors {
		dims := make([]string, len(t.Dims))
		for i, d := range t.Dims {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(tw, "  %s\t%s\t[%s]\t%d bytes\n", t.Name, strings.ToUpper(t.Type.String()), strings.Join(dims, ", "), t.Size)
		total += t.Size
		byType[strings.ToUpper(t.Type.String())] += t.Size
	}
	tw.Flush()
	fmt.Fprintf(w, "  total %d bytes", total)
	for typ, n := range byType {
		fmt.Fprintf(w, ", %s %d", typ, n)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\narchitecture: %s\n", f.Architecture())
	m, err := arch.Load(f, arch.Options{})
	if err != nil {
		fmt.Fprintf(w, "  not runnable by this build: %v\n", err)
		return nil
	}
	cfg := m.Config
	fmt.Fprintf(w, "  layers %d, embedding %d, heads %d (kv %d, head dim %d, rope dims %d), feed-forward %d\n",
		cfg.NLayer, cfg.NEmbd, cfg.NHead, cfg.NHeadKV, cfg.HeadDim, cfg.NRot, cfg.NFF)
	fmt.Fprintf(w, "  vocabulary %d (%s), context %d, rope base %g, rope freq scale %g, rms eps %g, tied output %v\n",
		cfg.NVocab, m.Vocab.Model, cfg.ContextLength, cfg.RopeBase, cfg.RopeFreqScale, cfg.RMSEps, cfg.TiedOutput)
	fmt.Fprintf(w, "  graph: %d values, %d outputs\n", len(m.Graph.Values), len(m.Graph.Outputs))
	return nil
}
