package runtime_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/runtime"
	_ "github.com/minerva-llm/minerva/runtime/cpu" // registers the CPU backend, "goasm"
)

// storiesPath is the tiny stories model of the shared test data, as seen
// from this package's directory (tests run there).
const storiesPath = "../../shared/models/gguf/stories260K.gguf"

// Open a model file, build its graph, compile it on a backend, open a
// session and stream greedy text as it is generated.
func Example() {
	src, err := frontend.Open(storiesPath) // maps the file
	if err != nil {
		log.Fatal(err)
	}
	built, err := src.Build(arch.Options{})
	if err != nil {
		log.Fatal(err)
	}
	model, err := runtime.NewModel(built.Graph, built.Weights, built.Vocab, built.Config.ContextLength)
	if err != nil {
		log.Fatal(err)
	}
	model.Closer = src // model.Close unmaps the file
	defer model.Close()
	engine, err := model.NewEngine(runtime.EngineOptions{Backend: "reference", Context: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()
	session, err := engine.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	res, err := session.GenerateText(context.Background(), "Once upon a time", runtime.GenerateOptions{
		MaxTokens: 10,
		Sampler:   runtime.DefaultSampler(), // greedy
		OnText: func(text string) error {
			fmt.Print(text) // streamed as soon as it is final
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\n%d tokens, stopped by %s\n", len(res.Tokens), res.Stop)
	// Output:
	// , there was a little girl named Lily
	// 10 tokens, stopped by length
}

// Stop strings match the text, wherever the token boundaries fall ("girl"
// is three tokens here: " g", "ir", "l"); the result ends before them.
func Example_stopStrings() {
	model, err := loadModel(storiesPath)
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	engine, err := model.NewEngine(runtime.EngineOptions{Context: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()
	session, err := engine.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	for _, stop := range [][]string{{"girl"}, {". ", "!"}, {"dragon"}} {
		session.Reset()
		res, err := session.GenerateText(context.Background(), "Once upon a time", runtime.GenerateOptions{
			MaxTokens: 21, Sampler: runtime.DefaultSampler(), Stop: stop,
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%q: %q (%s %q)\n", stop, res.Text, res.Stop, res.StopMatch)
	}
	// Output:
	// ["girl"]: ", there was a little " (stop "girl")
	// [". " "!"]: ", there was a little girl named Lily" (stop ". ")
	// ["dragon"]: ", there was a little girl named Lily. She loved to play outside" (length "")
}

// Generation is cancelled through its context: here by the callback, as a
// user interrupt or a closed connection would.
func Example_cancel() {
	model, err := loadModel(storiesPath)
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	engine, err := model.NewEngine(runtime.EngineOptions{Context: 256})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Close()
	session, err := engine.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var text strings.Builder
	res, err := session.GenerateText(ctx, "Once upon a time", runtime.GenerateOptions{
		MaxTokens: 100, Sampler: runtime.DefaultSampler(),
		OnText: func(piece string) error {
			text.WriteString(piece)
			if strings.Contains(piece, "Lily") {
				cancel()
			}
			return nil
		},
	})
	fmt.Println(err)
	fmt.Printf("%q after %d tokens\n", res.Text, len(res.Tokens))
	// Output:
	// context canceled
	// ", there was a little girl named Lily" after 10 tokens
}

// The layer below: a graph compiled on a backend into a program with two
// sequence slots, stepped directly with tokens and positions.
func ExampleBackend() {
	fmt.Println(runtime.Backends())

	model, err := loadModel(storiesPath)
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	backend, _ := runtime.LookupBackend("reference")
	prog, err := backend.Compile(model.Graph, model.Weights, runtime.ProgramConfig{Context: 64, Slots: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer prog.Close()
	fmt.Printf("KV cache: %d bytes for 2 slots of 64 positions\n", prog.CacheBytes())

	tok := model.Tokenizer
	prompts := [][]int32{tok.Encode("Once upon a time", true), tok.Encode("Tom", true)}
	next := make([]int32, 2)
	for slot, p := range prompts {
		pos := make([]int32, len(p))
		for i := range pos {
			pos[i] = int32(i)
		}
		rows, err := prog.Step(slot, p, pos) // prefill: T = len(p)
		if err != nil {
			log.Fatal(err)
		}
		next[slot] = runtime.Argmax(rows[len(rows)-1])
	}
	for slot, p := range prompts {
		// Decode: one token at the next position, T = 1.
		rows, err := prog.Step(slot, next[slot:slot+1], []int32{int32(len(p))})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("slot %d: %q\n", slot, tok.Decode([]int32{next[slot], runtime.Argmax(rows[0])}))
	}
	// Output:
	// [goasm reference]
	// KV cache: 163840 bytes for 2 slots of 64 positions
	// slot 0: ", there"
	// slot 1: " and Lily"
}

// loadModel opens a GGUF model and makes a runtime.Model of it, as Example
// does; Close unmaps the file.
func loadModel(path string) (*runtime.Model, error) {
	src, err := frontend.Open(path)
	if err != nil {
		return nil, err
	}
	built, err := src.Build(arch.Options{})
	if err != nil {
		src.Close()
		return nil, err
	}
	model, err := runtime.NewModel(built.Graph, built.Weights, built.Vocab, built.Config.ContextLength)
	if err != nil {
		src.Close()
		return nil, err
	}
	model.Closer = src
	return model, nil
}
