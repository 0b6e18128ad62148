package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minerva-llm/minerva/chat"
	"github.com/minerva-llm/minerva/frontend"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/tokenizer"
)

// templateFlags are the flags that turn a conversation into a prompt,
// shared by chat, run --chat and template.
type templateFlags struct {
	ChatTemplate    string   `name:"chat-template" help:"Jinja chat template file to use instead of the model's (tokenizer.chat_template)." type:"path"`
	Var             []string `name:"var" help:"Template variable KEY=VALUE (repeatable; VALUE is read as JSON when it parses, else as a string): enable_thinking=false, reasoning_effort=high …" sep:"none"`
	ReasoningEffort string   `name:"reasoning-effort" help:"gpt-oss reasoning effort: low, medium or high (the template variable reasoning_effort; the model's default is medium)."`
	Now             string   `name:"now" help:"The date and time the template's strftime_now sees (RFC 3339, e.g. 2026-11-24T12:00:00Z; default: now), for reproducible prompts."`
}

// options reads the flags into chat.Options (the special tokens are the
// tokenizer's, added by newPrompter).
func (f templateFlags) options() (chat.Options, error) {
	var o chat.Options
	for _, kv := range f.Var {
		k, v, err := chat.ParseVar(kv)
		if err != nil {
			return o, usageError{"--var: " + strings.TrimPrefix(err.Error(), "chat: ")}
		}
		if o.Vars == nil {
			o.Vars = map[string]any{}
		}
		o.Vars[k] = v
	}
	if f.ReasoningEffort != "" {
		if err := chat.CheckReasoningEffort(f.ReasoningEffort); err != nil {
			return o, usageError{"--reasoning-effort: " + err.Error()}
		}
		if o.Vars == nil {
			o.Vars = map[string]any{}
		}
		o.Vars["reasoning_effort"] = f.ReasoningEffort
	}
	if f.Now != "" {
		t, err := time.Parse(time.RFC3339, f.Now)
		if err != nil {
			return o, usageError{fmt.Sprintf("--now %q is not an RFC 3339 time such as 2026-11-24T12:00:00Z", f.Now)}
		}
		o.Now = t
	}
	return o, nil
}

// modelChat is what a model (or tokenizer) file says about chatting with
// it.
type modelChat struct {
	template string // the Jinja chat template, "" when the file has none
	arch     string // the architecture: gpt-oss without a template still chats, in harmony
	// specials are special-token texts a tokenizer_config.json names
	// (bos_token …), which override the tokenizer's own for templates.
	specials map[string]string
}

// chatInfoOf reads the chat template and architecture of an opened source:
// a GGUF file's tokenizer.chat_template, a model directory's
// tokenizer_config.json (with the special-token texts it names), or those
// of the model a plan refers to (a plan does not copy them; an embedded
// plan has none).
func chatInfoOf(src *frontend.Source) modelChat {
	if src == nil {
		return modelChat{}
	}
	if mc, ok := appChat(src); ok {
		return mc
	}
	if src.Format == frontend.FormatPlan {
		mc := modelChat{arch: src.Plan.Config.Arch}
		if src.Model != nil {
			m := chatInfoOf(src.Model)
			mc.template, mc.specials = m.template, m.specials
		}
		return mc
	}
	mc := modelChat{template: src.ChatTemplate()}
	switch {
	case src.GGUF != nil:
		mc.arch = src.GGUF.Architecture()
	case src.HF != nil:
		mc.arch = src.HF.Architecture()
		mc.specials = hfSpecials(src.HF.TokenizerConfig)
	}
	return mc
}

// hfSpecials are the special-token texts a tokenizer_config.json names.
func hfSpecials(cfg tokenizer.HFConfig) map[string]string {
	m := map[string]string{}
	for k, s := range map[string]string{"bos_token": cfg.BOSToken, "eos_token": cfg.EOSToken, "unk_token": cfg.UNKToken, "pad_token": cfg.PADToken} {
		if s != "" {
			m[k] = s
		}
	}
	return m
}

// isHFTokenizer tells a Hugging Face tokenizer (a tokenizer.json file, or a
// directory holding one but no config.json) from a model file, model
// directory or plan.
func isHFTokenizer(path string) bool {
	if strings.EqualFold(filepath.Ext(path), ".json") {
		// config.json or the index names its model directory.
		return filepath.Base(path) == hf.TokenizerName || !isModelDir(filepath.Dir(path))
	}
	st, err := os.Stat(path)
	return err == nil && st.IsDir() && !isModelDir(path)
}

// loadTokenizerFile reads a tokenizer named on its own (tokenize FILE,
// --tokenizer FILE): a Hugging Face tokenizer.json (or its directory, with
// tokenizer_config.json beside it), or the vocabulary of a GGUF file (a
// vocab-only one such as o200k-harmony.gguf, or a model) or plan. Its chat
// template comes along.
func loadTokenizerFile(path string) (*tokenizer.Tokenizer, modelChat, error) {
	if isHFTokenizer(path) {
		v, cfg, err := tokenizer.LoadHF(path)
		if err != nil {
			return nil, modelChat{}, err
		}
		tok, err := tokenizer.New(v)
		if err != nil {
			return nil, modelChat{}, fmt.Errorf("%s: tokenizer: %w", path, err)
		}
		return tok, modelChat{template: cfg.ChatTemplate, specials: hfSpecials(cfg)}, nil
	}
	// Only the vocabulary is read: a plan's model file stays closed.
	src, err := frontend.OpenWith(path, frontend.Options{Unresolved: true})
	if err != nil {
		return nil, modelChat{}, err
	}
	defer src.Close()
	v, err := src.Vocab()
	if err != nil {
		return nil, modelChat{}, fmt.Errorf("%s: %w", path, err)
	}
	tok, err := newTokenizer(path, v)
	if err != nil {
		return nil, modelChat{}, err
	}
	return tok, chatInfoOf(src), nil
}

// prompter turns a conversation into prompt tokens for one model: its chat
// template (or the built-in harmony renderer), the template's variables and
// the tokenizer.
type prompter struct {
	tok  *tokenizer.Tokenizer
	tpl  *chat.Template // nil: chat.RenderHarmony (gpt-oss without a template)
	opts chat.Options
	// harmony: the output is in harmony format (channels, <|return|>),
	// read by chat.HarmonyParser. think: the template writes <think>, so
	// the model reasons between <think> and </think> (Qwen3, DeepSeek-R1).
	harmony, think bool
}

// newPrompter picks the template (tok may be nil for a template rendered
// without a model): --chat-template, else the model's, else,
// for gpt-oss, the harmony renderer; a model with none of these is
// chat.ErrNoTemplate, whose text names the flag.
func newPrompter(tok *tokenizer.Tokenizer, mc modelChat, f templateFlags) (*prompter, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	p := &prompter{tok: tok, opts: opts}
	src, from := mc.template, "the model's chat template"
	if f.ChatTemplate != "" {
		b, err := os.ReadFile(f.ChatTemplate)
		if err != nil {
			return nil, fmt.Errorf("--chat-template: %w", err)
		}
		src, from = string(b), f.ChatTemplate
	}
	if src == "" {
		if mc.arch != "gpt-oss" {
			return nil, chat.ErrNoTemplate
		}
		p.harmony = true
	} else {
		if p.tpl, err = chat.Compile(src); err != nil {
			return nil, fmt.Errorf("%s: %w", from, err)
		}
		p.harmony = strings.Contains(src, "<|channel|>") && strings.Contains(src, "<|start|>")
		p.think = !p.harmony && strings.Contains(src, "<think>")
	}
	p.opts.SpecialTokens = map[string]string{}
	if tok != nil { // minervac template renders without a model
		p.opts.SpecialTokens = tok.TemplateSpecials()
	}
	for k, s := range mc.specials {
		p.opts.SpecialTokens[k] = s
	}
	return p, nil
}

// render renders the conversation, ending with the assistant's header when
// addGen is set.
func (p *prompter) render(conv chat.Conversation, addGen bool) (string, error) {
	o := p.opts
	o.AddGenerationPrompt = addGen
	if p.tpl == nil {
		return chat.RenderHarmony(conv, o)
	}
	return p.tpl.Render(conv, o)
}

// encode tokenizes a rendered prompt: the control tokens the template wrote
// are parsed as such, and with addBOS (the vocabulary's add_bos, unless
// --no-bos) BOS is added if the template has not written it already
// (transformers encodes a rendered chat without adding special tokens for
// the same reason: two BOS tokens are not what the model was trained on).
func (p *prompter) encode(text string, addBOS bool) []int32 {
	ids := p.tok.EncodeWith(text, tokenizer.EncodeOptions{ParseSpecial: true})
	if bos := p.tok.BOS(); addBOS && bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int32{bos}, ids...)
	}
	return ids
}
