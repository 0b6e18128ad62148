// Package chat turns a conversation into the prompt text a model was trained
// on, and a model's output back into reasoning, content and tool calls.
//
// # Templates
//
// Models ship Jinja chat templates (GGUF tokenizer.chat_template,
// tokenizer_config.json chat_template; finding one is the caller's job, and
// ErrNoTemplate is the error for a model without one). Compile parses one
// and Template.Render renders a Conversation with Options, byte for byte as
// Hugging Face transformers' apply_chat_template(tokenize=False) renders it
// with Python Jinja2: every conversation of ../shared/golden/chat does.
//
//	tpl, err := chat.Compile(source)
//	conv, err := chat.ParseConversation(requestBody) // {"messages": [...], "tools": [...]}
//	prompt, err := tpl.Render(conv, chat.Options{
//		AddGenerationPrompt: true,
//		SpecialTokens:       map[string]string{"bos_token": "<s>", "eos_token": "</s>"},
//		Vars:                map[string]any{"reasoning_effort": "high"},
//	})
//
// Conversations are built from Objects, JSON objects that keep their key
// order (transformers prints tool schemas and arguments in request order);
// ParseVar reads a --var KEY=VALUE.
//
// The engine is github.com/nikolalohinski/gonja/v2, configured as
// transformers configures Jinja2 (trim_blocks, lstrip_blocks, loop controls,
// raise_exception, strftime_now, a tojson that writes what Python's
// json.dumps writes) and extended where Python and gonja differ: dict
// methods and filters keep key order, str methods follow Python, JSON null is
// a defined None, lists index from the end as Python's do, conditional
// expressions may stand anywhere (condexpr.go rewrites them for gonja's
// parser), and templates are sandboxed (sandbox.go).
//
// # Harmony (gpt-oss)
//
// RenderHarmony renders a conversation in gpt-oss's harmony format without a
// template, as the gpt-oss template does. HarmonyParser reads the output as
// it streams: analysis becomes reasoning, final and commentary preambles
// content, functions.NAME messages tool calls; it holds back partial control
// tokens and says when a stop token (<|return|>, <|call|>, <|endoftext|>)
// ends the turn. HarmonyResult.Message is the assistant turn to append for
// the next prompt.
package chat
