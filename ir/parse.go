package ir

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads a graph in the text form written by Print and verifies it.
//
// The parser is token based, so line breaks and spacing are free; comments
// run from ';' or '//' to the end of the line. Values are named %N and keep
// the N from the text (they need not be consecutive, but each is defined once
// and before its first use). Every value carries its type after ':'. For leaf
// ops and reshape that type is the value's type; for other ops it must equal
// the inferred one, which turns a hand-edited golden file's mistake into an
// error at the place it was made rather than a silently different graph.
//
// Errors are one line of the form "line:column: what was expected or wrong";
// columns count characters from 1. Parse never panics, whatever its input.
func Parse(src string) (*Graph, error) {
	p := &parser{
		lx:        lexer{src: src, line: 1, col: 1},
		byID:      map[int]*Value{},
		defPos:    map[int]pos{},
		leafNames: map[string]pos{},
		outNames:  map[string]bool{},
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return p.parseGraph()
}

type pos struct{ line, col int }

func (p pos) errorf(format string, args ...any) error {
	return fmt.Errorf("%d:%d: %s", p.line, p.col, fmt.Sprintf(format, args...))
}

type tokKind int

const (
	tokEOF    tokKind = iota
	tokIdent          // graph, output, op names, dtypes, symbols, attribute keys, Inf, NaN
	tokNumber         // -12, 1.5e-05, +Inf
	tokString         // "..." (text is the unquoted value)
	tokRef            // %12 (text is the digits)
	tokPunct          // { } [ ] = , :
)

type token struct {
	kind tokKind
	text string
	pos  pos
}

// describe names a token for "expected X, found Y" messages. Long texts are
// cut so that an error stays one readable line.
func (t token) describe() string {
	text := t.text
	if len(text) > 32 {
		text = text[:32] + "..."
	}
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokIdent:
		return "identifier " + strconv.Quote(text)
	case tokNumber:
		return "number " + text
	case tokString:
		return "string " + strconv.Quote(text)
	case tokRef:
		return "%" + text
	}
	return strconv.Quote(text)
}

func (t token) is(kind tokKind, text string) bool { return t.kind == kind && t.text == text }

// lexer splits the source into tokens on demand, tracking line and column.
type lexer struct {
	src       string
	off       int
	line, col int
}

func (l *lexer) pos() pos { return pos{l.line, l.col} }

func (l *lexer) peek(k int) byte {
	if l.off+k < len(l.src) {
		return l.src[l.off+k]
	}
	return 0
}

// bump consumes one byte. Columns advance once per UTF-8 character, so an
// error after "é" in a string points where an editor would.
func (l *lexer) bump() {
	c := l.src[l.off]
	l.off++
	switch {
	case c == '\n':
		l.line++
		l.col = 1
	case c&0xC0 != 0x80:
		l.col++
	}
}

func (l *lexer) skipSpaceAndComments() {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			l.bump()
		case c == ';' || c == '/' && l.peek(1) == '/':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.bump()
			}
		default:
			return
		}
	}
}

func (l *lexer) next() (token, error) {
	l.skipSpaceAndComments()
	start := l.pos()
	if l.off >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	from := l.off
	c := l.src[l.off]
	switch {
	case isIdentStart(c):
		for l.off < len(l.src) && (isIdentStart(l.src[l.off]) || isDigit(l.src[l.off])) {
			l.bump()
		}
		return token{tokIdent, l.src[from:l.off], start}, nil
	case isDigit(c) || (c == '-' || c == '+') && isDigit(l.peek(1)):
		return l.number(start)
	case (c == '-' || c == '+') && strings.HasPrefix(l.src[l.off+1:], "Inf") &&
		!isIdentStart(l.peek(4)) && !isDigit(l.peek(4)):
		for i := 0; i < 4; i++ {
			l.bump()
		}
		return token{tokNumber, l.src[from:l.off], start}, nil
	case c == '"':
		return l.str(start)
	case c == '%':
		l.bump()
		if !isDigit(l.peek(0)) {
			return token{}, start.errorf("expected a value number after '%%'")
		}
		for isDigit(l.peek(0)) {
			l.bump()
		}
		return token{tokRef, l.src[from+1 : l.off], start}, nil
	case strings.IndexByte("{}[]=,:", c) >= 0:
		l.bump()
		return token{tokPunct, l.src[from:l.off], start}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	if r == utf8.RuneError {
		return token{}, start.errorf("unexpected byte 0x%02x", c)
	}
	return token{}, start.errorf("unexpected character %q", r)
}

// number lexes [+-]digits[.digits][(e|E)[+-]digits]; whether it is an integer
// or a float is decided by the parser from the text.
func (l *lexer) number(start pos) (token, error) {
	from := l.off
	if c := l.peek(0); c == '-' || c == '+' {
		l.bump()
	}
	for isDigit(l.peek(0)) {
		l.bump()
	}
	if l.peek(0) == '.' {
		l.bump()
		for isDigit(l.peek(0)) {
			l.bump()
		}
	}
	if c := l.peek(0); c == 'e' || c == 'E' {
		l.bump()
		if c := l.peek(0); c == '-' || c == '+' {
			l.bump()
		}
		if !isDigit(l.peek(0)) {
			return token{}, start.errorf("malformed number %q: exponent has no digits", l.src[from:l.off])
		}
		for isDigit(l.peek(0)) {
			l.bump()
		}
	}
	return token{tokNumber, l.src[from:l.off], start}, nil
}

// str lexes a Go-syntax double-quoted string on one line, which is exactly
// what strconv.Quote produces.
func (l *lexer) str(start pos) (token, error) {
	from := l.off
	l.bump()
	for {
		if l.off >= len(l.src) || l.src[l.off] == '\n' {
			return token{}, start.errorf("unterminated string")
		}
		c := l.src[l.off]
		l.bump()
		if c == '"' {
			break
		}
		if c == '\\' && l.off < len(l.src) && l.src[l.off] != '\n' {
			l.bump()
		}
	}
	s, err := strconv.Unquote(l.src[from:l.off])
	if err != nil {
		return token{}, start.errorf("malformed string literal %s", shorten(l.src[from:l.off]))
	}
	return token{tokString, s, start}, nil
}

func shorten(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

type parser struct {
	lx        lexer
	tok       token
	g         *Graph
	byID      map[int]*Value
	defPos    map[int]pos
	leafNames map[string]pos
	outNames  map[string]bool
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// expectPunct consumes the punctuation s or reports what was expected there.
func (p *parser) expectPunct(s, what string) error {
	if !p.tok.is(tokPunct, s) {
		return p.unexpected(what)
	}
	return p.advance()
}

func (p *parser) unexpected(what string) error {
	return p.tok.pos.errorf("expected %s, found %s", what, p.tok.describe())
}

func (p *parser) parseGraph() (*Graph, error) {
	start := p.tok.pos
	if !p.tok.is(tokIdent, "graph") {
		return nil, p.unexpected(`"graph"`)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tokString {
		return nil, p.unexpected("the graph's name as a quoted string")
	}
	p.g = &Graph{Name: p.tok.text}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expectPunct("{", `"{" after the graph's name`); err != nil {
		return nil, err
	}
	for p.tok.is(tokIdent, "attr") {
		if err := p.parseGraphAttr(); err != nil {
			return nil, err
		}
	}
	for p.tok.kind == tokRef {
		if err := p.parseValue(); err != nil {
			return nil, err
		}
	}
	for p.tok.is(tokIdent, "output") {
		if err := p.parseOutput(); err != nil {
			return nil, err
		}
	}
	if !p.tok.is(tokPunct, "}") {
		if p.tok.kind == tokRef && len(p.g.Outputs) > 0 {
			return nil, p.tok.pos.errorf("values must come before the outputs")
		}
		return nil, p.unexpected(`a value (%N = ...), "output" or "}"`)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.unexpected("end of input after the graph")
	}
	// The checks made while parsing mirror Verify, so this only fires if the
	// two ever drift apart; the position is then the graph's.
	if err := Verify(p.g); err != nil {
		return nil, start.errorf("%v", err)
	}
	return p.g, nil
}

// parseValue reads `%N = op [%a, %b] [{attrs}] : type` and checks it as
// Verify would, reporting each problem where it appears in the text.
func (p *parser) parseValue() error {
	idTok := p.tok
	id, err := strconv.Atoi(idTok.text)
	if err != nil {
		return idTok.pos.errorf("value number %%%s is out of range", shortNum(idTok.text))
	}
	if first, dup := p.defPos[id]; dup {
		return idTok.pos.errorf("duplicate value %%%d (first defined at %d:%d)", id, first.line, first.col)
	}
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expectPunct("=", `"=" after `+idTok.describe()); err != nil {
		return err
	}
	if p.tok.kind != tokIdent {
		return p.unexpected("an op name")
	}
	opTok := p.tok
	op := Op(opTok.text)
	if !op.Known() {
		return opTok.pos.errorf("unknown op %q", opTok.text)
	}
	if err := p.advance(); err != nil {
		return err
	}
	var args []*Value
	for p.tok.kind == tokRef {
		a, err := p.operand()
		if err != nil {
			return err
		}
		args = append(args, a)
		if !p.tok.is(tokPunct, ",") {
			break
		}
		if err := p.advance(); err != nil {
			return err
		}
		if p.tok.kind != tokRef {
			return p.unexpected(`an operand (%N) after ","`)
		}
	}
	var attrs Attrs
	if p.tok.is(tokPunct, "{") {
		if attrs, err = p.parseAttrs(); err != nil {
			return err
		}
	}
	if err := p.expectPunct(":", `":" and the value's type`); err != nil {
		return err
	}
	typePos := p.tok.pos
	t, err := p.parseType()
	if err != nil {
		return err
	}
	v := &Value{ID: id, Op: op, Args: args, Attrs: attrs, Type: t}
	if err := p.check(v, opTok.pos, typePos); err != nil {
		return err
	}
	p.g.Values = append(p.g.Values, v)
	p.byID[id] = v
	p.defPos[id] = idTok.pos
	return nil
}

// check applies Verify's rules for one value, with positions.
func (p *parser) check(v *Value, opPos, typePos pos) error {
	want, err := Infer(v.Op, v.Args, v.Attrs)
	if err != nil {
		return opPos.errorf("%v (%s): %v", v, v.Op, err)
	}
	switch {
	case v.Op.IsLeaf():
		if v.Name() == "" {
			return opPos.errorf("%v (%s): needs a non-empty string attribute \"name\"", v, v.Op)
		}
		key := string(v.Op) + ":" + v.Name()
		if first, dup := p.leafNames[key]; dup {
			return opPos.errorf("%v: %s %q declared twice (first at %d:%d)", v, v.Op, v.Name(), first.line, first.col)
		}
		p.leafNames[key] = opPos
	case v.Op == OpReshape:
		if err := checkReshape(v.Args[0].Type, v.Type); err != nil {
			return typePos.errorf("%v (reshape): %v", v, err)
		}
	default:
		if !want.Equal(v.Type) {
			return typePos.errorf("%v (%s): type is %s, operands give %s", v, v.Op, v.Type, want)
		}
	}
	return nil
}

// operand resolves the %N under the cursor to a value defined above it.
func (p *parser) operand() (*Value, error) {
	t := p.tok
	id, err := strconv.Atoi(t.text)
	v := p.byID[id]
	if err != nil || v == nil {
		return nil, t.pos.errorf("%%%s is not defined before use", shortNum(t.text))
	}
	return v, p.advance()
}

func shortNum(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}

// parseGraphAttr reads one `attr key = value` line of the graph header.
func (p *parser) parseGraphAttr() error {
	if err := p.advance(); err != nil { // "attr"
		return err
	}
	if p.tok.kind != tokIdent && p.tok.kind != tokString {
		return p.unexpected("a graph attribute name")
	}
	keyTok := p.tok
	if _, dup := p.g.Attrs[keyTok.text]; dup {
		return keyTok.pos.errorf("graph attribute %s given twice", strconv.Quote(keyTok.text))
	}
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expectPunct("=", `"=" after graph attribute `+strconv.Quote(keyTok.text)); err != nil {
		return err
	}
	val, err := p.attrValue()
	if err != nil {
		return err
	}
	if p.g.Attrs == nil {
		p.g.Attrs = Attrs{}
	}
	p.g.Attrs[keyTok.text] = val
	return nil
}

func (p *parser) parseAttrs() (Attrs, error) {
	if err := p.advance(); err != nil { // "{"
		return nil, err
	}
	attrs := Attrs{}
	if p.tok.is(tokPunct, "}") {
		return attrs, p.advance()
	}
	for {
		if p.tok.kind != tokIdent && p.tok.kind != tokString {
			return nil, p.unexpected("an attribute name")
		}
		keyTok := p.tok
		if _, dup := attrs[keyTok.text]; dup {
			return nil, keyTok.pos.errorf("attribute %s given twice", strconv.Quote(keyTok.text))
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if err := p.expectPunct("=", `"=" after attribute `+strconv.Quote(keyTok.text)); err != nil {
			return nil, err
		}
		val, err := p.attrValue()
		if err != nil {
			return nil, err
		}
		attrs[keyTok.text] = val
		if p.tok.is(tokPunct, "}") {
			return attrs, p.advance()
		}
		if err := p.expectPunct(",", `"," or "}" in the attributes`); err != nil {
			return nil, err
		}
	}
}

func (p *parser) attrValue() (any, error) {
	t := p.tok
	switch {
	case t.kind == tokNumber, t.is(tokIdent, "Inf"), t.is(tokIdent, "NaN"):
		v, err := parseNumber(t)
		if err != nil {
			return nil, err
		}
		return v, p.advance()
	case t.kind == tokString:
		return t.text, p.advance()
	case t.is(tokPunct, "["):
		if err := p.advance(); err != nil {
			return nil, err
		}
		// A list is all integers or all floats, as the printer writes them.
		var ints []int64
		var floats []float64
		if p.tok.is(tokPunct, "]") {
			return []int64{}, p.advance()
		}
		for {
			if p.tok.kind != tokNumber && !p.tok.is(tokIdent, "Inf") && !p.tok.is(tokIdent, "NaN") {
				return nil, p.unexpected("a number in the list")
			}
			n, err := parseNumber(p.tok)
			if err != nil {
				return nil, err
			}
			switch n := n.(type) {
			case int64:
				if floats != nil {
					return nil, p.tok.pos.errorf("list mixes floats and integers at %s", p.tok.text)
				}
				ints = append(ints, n)
			case float64:
				if ints != nil {
					return nil, p.tok.pos.errorf("list mixes integers and floats at %s", p.tok.text)
				}
				floats = append(floats, n)
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.is(tokPunct, "]") {
				if floats != nil {
					return floats, p.advance()
				}
				return ints, p.advance()
			}
			if err := p.expectPunct(",", `"," or "]" in the list`); err != nil {
				return nil, err
			}
		}
	}
	return nil, p.unexpected("an attribute value (number, string or list of numbers)")
}

// parseNumber reads an integer when the text has no fraction, exponent, Inf
// or NaN, and a float otherwise: the printer's ".0" rule makes the two kinds
// distinguishable, so a float attribute never comes back as an integer.
func parseNumber(t token) (any, error) {
	s := t.text
	if !strings.ContainsAny(s, ".eE") && !strings.Contains(s, "Inf") && s != "NaN" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, t.pos.errorf("integer %s is out of range", shortNum(s))
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Overflow is the only failure the lexer lets through.
		if errors.Is(err, strconv.ErrRange) {
			return nil, t.pos.errorf("number %s is out of range", shortNum(s))
		}
		return nil, t.pos.errorf("malformed number %s", shortNum(s))
	}
	return f, nil
}

// parseType reads `dtype[dim, ...]`; dims are non-negative integers or symbols.
func (p *parser) parseType() (Type, error) {
	if p.tok.kind != tokIdent {
		return Type{}, p.unexpected("a type such as f32[T, 256]")
	}
	dt, ok := ParseDType(p.tok.text)
	if !ok {
		return Type{}, p.tok.pos.errorf("unknown dtype %q", p.tok.text)
	}
	if err := p.advance(); err != nil {
		return Type{}, err
	}
	if err := p.expectPunct("[", `"[" and the shape after the dtype`); err != nil {
		return Type{}, err
	}
	shape := Shape{}
	if p.tok.is(tokPunct, "]") {
		return Type{dt, shape}, p.advance()
	}
	for {
		switch p.tok.kind {
		case tokIdent:
			shape = append(shape, Sym(p.tok.text))
		case tokNumber:
			n, err := parseNumber(p.tok)
			if err != nil {
				return Type{}, err
			}
			i, ok := n.(int64)
			if !ok || i < 0 {
				return Type{}, p.tok.pos.errorf("dimension must be a non-negative integer or a symbol, found %s", p.tok.text)
			}
			shape = append(shape, D(i))
		default:
			return Type{}, p.unexpected("a dimension (integer or symbol)")
		}
		if err := p.advance(); err != nil {
			return Type{}, err
		}
		if p.tok.is(tokPunct, "]") {
			return Type{dt, shape}, p.advance()
		}
		if err := p.expectPunct(",", `"," or "]" in the shape`); err != nil {
			return Type{}, err
		}
	}
}

// parseOutput reads `output "name" = %N`.
func (p *parser) parseOutput() error {
	if err := p.advance(); err != nil {
		return err
	}
	if p.tok.kind != tokString {
		return p.unexpected("the output's name as a quoted string")
	}
	nameTok := p.tok
	if p.outNames[nameTok.text] {
		return nameTok.pos.errorf("output %q listed twice", nameTok.text)
	}
	p.outNames[nameTok.text] = true
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expectPunct("=", `"=" after the output's name`); err != nil {
		return err
	}
	if p.tok.kind != tokRef {
		return p.unexpected("the output's value (%N)")
	}
	v, err := p.operand()
	if err != nil {
		return err
	}
	p.g.Outputs = append(p.g.Outputs, Output{Name: nameTok.text, Value: v})
	return nil
}
