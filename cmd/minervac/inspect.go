package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/plan"
)

type inspectCmd struct {
	File   string `arg:"" help:"Model file (.gguf), model directory (Hugging Face SafeTensors, or a file inside one) or plan file." type:"path"`
	Verify bool   `help:"For a plan that refers to its model file: read every weight and check it against the digest the plan recorded (opening a plan checks only the file's size and header hash)."`
}

func (c *inspectCmd) Run() error {
	// A plan is opened without the model it refers to, so that one whose
	// model has moved can still be inspected (inspectPlan resolves it last);
	// a model directory this build cannot run still opens, to show why.
	src, err := frontend.OpenWith(c.File, frontend.Options{Unresolved: true, Inspect: true})
	if err != nil {
		return err
	}
	defer src.Close()
	if c.Verify && src.Format != frontend.FormatPlan {
		return usageError{fmt.Sprintf("--verify checks a plan against the model file it refers to; %s is a model, not a plan", c.File)}
	}
	switch src.Format {
	case frontend.FormatPlan:
		return inspectPlan(src, c.Verify)
	case frontend.FormatHF:
		return inspectDir(os.Stdout, src)
	}
	f := src.GGUF
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
	printArchSummary(w, src)
	return nil
}

// printArchSummary builds the graph of a model source and prints its
// configuration, or why this build cannot run it.
func printArchSummary(w io.Writer, src *frontend.Source) {
	m, err := src.Build(arch.Options{})
	if err != nil {
		fmt.Fprintf(w, "  not runnable by this build: %v\n", err)
		return
	}
	cfg := m.Config
	fmt.Fprintf(w, "  layers %d, embedding %d, heads %d (kv %d, head dim %d, rope dims %d), feed-forward %d\n",
		cfg.NLayer, cfg.NEmbd, cfg.NHead, cfg.NHeadKV, cfg.HeadDim, cfg.NRot, cfg.NFF)
	fmt.Fprintf(w, "  vocabulary %d (%s), context %d, rope base %g, rope freq scale %g, rms eps %g, tied output %v\n",
		cfg.NVocab, m.Vocab.Model, cfg.ContextLength, cfg.RopeBase, cfg.RopeFreqScale, cfg.RMSEps, cfg.TiedOutput)
	printExtras(w, cfg)
	fmt.Fprintf(w, "  graph: %d values, %d outputs\n", len(m.Graph.Values), len(m.Graph.Outputs))
}

// inspectPlan prints what a plan holds, opened without the model it refers
// to; whether the model is still there, unchanged, is reported at the end:
// its size and header hash, and with verify its tensor data.
func inspectPlan(src *frontend.Source, verify bool) error {
	p := src.Plan
	w := os.Stdout
	fmt.Fprintf(w, "file: %s (%d bytes)\nformat: minerva plan v%d, compiled by %s for target %s\n", src.Path, src.Size(), plan.FormatVersion, p.Compiler, p.Target)
	if p.Embedded {
		fmt.Fprintf(w, "weights: embedded (%d bytes)\n", p.Memory.WeightBytes)
	} else {
		fmt.Fprintf(w, "weights: referenced from %s (%d bytes, header sha256 %s, tensor data %s)\n", p.Model.Path, p.Model.Size, p.Model.HeaderSHA256, p.Model.WeightsDigest)
	}
	fmt.Fprintf(w, "model: %q, architecture %s\n", p.Model.Name, p.Model.Arch)
	cfg := p.Config
	fmt.Fprintf(w, "  layers %d, embedding %d, heads %d (kv %d, head dim %d), feed-forward %d, vocabulary %d (%s)\n",
		cfg.NLayer, cfg.NEmbd, cfg.NHead, cfg.NHeadKV, cfg.HeadDim, cfg.NFF, cfg.NVocab, p.Vocab.Model)
	printExtras(w, cfg)
	mem := p.Memory
	fmt.Fprintf(w, "memory: activation arena %d bytes per token (naive %d), KV cache %d bytes per position, default context %d\n",
		mem.ArenaBytesPerToken, mem.NaiveBytesPerToken, mem.KVBytesPerPosition, p.Context)
	base, slot := serveMemory(mem, p.Context, 0, serveChunk), serveMemory(mem, p.Context, 1, serveChunk)-serveMemory(mem, p.Context, 0, serveChunk)
	fmt.Fprintf(w, "serving estimate: %d MiB for minervac serve --parallel 4 --ctx %d (%.1f MiB + %.1f MiB per --parallel slot: the weights twice, the KV caches, the arena, 128 MiB of runtime; deploy/kubernetes requests it)\n",
		mib(serveMemory(mem, p.Context, 4, serveChunk)), p.Context, float64(base)/(1<<20), float64(slot)/(1<<20))
	counts := opCounts(p.Graph)
	fmt.Fprintf(w, "graph: %d ops per step, %d weight transforms at load:", total(counts), loadOps(counts))
	for _, op := range unionKeys(counts, nil) {
		fmt.Fprintf(w, " %s %d,", op, counts[op])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "sampling defaults: temperature %g, top-k %d, top-p %g, min-p %g, repeat penalty %g\n",
		p.Sampling.Temperature, p.Sampling.TopK, p.Sampling.TopP, p.Sampling.MinP, p.Sampling.RepeatPenalty)
	if err := inspectKernels(w, p); err != nil {
		return err
	}
	switch {
	case p.Embedded:
		// Open checked every section's CRC-32C, the weights' included.
		fmt.Fprintln(w, "status: every section's checksum verified, the embedded weights included")
	default:
		if err := src.ResolveModel(nil); err != nil {
			fmt.Fprintf(w, "status: cannot run: %v\n", err)
			if verify {
				return exitCode(1)
			}
			return nil
		}
		if !verify {
			fmt.Fprintln(w, "status: model file present, with the size and header SHA-256 (metadata and tensor table) the plan recorded; its tensor data is not read (inspect --verify checks it)")
			return nil
		}
		got, err := plan.WeightsDigest(p.Graph, src.Weights())
		if err != nil {
			return err
		}
		if got != p.Model.WeightsDigest {
			fmt.Fprintf(w, "status: the model file's tensor data has changed since the plan was compiled (%s, now %s): recompile %s\n", p.Model.WeightsDigest, got, src.Path)
			return exitCode(1)
		}
		fmt.Fprintf(w, "status: model file present, size, header SHA-256 and tensor data (%s) as the plan recorded\n", got)
	}
	return nil
}

// gpuLibrary is what the CUDA and Metal libraries in a plan's kernels
// section have in common (codegen/cuda.Library, codegen/metal.Library).
type gpuLibrary struct {
	Source  string `json:"source"`
	Kernels []struct {
		Name   string `json:"name"`
		Family string `json:"family"`
	} `json:"kernels"`
	Launches []sched.Launch `json:"launches"`
}

// inspectKernels lists a GPU plan's kernels: how many of each family, the
// launches of a decode step (T = 1) and of a prefill step, and the source
// size (compile --emit cuda|metal prints the source).
func inspectKernels(w io.Writer, p *plan.Plan) error {
	section := p.Kernels[p.Target]
	if len(section) == 0 {
		return nil
	}
	var lib gpuLibrary
	if err := json.Unmarshal(section, &lib); err != nil {
		return fmt.Errorf("kernels section for %s: %w", p.Target, err)
	}
	families := map[string]int{}
	for _, k := range lib.Kernels {
		families[k.Family]++
	}
	fmt.Fprintf(w, "kernels (%s): %d,", p.Target, len(lib.Kernels))
	for _, f := range unionKeys(families, nil) {
		fmt.Fprintf(w, " %s %d,", f, families[f])
	}
	T := min(512, p.Context)
	fmt.Fprintf(w, " source %d bytes; launches per step: %d decode (T = 1), %d prefill (T = %d)\n",
		len(lib.Source), len(sched.Step(lib.Launches, 1)), len(sched.Step(lib.Launches, T)), T)
	return nil
}

// Serving memory estimate (inspect prints it; deploy/kubernetes requests it,
// and TestKubernetesManifests holds the manifests to it).
const (
	// serveChunk is serve's default --chunk: prompt tokens read in a step
	// beside the running sequences.
	serveChunk = 64
	// serveRuntime is the process beside the model: the Go runtime, the
	// tokenizer, the HTTP server, the backend's worker pool.
	serveRuntime = 128 << 20
)

// serveMemory estimates the memory of `minervac serve` running a plan with
// memory summary m, parallel slots of ctx positions and chunk prompt tokens
// per step: the weights twice (the mapped file, whose pages count against a
// container's memory, and at most one copy of each: the matrices fusion
// concatenates at load, the CPU backend's interleaved groups), every slot's
// KV cache, the activation arena of the widest step (a row per slot and a
// chunk of prompt), and serveRuntime (which also covers the logits, outside
// the arena: a row of vocabulary × 4 bytes per slot, under a MiB each).
func serveMemory(m plan.Memory, ctx, parallel, chunk int) int64 {
	return 2*m.WeightBytes + int64(parallel)*int64(ctx)*m.KVBytesPerPosition +
		int64(parallel+chunk)*m.ArenaBytesPerToken + serveRuntime
}

// mib rounds n bytes up to MiB.
func mib(n int64) int64 { return (n + 1<<20 - 1) >> 20 }

// printExtras prints what only some families have, one line each: experts,
// a sliding attention window (phi3 on every layer, gpt-oss on some), rope
// scaling.
func printExtras(w io.Writer, cfg plan.Config) {
	if cfg.NExpert > 0 {
		fmt.Fprintf(w, "  experts %d (%d used per token, feed-forward %d)\n", cfg.NExpert, cfg.NExpertUsed, cfg.NFFExp)
	}
	if cfg.SlidingWindow > 0 {
		layers := "every layer"
		if len(cfg.SlidingLayers) > 0 {
			layers = fmt.Sprintf("layers %v (the others attend to the whole context)", cfg.SlidingLayers)
		}
		fmt.Fprintf(w, "  sliding window %d positions on %s\n", cfg.SlidingWindow, layers)
	}
	if cfg.RopeScaling != "" {
		fmt.Fprintf(w, "  rope scaling %s (original context %d)\n", cfg.RopeScaling, cfg.RopeOrigCtx)
	}
}
