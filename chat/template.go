package chat

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// ErrNoTemplate is what a caller reports when a model carries no chat template
// and none was given; its text names the flag that supplies one.
var ErrNoTemplate = errors.New("model has no chat template; pass --chat-template FILE")

// Options are the template variables besides messages and tools.
type Options struct {
	// AddGenerationPrompt ends the prompt with the header of an assistant turn.
	AddGenerationPrompt bool
	// SpecialTokens become variables, as transformers passes the tokenizer's
	// special_tokens_map: "bos_token", "eos_token", "pad_token", "unk_token"...
	SpecialTokens map[string]string
	// Vars are extra variables (transformers' **kwargs): reasoning_effort,
	// enable_thinking, builtin_tools, ... Values take the types Object
	// documents (Go slices, maps and ints are converted). They may override a
	// special token, not messages, tools, documents or add_generation_prompt.
	Vars map[string]any
	// Now is the clock of strftime_now; the zero time means time.Now().
	Now time.Time
}

// Template is a parsed chat template. It is safe for concurrent Render calls.
type Template struct {
	tpl *exec.Template
}

// templateName is the one template in its loader, which reads no files
// (include and import are not available anyway: sandbox.go).
const templateName = "/chat_template"

// Compile parses a Jinja chat template.
func Compile(source string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil { // gonja panics on a few malformed inputs
			t, err = nil, fmt.Errorf("chat template: cannot parse: %s", oneLine(fmt.Sprint(r)))
		}
	}()
	cfg := jinjaConfig()
	source = rewriteCondExprs(source, cfg)
	loader, err := loaders.NewMemoryLoader(map[string]string{templateName: source})
	if err != nil {
		return nil, fmt.Errorf("chat template: %s", oneLine(err.Error()))
	}
	tpl, err := exec.NewTemplate(templateName, cfg, loader, environment())
	if err != nil {
		// gonja's message quotes the whole source; the cause alone is the useful part.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("chat template: cannot parse: %s", oneLine(err.Error()))
	}
	return &Template{tpl: tpl}, nil
}

// Render renders source for conv; see Template.Render.
func Render(source string, conv Conversation, opts Options) (string, error) {
	t, err := Compile(source)
	if err != nil {
		return "", err
	}
	return t.Render(conv, opts)
}

// TemplateError is a raise_exception call made by the template: the template
// itself refused the conversation (e.g. roles that do not alternate).
type TemplateError struct{ Message string }

func (e *TemplateError) Error() string { return "chat template error: " + e.Message }

// Render renders the conversation with the variables transformers'
// apply_chat_template passes: messages, tools (None when absent), documents
// (None), add_generation_prompt, the special tokens, opts.Vars, and the
// functions raise_exception and strftime_now.
func (t *Template) Render(conv Conversation, opts Options) (out string, err error) {
	var raised *TemplateError
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat template: render failed: %s", oneLine(fmt.Sprint(r)))
		}
	}()
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	data := map[string]any{}
	msgs := make(pyList, len(conv.Messages))
	for i, m := range conv.Messages {
		msgs[i] = toGonja(m)
	}
	data["messages"] = msgs
	data["tools"] = jsonNull // None, which is defined, as transformers passes tools=None
	if conv.Tools != nil {
		data["tools"] = toGonja(conv.Tools)
	}
	data["documents"] = jsonNull
	data["add_generation_prompt"] = opts.AddGenerationPrompt
	for k, v := range opts.SpecialTokens {
		data[k] = v
	}
	for k, v := range opts.Vars {
		switch k {
		case "messages", "tools", "documents", "add_generation_prompt", depthVar:
			// transformers cannot pass these twice either (a TypeError in Python).
			return "", fmt.Errorf("chat template: variable %q comes from the conversation and options, not Vars", k)
		}
		data[k] = toGonja(v)
	}
	data[depthVar] = new(int)
	data["raise_exception"] = func(args *exec.VarArgs) (*exec.Value, error) {
		msg := ""
		if len(args.Args) > 0 {
			msg = args.Args[0].String()
		}
		raised = &TemplateError{Message: msg}
		return nil, raised
	}
	data["strftime_now"] = func(args *exec.VarArgs) (*exec.Value, error) {
		if len(args.Args) != 1 || !args.Args[0].IsString() {
			return nil, errors.New("strftime_now takes one format string")
		}
		return exec.AsValue(strftime(now, args.Args[0].String())), nil
	}
	var b strings.Builder
	if err := t.tpl.Execute(&b, exec.NewContext(data)); err != nil {
		if raised != nil {
			return "", raised
		}
		return "", fmt.Errorf("chat template: %s", strings.TrimPrefix(oneLine(err.Error()), "unable to execute template: "))
	}
	return b.String(), nil
}

// jinjaConfig is transformers' Jinja2 environment: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, no autoescape, undefined values
// not strict.
func jinjaConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = false
	c.AutoEscape = false
	c.StrictUndefined = false
	return c
}

var (
	envOnce sync.Once
	env     *exec.Environment
)

// environment is gonja's default environment with the pieces transformers
// changes or Python has and gonja lacks: an order-keeping tojson that writes
// what json.dumps writes, dict methods and an items filter that keep key
// order, and Python's string methods (strip, split, startswith, ...) with
// Python's whitespace and argument rules. Loop controls (break, continue) are
// among gonja's control structures already.
func environment() *exec.Environment {
	envOnce.Do(func() {
		fs := map[string]exec.FilterFunction{}
		for _, name := range gonjaFilters {
			if f, ok := builtins.Filters.Get(name); ok {
				fs[name] = listFilter(f)
			}
		}
		for name, f := range pyFilters {
			fs[name] = listFilter(f)
		}
		filters := exec.NewFilterSet(fs)
		tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
		_ = tests.Replace("defined", isDefined)
		_ = tests.Replace("undefined", isUndefined)
		env = &exec.Environment{
			Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(exec.NewContext(map[string]any{"range": rangeList})),
			Filters:           filters,
			Tests:             tests,
			ControlStructures: controlStructureSet(),
			Methods: exec.Methods{
				Bool:  builtins.Methods.Bool,
				Int:   builtins.Methods.Int,
				Float: builtins.Methods.Float,
				Str:   strMethods(),
				Dict:  dictMethods(),
				List:  builtins.Methods.List,
			},
		}
	})
	return env
}

// oneLine folds a message onto one line: gonja's errors quote template text.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
