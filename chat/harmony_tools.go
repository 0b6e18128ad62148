package chat

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The tools part of the built-in harmony renderer: function definitions as
// the TypeScript-like namespace the gpt-oss template writes, and the text of
// its built-in browser and python tools.

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
