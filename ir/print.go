package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// Print renders g in the IR text form, one value per line:
//
//	graph "llama" {
//	  %0 = input {name = "tokens"} : i32[T]
//	  %3 = embed %2, %0 : f32[T, 256]
//	  %5 = rmsnorm %3, %4 {eps = 1e-05} : f32[T, 256]
//	  output "logits" = %5
//	}
//
// The form is canonical: attributes are sorted by key and every number has
// exactly one spelling, so Print(Parse(Print(g))) == Print(g) and printed
// graphs can be diffed and kept as golden files. Print never fails; a graph
// that does not verify still prints, with whatever it holds (nil operands show
// as %<nil>, which Parse rejects).
func Print(g *Graph) string {
	var sb strings.Builder
	sb.WriteString("graph ")
	sb.WriteString(strconv.Quote(g.Name))
	sb.WriteString(" {\n")
	for _, k := range g.Attrs.Keys() {
		sb.WriteString("  attr ")
		sb.WriteString(attrKeyString(k))
		sb.WriteString(" = ")
		sb.WriteString(formatAttr(g.Attrs[k]))
		sb.WriteByte('\n')
	}
	for _, v := range g.Values {
		sb.WriteString("  ")
		if v == nil {
			// Keep the line count honest without inventing a value.
			sb.WriteString("%<nil>\n")
			continue
		}
		printValue(&sb, v)
		sb.WriteByte('\n')
	}
	for _, o := range g.Outputs {
		sb.WriteString("  output ")
		sb.WriteString(strconv.Quote(o.Name))
		sb.WriteString(" = ")
		sb.WriteString(operandString(o.Value))
		sb.WriteByte('\n')
	}
	sb.WriteString("}\n")
	return sb.String()
}

// String returns the text form of the graph (see Print).
func (g *Graph) String() string { return Print(g) }

func printValue(sb *strings.Builder, v *Value) {
	fmt.Fprintf(sb, "%%%d = %s", v.ID, v.Op)
	for i, a := range v.Args {
		if i == 0 {
			sb.WriteByte(' ')
		} else {
			sb.WriteString(", ")
		}
		sb.WriteString(operandString(a))
	}
	if len(v.Attrs) > 0 {
		sb.WriteString(" {")
		for i, k := range v.Attrs.Keys() {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(attrKeyString(k))
			sb.WriteString(" = ")
			sb.WriteString(formatAttr(v.Attrs[k]))
		}
		sb.WriteByte('}')
	}
	sb.WriteString(" : ")
	sb.WriteString(v.Type.String())
}

func operandString(v *Value) string {
	if v == nil {
		return "%<nil>"
	}
	return v.String()
}

// attrKeyString prints a key bare when it is an identifier and quoted
// otherwise, so any key a builder accepted survives a round trip.
func attrKeyString(k string) string {
	if isIdent(k) {
		return k
	}
	return strconv.Quote(k)
}

// formatAttr formats one attribute value as the text form spells it: int64 as
// a decimal integer, float64 in the shortest form that reads back to the same
// bits and always looks like a float (10000 prints as 10000.0, so the value
// stays a float through a round trip), strings quoted, []int64 as [1, 2] and
// []float64 as [1.0, 2.5].
func formatAttr(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case float64:
		return formatFloat(v)
	case string:
		return strconv.Quote(v)
	case []int64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = strconv.FormatInt(x, 10)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []float64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = formatFloat(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	// Attrs built by hand may hold kinds the IR does not know; print them in
	// a form Parse rejects rather than silently changing their type.
	return fmt.Sprintf("<%T %v>", v, v)
}

func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.ContainsAny(s, ".e") || strings.Contains(s, "Inf") || strings.Contains(s, "NaN") {
		return s
	}
	return s + ".0"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isIdentStart(c) && (i == 0 || !isDigit(c)) {
			return false
		}
	}
	return true
}

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
