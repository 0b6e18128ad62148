package chat

import (
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// gonja v2's expression parser knows Jinja's conditional expression
// `A if B else C` only as the whole of a {{ }} or of a set's value; anywhere
// else, e.g. gpt-oss's `(tool_call.content_type if tool_call.content_type is
// defined else "json") + "<|message|>"`, is a parse error. The parser has no
// extension point, so templates are rewritten before parsing: every
// conditional expression inside a tag becomes
//
//	(((B) and [A] or [C])[0])
//
// which gonja evaluates with the same result and the same laziness (its and/or
// return an operand and skip the right side when the left decides, and a
// one-element list is always true). A missing else gives [none], Jinja's
// undefined. Text outside tags, comments and raw blocks is left alone, and no
// newline is added or removed, so gonja's line numbers still fit the source.

// tagToken is a lexed token with the byte span of its source text.
type tagToken struct {
	tok      *tokens.Token
	from, to int // to is where the next token starts (so trailing spaces are kept)
}

// rewriteCondExprs returns src with conditional expressions rewritten; a
// template without any comes back unchanged.
func rewriteCondExprs(src string, cfg *config.Config) string {
	stream := tokens.LexAll(src, cfg)
	var all []*tokens.Token
	for !stream.End() {
		all = append(all, stream.Current())
		stream.Next()
	}
	var b strings.Builder
	last := 0 // source before this offset is already written
	for i := 0; i < len(all); i++ {
		begin := all[i]
		if begin.Type != tokens.BlockBegin && begin.Type != tokens.VariableBegin {
			continue
		}
		endType := tokens.BlockEnd
		if begin.Type == tokens.VariableBegin {
			endType = tokens.VariableEnd
		}
		j := i + 1
		for j < len(all) && all[j].Type != endType && all[j].Type != tokens.EOF && all[j].Type != tokens.Error {
			j++
		}
		if j >= len(all) || all[j].Type != endType {
			break // malformed: the parser reports it
		}
		ts := make([]tagToken, 0, j-i-1)
		for k := i + 1; k < j; k++ {
			ts = append(ts, tagToken{tok: all[k], from: all[k].Pos, to: all[k+1].Pos})
		}
		if hasCondExpr(ts) && len(ts) > 0 {
			out := rewriteTag(src, ts, begin.Type == tokens.BlockBegin)
			b.WriteString(src[last:ts[0].from])
			b.WriteString(out)
			last = ts[len(ts)-1].to
		}
		i = j
	}
	if last == 0 {
		return src
	}
	b.WriteString(src[last:])
	return b.String()
}

// hasCondExpr reports whether a tag may hold a conditional expression: an
// `if` name anywhere but as the statement itself.
func hasCondExpr(ts []tagToken) bool {
	for k, t := range ts {
		if k > 0 && isName(t, "if") {
			return true
		}
	}
	return false
}

func isName(t tagToken, name string) bool {
	return t.tok.Type == tokens.Name && t.tok.Val == name
}

// rewriteTag rewrites one tag's tokens. In a block tag the first name is the
// statement; `for` also has an `if` of its own (the loop filter) that must
// stay, so its iterable and its filter are rewritten apart.
func rewriteTag(src string, ts []tagToken, block bool) string {
	if !block {
		return rewriteSeq(src, ts)
	}
	head := raw(src, ts[:1])
	rest := ts[1:]
	if !isName(ts[0], "for") {
		return head + rewriteSeq(src, rest)
	}
	// for TARGET in ITER [if COND] [recursive]
	in := -1
	for k, t := range rest {
		if t.tok.Type == tokens.In {
			in = k
			break
		}
	}
	if in < 0 {
		return head + raw(src, rest)
	}
	out := head + raw(src, rest[:in+1])
	iter := rest[in+1:]
	filter := -1
	depth := 0
	for k, t := range iter {
		depth += nesting(t)
		if depth == 0 && isName(t, "if") {
			filter = k
			break
		}
	}
	if filter < 0 {
		return out + rewriteSeq(src, iter)
	}
	out += rewriteSeq(src, iter[:filter]) + raw(src, iter[filter:filter+1])
	cond := iter[filter+1:]
	if n := len(cond); n > 0 && isName(cond[n-1], "recursive") {
		return out + rewriteSeq(src, cond[:n-1]) + raw(src, cond[n-1:])
	}
	return out + rewriteSeq(src, cond)
}

// nesting is +1 for an opening bracket, -1 for a closing one.
func nesting(t tagToken) int {
	switch t.tok.Type {
	case tokens.LeftParenthesis, tokens.LeftBracket, tokens.LeftBrace:
		return 1
	case tokens.RightParenthesis, tokens.RightBracket, tokens.RightBrace:
		return -1
	}
	return 0
}

func raw(src string, ts []tagToken) string {
	if len(ts) == 0 {
		return ""
	}
	return src[ts[0].from:ts[len(ts)-1].to]
}

// rewriteSeq rewrites a run of tokens at one nesting level: it splits it into
// expressions at the separators of that level (',' between items and
// arguments, ':' in dicts and slices, '=' before a value) and rewrites each.
func rewriteSeq(src string, ts []tagToken) string {
	var b strings.Builder
	start, depth := 0, 0
	for k, t := range ts {
		depth += nesting(t)
		if depth < 0 {
			depth = 0 // unbalanced: leave it to the parser
		}
		if depth != 0 {
			continue
		}
		switch t.tok.Type {
		case tokens.Comma, tokens.Colon, tokens.Assign:
			b.WriteString(rewriteExpr(src, ts[start:k]))
			b.WriteString(raw(src, ts[k:k+1]))
			start = k + 1
		}
	}
	b.WriteString(rewriteExpr(src, ts[start:]))
	return b.String()
}

// rewriteExpr rewrites one expression: A if B else C at its own level, and
// whatever bracketed groups it holds.
func rewriteExpr(src string, ts []tagToken) string {
	ifAt, elseAt, depth := -1, -1, 0
	for k, t := range ts {
		depth += nesting(t)
		if depth != 0 || k == 0 {
			continue
		}
		if ifAt < 0 && isName(t, "if") {
			ifAt = k
		} else if ifAt >= 0 && isName(t, "else") {
			elseAt = k
			break
		}
	}
	if ifAt < 0 {
		return rewriteGroups(src, ts)
	}
	a := rewriteGroups(src, ts[:ifAt])
	var bCond, c string
	if elseAt < 0 {
		bCond, c = rewriteGroups(src, ts[ifAt+1:]), "none"
	} else {
		bCond = rewriteGroups(src, ts[ifAt+1:elseAt])
		c = rewriteExpr(src, ts[elseAt+1:]) // C may be conditional again
	}
	// The parts keep their own spacing and newlines inside the brackets.
	return "(((" + bCond + ") and [" + a + "] or [" + c + "])[0])"
}

// rewriteGroups copies an expression that has no conditional at its own
// level, rewriting the contents of each bracketed group in it.
func rewriteGroups(src string, ts []tagToken) string {
	var b strings.Builder
	for k := 0; k < len(ts); k++ {
		if nesting(ts[k]) <= 0 {
			b.WriteString(raw(src, ts[k:k+1]))
			continue
		}
		depth, end := 0, -1
		for m := k; m < len(ts); m++ {
			depth += nesting(ts[m])
			if depth == 0 {
				end = m
				break
			}
		}
		if end < 0 { // unbalanced: copy the rest for the parser to report
			b.WriteString(raw(src, ts[k:]))
			break
		}
		b.WriteString(raw(src, ts[k:k+1]))
		b.WriteString(rewriteSeq(src, ts[k+1:end]))
		b.WriteString(raw(src, ts[end:end+1]))
		k = end
	}
	return b.String()
}
