package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
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
	identity, ok := opts.Vars["model_identity"]
	if !ok {
		identity = harmonyDefaultIdentity
	}
	effort, ok := opts.Vars["reasoning_effort"]
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
	if builtin := opts.Vars["builtin_tools"]; pyTruthy(builtin) {
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

// harmonyToolNamespace is the template's render_tool_namespace.
func harmonyToolNamespace(b *strings.Builder, ns string, tools []any) error {
	b.WriteString("## " + ns + "\n\n")
	b.WriteString("namespace " + ns + " {\n\n")
	for i, t := range tools {
		tool, _ := t.(*Object)
		fn, _ := mustGet(tool, "function").(*Object)
		if fn == nil {
			return fmt.Errorf("chat: tool %d has no \"function\" object", i)
		}
		b.WriteString("// " + pyStr(mustGet(fn, "description")) + "\n")
		b.WriteString("type " + pyStr(mustGet(fn, "name")) + " = ")
		params, _ := mustGet(fn, "parameters").(*Object)
		props, _ := mustGet(params, "properties").(*Object)
		if !pyTruthy(params) || !pyTruthy(props) {
			b.WriteString("() => any;\n\n")
			continue
		}
		b.WriteString("(_: {\n")
		required := mustGet(params, "required")
		for _, name := range props.Keys() {
			spec, _ := mustGet(props, name).(*Object)
			if d := mustGet(spec, "description"); pyTruthy(d) {
				b.WriteString("// " + pyStr(d) + "\n")
			}
			b.WriteString(name)
			if !pyIn(name, required) {
				b.WriteString("?")
			}
			b.WriteString(": ")
			tsType(b, spec, 0)
			if def, ok := spec.Get("default"); ok {
				switch {
				case pyTruthy(mustGet(spec, "enum")):
					b.WriteString(", // default: " + pyStr(def))
				case pyTruthy(mustGet(spec, "oneOf")):
					b.WriteString("// default: " + pyStr(def))
				default:
					js, err := pyJSON(def)
					if err != nil {
						return err
					}
					b.WriteString(", // default: " + js)
				}
			}
			b.WriteString(",\n")
		}
		b.WriteString("}) => any;\n\n")
	}
	b.WriteString("} // namespace " + ns)
	return nil
}

// tsType is the template's render_typescript_type: a JSON schema as a
// TypeScript type. Its odd spacing (a newline and 16 spaces before a nested
// property's type, " | " and a newline between oneOf variants, 20 spaces
// before a variant's default) is the template's whitespace, kept because the
// model was trained on it.
func tsType(b *strings.Builder, spec *Object, depth int) {
	if depth > maxJSONDepth { // a schema cannot nest this deep; stop rather than overflow
		b.WriteString("any")
		return
	}
	typ, _ := spec.Get("type")
	nullable := pyTruthy(mustGet(spec, "nullable"))
	switch {
	case typ == "array":
		items, _ := mustGet(spec, "items").(*Object)
		if !pyTruthy(mustGet(spec, "items")) {
			b.WriteString("any[]")
		} else {
			switch mustGet(items, "type") {
			case "string":
				b.WriteString("string[]")
			case "number", "integer":
				b.WriteString("number[]")
			case "boolean":
				b.WriteString("boolean[]")
			default:
				var inner strings.Builder
				tsType(&inner, items, depth+1)
				if s := inner.String(); s == "object | object" || utf8.RuneCountInString(s) > 50 {
					b.WriteString("any[]")
				} else {
					b.WriteString(s + "[]")
				}
			}
		}
		if nullable {
			b.WriteString(" | null")
		}
	case isNonEmptyList(typ):
		list := typ.([]any)
		parts := make([]string, len(list))
		for i, t := range list {
			parts[i] = pyStr(t)
		}
		b.WriteString(strings.Join(parts, " | "))
	case pyTruthy(mustGet(spec, "oneOf")):
		// The template's object-variant check sets a variable inside a for
		// loop, which Jinja scopes to the loop, so it never takes effect.
		variants, _ := mustGet(spec, "oneOf").([]any)
		for i, v := range variants {
			variant, _ := v.(*Object)
			tsType(b, variant, depth+1)
			if d := mustGet(variant, "description"); pyTruthy(d) {
				b.WriteString("// " + pyStr(d))
			}
			if def, ok := variant.Get("default"); ok {
				js, _ := pyJSON(def)
				b.WriteString(strings.Repeat(" ", 20) + "// default: " + js)
			}
			if i < len(variants)-1 {
				b.WriteString(" | \n")
			}
		}
	case typ == "string":
		if enum := mustGet(spec, "enum"); pyTruthy(enum) {
			list, _ := enum.([]any)
			parts := make([]string, len(list))
			for i, e := range list {
				parts[i] = pyStr(e)
			}
			b.WriteString(`"` + strings.Join(parts, `" | "`) + `"`)
		} else {
			b.WriteString("string")
			if nullable {
				b.WriteString(" | null")
			}
		}
	case typ == "number", typ == "integer":
		b.WriteString("number")
	case typ == "boolean":
		b.WriteString("boolean")
	case typ == "object":
		props, _ := mustGet(spec, "properties").(*Object)
		if !pyTruthy(props) {
			b.WriteString("object")
			return
		}
		b.WriteString("{\n")
		required := mustGet(spec, "required")
		for i, name := range props.Keys() {
			b.WriteString(name)
			if !pyIn(name, required) {
				b.WriteString("?")
			}
			b.WriteString(": \n" + strings.Repeat(" ", 16))
			sub, _ := mustGet(props, name).(*Object)
			tsType(b, sub, depth+1)
			if i < props.Len()-1 {
				b.WriteString(", ")
			}
		}
		b.WriteString("}")
	default:
		b.WriteString("any")
	}
}

// mustGet is o[key], nil when o is nil or lacks the key (Jinja's undefined,
// which is false and prints nothing).
func mustGet(o *Object, key string) any {
	v, _ := o.Get(key)
	return v
}

func isNonEmptyList(v any) bool {
	l, ok := v.([]any)
	return ok && len(l) > 0
}

// toolsValue is the tools variable as the template sees it: None when absent.
func toolsValue(tools []any) any {
	if tools == nil {
		return nil
	}
	return tools
}

// pyIn is Python's `name in list`; anything but a list holds nothing.
func pyIn(name string, list any) bool {
	l, _ := list.([]any)
	for _, e := range l {
		if e == name {
			return true
		}
	}
	return false
}

// pyJSON is the template's tojson.
func pyJSON(v any) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, pythonDefaultStyle("", false), 0); err != nil {
		return "", err
	}
	return b.String(), nil
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

const harmonyBrowserTool = "## browser\n\n" +
	"// Tool for browsing.\n" +
	"// The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n" +
	"// Cite information from the tool using the following format:\n" +
	"// `【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\n" +
	"// Do not quote more than 10 words directly from the tool output.\n" +
	"// sources=web (default: web)\n" +
	"namespace browser {\n\n" +
	"// Searches for information related to `query` and displays `topn` results.\n" +
	"type search = (_: {\n" +
	"query: string,\n" +
	"topn?: number, // default: 10\n" +
	"source?: string,\n" +
	"}) => any;\n\n" +
	"// Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` lines.\n" +
	"// Valid link ids are displayed with the formatting: `【{id}†.*】`.\n" +
	"// If `cursor` is not provided, the most recent page is implied.\n" +
	"// If `id` is a string, it is treated as a fully qualified URL associated with `source`.\n" +
	"// If `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on the most relevant passage, if available.\n" +
	"// Use this function without `id` to scroll to a new location of an opened page.\n" +
	"type open = (_: {\n" +
	"id?: number | string, // default: -1\n" +
	"cursor?: number, // default: -1\n" +
	"loc?: number, // default: -1\n" +
	"num_lines?: number, // default: -1\n" +
	"view_source?: boolean, // default: false\n" +
	"source?: string,\n" +
	"}) => any;\n\n" +
	"// Finds exact matches of `pattern` in the current page, or the page given by `cursor`.\n" +
	"type find = (_: {\n" +
	"pattern: string,\n" +
	"cursor?: number, // default: -1\n" +
	"}) => any;\n\n" +
	"} // namespace browser\n\n"

const harmonyPythonTool = "## python\n\n" +
	"Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. This tool should be used for internal reasoning, but not for code that is intended to be visible to the user (e.g. when creating plots, tables, or files).\n\n" +
	"When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook environment. python will respond with the output of the execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to save and persist user files. Internet access for this session is UNKNOWN. Depends on the cluster.\n\n"
