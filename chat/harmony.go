package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// RenderHarmony renders a conversation in gpt-oss's harmony format without a
// template, for model files that carry none. The output is what the gpt-oss
// chat template (golden/chat/gpt-oss.json, rendered by transformers) gives
// for the same conversation and options:
//
//   - a system message with the model identity, knowledge cutoff, today's
//     date, "Reasoning: low|medium|high" (opts.Vars["reasoning_effort"],
//     default medium) and the valid channels;
//   - a leading system or developer message becomes the developer message's
//     "# Instructions", and tools its "# Tools" as a TypeScript namespace;
//   - assistant turns are final-channel messages; their "thinking" is kept
//     only before a tool call no later final answer follows, or in a last
//     assistant turn rendered without a generation prompt (ending <|return|>);
//   - tool calls go to functions.NAME on the commentary channel, tool results
//     come back from functions.NAME with their content as a JSON string.
//
// opts.Vars may also hold "model_identity" and "builtin_tools" (a list that
// may name "browser" and "python"), as for the template. Where the template
// would fail in Python (a message with <|channel|> markup in its content,
// content and thinking both beside a tool call, a tool result with no call
// before it) this returns the template's raise_exception message as a
// *TemplateError.
func RenderHarmony(conv Conversation, opts Options) (string, error) {
	var b strings.Builder
	b.WriteString("<|start|>system<|message|>")
	if err := harmonySystem(&b, conv, opts); err != nil {
		return "", err
	}
	b.WriteString("<|end|>")

	msgs := conv.Messages
	developer := any("")
	if len(msgs) > 0 {
		if r := msgs[0].String("role"); r == "developer" || r == "system" {
			developer, _ = msgs[0].Get("content")
			msgs = msgs[1:]
		}
	}
	hasTools := pyTruthy(toolsValue(conv.Tools))
	if pyTruthy(developer) || hasTools {
		b.WriteString("<|start|>developer<|message|>")
		if pyTruthy(developer) {
			text, err := contentText(developer)
			if err != nil {
				return "", fmt.Errorf("chat: developer message: %w", err)
			}
			b.WriteString("# Instructions\n\n" + text + "\n\n")
		}
		if hasTools {
			b.WriteString("# Tools\n\n")
			if err := harmonyToolNamespace(&b, "functions", conv.Tools); err != nil {
				return "", err
			}
		}
		b.WriteString("<|end|>")
	}

	lastToolCall := "" // the function a following tool message answers
	haveToolCall := false
	for i, m := range msgs {
		switch m.String("role") {
		case "assistant":
			if err := harmonyAssistant(&b, m, msgs[i+1:], i == len(msgs)-1, opts.AddGenerationPrompt, &lastToolCall, &haveToolCall); err != nil {
				return "", fmt.Errorf("chat: message %d: %w", i, err)
			}
		case "tool":
			if !haveToolCall {
				return "", &TemplateError{Message: "Message has tool role, but there was no previous assistant message with a tool call!"}
			}
			content, _ := m.Get("content")
			js, err := pyJSON(content)
			if err != nil {
				return "", fmt.Errorf("chat: message %d: %w", i, err)
			}
			b.WriteString("<|start|>functions." + lastToolCall + " to=assistant<|channel|>commentary<|message|>" + js + "<|end|>")
		case "user":
			text, err := messageText(m, "content")
			if err != nil {
				return "", fmt.Errorf("chat: message %d: %w", i, err)
			}
			b.WriteString("<|start|>user<|message|>" + text + "<|end|>")
		}
		// Other roles after the first message are dropped, as the template drops them.
	}
	if opts.AddGenerationPrompt {
		b.WriteString("<|start|>assistant")
	}
	return b.String(), nil
}

const (
	harmonyDefaultIdentity = "You are ChatGPT, a large language model trained by OpenAI."
	harmonyChannelMarkup   = "You have passed a message containing <|channel|> tags in the %s field. Instead of doing this, you should pass analysis messages (the string between '<|message|>' and '<|end|>') in the 'thinking' field, and final messages (the string between '<|message|>' and '<|end|>') in the 'content' field."
)

func harmonySystem(b *strings.Builder, conv Conversation, opts Options) error {
	vars := make(map[string]any, len(opts.Vars))
	for k, v := range opts.Vars {
		vars[k] = normalizeValue(v)
	}
	identity, ok := vars["model_identity"]
	if !ok {
		identity = harmonyDefaultIdentity
	}
	effort, ok := vars["reasoning_effort"]
	if !ok {
		effort = "medium"
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	b.WriteString(pyStr(identity) + "\n")
	b.WriteString("Knowledge cutoff: 2024-06\n")
	b.WriteString("Current date: " + strftime(now, "%Y-%m-%d") + "\n\n")
	b.WriteString("Reasoning: " + pyStr(effort) + "\n\n")
	if builtin := vars["builtin_tools"]; pyTruthy(builtin) {
		b.WriteString("# Tools\n\n")
		list, _ := builtin.([]any)
		browser, python := false, false
		for _, t := range list {
			browser = browser || t == "browser"
			python = python || t == "python"
		}
		if browser {
			b.WriteString(harmonyBrowserTool)
		}
		if python {
			b.WriteString(harmonyPythonTool)
		}
	}
	b.WriteString("# Valid channels: analysis, commentary, final. Channel must be included for every message.")
	if pyTruthy(toolsValue(conv.Tools)) {
		b.WriteString("\nCalls to these tools must go to the commentary channel: 'functions'.")
	}
	return nil
}

func harmonyAssistant(b *strings.Builder, m *Object, later []*Object, last, genPrompt bool, lastToolCall *string, haveToolCall *bool) error {
	for _, field := range []string{"content", "thinking"} {
		if v, ok := m.Get(field); ok {
			if s, ok := v.(string); ok && (strings.Contains(s, "<|channel|>analysis<|message|>") || strings.Contains(s, "<|channel|>final<|message|>")) {
				return &TemplateError{Message: fmt.Sprintf(harmonyChannelMarkup, field)}
			}
		}
	}
	content, _ := m.Get("content")
	thinking, hasThinking := m.Get("thinking")
	if hasToolCalls(m) {
		// The analysis before a tool call is kept unless a final answer follows
		// later in the conversation: then the call's chain of thought is over.
		futureFinal := false
		for _, f := range later {
			if f.String("role") == "assistant" && !hasToolCalls(f) {
				futureFinal = true
			}
		}
		calls, _ := m.Get("tool_calls")
		call, _ := calls.([]any)[0].(*Object)
		if fn, _ := call.Get("function"); pyTruthy(fn) {
			call, _ = fn.(*Object)
		}
		switch {
		case pyTruthy(content) && pyTruthy(thinking):
			return &TemplateError{Message: "Cannot pass both content and thinking in an assistant message with tool calls! Put the analysis message in one or the other, but not both."}
		case pyTruthy(content) && !futureFinal:
			text, err := contentText(content)
			if err != nil {
				return err
			}
			b.WriteString("<|start|>assistant<|channel|>analysis<|message|>" + text + "<|end|>")
		case pyTruthy(thinking) && !futureFinal:
			b.WriteString("<|start|>assistant<|channel|>analysis<|message|>" + pyStr(thinking) + "<|end|>")
		}
		name := pyStr(mustGet(call, "name"))
		contentType := "json"
		if ct, ok := call.Get("content_type"); ok {
			contentType = pyStr(ct)
		}
		args, err := pyJSON(mustGet(call, "arguments"))
		if err != nil {
			return err
		}
		b.WriteString("<|start|>assistant to=functions." + name + "<|channel|>commentary " + contentType + "<|message|>" + args + "<|call|>")
		*lastToolCall, *haveToolCall = name, true
		return nil
	}
	text, err := contentText(content)
	if err != nil {
		return err
	}
	if last && !genPrompt {
		// A last assistant turn without a generation prompt is a training
		// example: its reasoning is shown and it ends the generation.
		if hasThinking {
			b.WriteString("<|start|>assistant<|channel|>analysis<|message|>" + pyStr(thinking) + "<|end|>")
		}
		b.WriteString("<|start|>assistant<|channel|>final<|message|>" + text + "<|return|>")
		return nil
	}
	b.WriteString("<|start|>assistant<|channel|>final<|message|>" + text + "<|end|>")
	*lastToolCall, *haveToolCall = "", false
	return nil
}

// hasToolCalls reports a non-empty tool_calls list. The template tests only
// that the key is there; an empty or null list (which OpenAI clients send)
// would make it fail, so it counts as no calls here.
func hasToolCalls(m *Object) bool {
	v, _ := m.Get("tool_calls")
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return false
	}
	_, ok = l[0].(*Object)
	return ok
}

// messageText is a message field's text, as contentText reads it.
func messageText(m *Object, field string) (string, error) {
	v, _ := m.Get(field)
	return contentText(v)
}

// contentText reads a message's content: a string; null (an OpenAI
// assistant message with tool calls) as empty; or OpenAI content parts, whose
// "text" parts are joined. Anything else is an error, where the template in
// Python would fail adding it to a string.
func contentText(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []any:
		var b strings.Builder
		for _, p := range x {
			part, ok := p.(*Object)
			if !ok {
				return "", errors.New("content parts must be objects")
			}
			if t, ok := part.Get("text"); ok {
				s, ok := t.(string)
				if !ok {
					return "", errors.New("a content part's \"text\" must be a string")
				}
				b.WriteString(s)
			} else if part.String("type") != "text" {
				return "", fmt.Errorf("content part of type %q is not supported in a harmony prompt", part.String("type"))
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("content must be a string, got %s", jsonKind(v))
}
