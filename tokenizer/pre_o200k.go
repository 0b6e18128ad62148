package tokenizer

import "unicode"

// Class bits of one code point for the o200k-style matchers. Each splitter
// computes them once per code point with its own rules (splitGPT4o: llama.cpp's
// adaptation; splitO200k: the real regex), and matchO200k runs the regex's
// alternatives on them.
const (
	o2Upper  uint8 = 1 << iota // may stand in the first part of a word
	o2Lower                    // may stand in the second part of a word
	o2Lead                     // [^\r\n\p{L}\p{N}]: may precede a word
	o2Other                    // [^\s\p{L}\p{N}]: punctuation, symbols, ...
	o2Number                   // \p{N}
	o2Space                    // \s
)

// o200kClasses gives the class bits of every code point of cpts.
func o200kClasses(cpts []rune, class func(rune) uint8, buf []uint8) []uint8 {
	buf = buf[:0]
	for _, c := range cpts {
		if c < 0x80 {
			buf = append(buf, asciiO200k[c])
			continue
		}
		buf = append(buf, class(c))
	}
	return buf
}

// asciiO200k is the class of each ASCII code point. Both splitters agree on
// ASCII: letters have their case, \s is \t \n \v \f \r and space.
var asciiO200k = func() (tab [0x80]uint8) {
	for c := rune(0); c < 0x80; c++ {
		var f uint8
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		number := c >= '0' && c <= '9'
		space := c == ' ' || c >= '\t' && c <= '\r'
		switch {
		case c >= 'A' && c <= 'Z':
			f |= o2Upper
		case c >= 'a' && c <= 'z':
			f |= o2Lower
		}
		if !letter && !number && c != '\r' && c != '\n' {
			f |= o2Lead
		}
		if !letter && !number && !space {
			f |= o2Other
		}
		if number {
			f |= o2Number
		}
		if space {
			f |= o2Space
		}
		tab[c] = f
	}
	return tab
}()

// splitO200k matches the o200k regex the way tiktoken and Hugging Face do
// (a backtracking engine with Unicode classes):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// This is the tokenizer a gpt-oss (or GPT-4o) model was trained with; a
// GGUF's "gpt-4o" follows llama.cpp's adaptation instead (splitGPT4o).
func splitO200k(cpts []rune, spans []int) []int {
	return splitO200kLike(cpts, spans, o200kClass, true)
}

// o200kClass is the class of a non-ASCII code point in the real regex.
func o200kClass(c rune) uint8 {
	if c > unicode.MaxRune {
		return o2Lead | o2Other
	}
	var f uint8
	letter := isLetter(c)
	mark := unicode.IsMark(c)
	switch {
	case mark || unicode.In(c, unicode.Lm, unicode.Lo):
		f |= o2Upper | o2Lower
	case unicode.In(c, unicode.Lu, unicode.Lt):
		f |= o2Upper
	case unicode.Is(unicode.Ll, c):
		f |= o2Lower
	case letter:
		// A letter Go's tables do not put in a category yet (isLetter's
		// Unicode 15.1 patch, all Lo).
		f |= o2Upper | o2Lower
	}
	number := isNumber(c)
	space := isWhitespace(c)
	if !letter && !number && c != '\r' && c != '\n' {
		f |= o2Lead
	}
	if !letter && !number && !space {
		f |= o2Other
	}
	if number {
		f |= o2Number
	}
	if space {
		f |= o2Space
	}
	return f
}

// splitO200kLike splits every piece with matchO200k on the classes class
// gives. unicodeFold says whether the contractions fold case as Unicode does
// (the real regex's (?i:...)) or only in ASCII (llama.cpp's [sS]).
func splitO200kLike(cpts []rune, spans []int, class func(rune) uint8, unicodeFold bool) []int {
	cls := o200kClasses(cpts, class, make([]uint8, 0, len(cpts)))
	out := make([]int, 0, len(spans)+len(cpts)/4)
	start := 0
	for _, n := range spans {
		end := start + n
		m := o200kMatcher{t: cpts[:end], c: cls[:end], unicodeFold: unicodeFold}
		for pos := start; pos < end; {
			e := m.match(pos)
			out = append(out, e-pos)
			pos = e
		}
		start = end
	}
	return out
}

// o200kMatcher runs the o200k regex's alternatives, first match wins, on one
// piece: t and c end where the piece ends.
type o200kMatcher struct {
	t           []rune
	c           []uint8
	unicodeFold bool
}

func (m *o200kMatcher) is(p int, bit uint8) bool { return p < len(m.c) && m.c[p]&bit != 0 }

// match returns the end of the match that starts at pos. Some alternative
// always matches at least one code point: every code point is a letter, a
// number, a space or "other".
func (m *o200kMatcher) match(pos int) int {
	// The word alternatives, each tried with the optional lead character
	// and then without it (a combining mark is a lead and a word character
	// at once in the real regex, so both can matter).
	lead := m.is(pos, o2Lead)
	if lead {
		if e, ok := m.upperLower(pos + 1); ok {
			return e
		}
	}
	if e, ok := m.upperLower(pos); ok {
		return e
	}
	if lead {
		if e, ok := m.upperPlus(pos + 1); ok {
			return e
		}
	}
	if e, ok := m.upperPlus(pos); ok {
		return e
	}
	// \p{N}{1,3}
	if m.is(pos, o2Number) {
		e := pos + 1
		for e < pos+3 && m.is(e, o2Number) {
			e++
		}
		return e
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n/]*"
	o := pos
	if m.t[pos] == ' ' {
		o = pos + 1
	}
	if m.is(o, o2Other) {
		e := o + 1
		for m.is(e, o2Other) {
			e++
		}
		for e < len(m.t) && (m.t[e] == '\r' || m.t[e] == '\n' || m.t[e] == '/') {
			e++
		}
		return e
	}
	return m.spaces(pos)
}

// upperLower is Upper*Lower+ contraction? at s: Upper* takes all it can and
// gives back one code point at a time until Lower+ can start.
func (m *o200kMatcher) upperLower(s int) (int, bool) {
	u := s
	for m.is(u, o2Upper) {
		u++
	}
	for k := u; k >= s; k-- {
		if m.is(k, o2Lower) {
			e := k + 1
			for m.is(e, o2Lower) {
				e++
			}
			return m.contraction(e), true
		}
	}
	return 0, false
}

// upperPlus is Upper+Lower* contraction? at s.
func (m *o200kMatcher) upperPlus(s int) (int, bool) {
	if !m.is(s, o2Upper) {
		return 0, false
	}
	e := s + 1
	for m.is(e, o2Upper) {
		e++
	}
	for m.is(e, o2Lower) {
		e++
	}
	return m.contraction(e), true
}

// spaces is \s*[\r\n]+|\s+(?!\S)|\s+ at pos.
func (m *o200kMatcher) spaces(pos int) int {
	q, lastNL := pos, -1
	for m.is(q, o2Space) {
		if m.t[q] == '\r' || m.t[q] == '\n' {
			lastNL = q
		}
		q++
	}
	switch {
	case lastNL >= 0:
		// \s* backs off to the last line break, which [\r\n]+ takes.
		return lastNL + 1
	case q == len(m.t) && q > pos:
		return q
	case q-pos >= 2:
		// (?!\S) fails before a character, so \s+ gives back one space.
		return q - 1
	case q > pos:
		return q
	}
	// Not reached (see match); one code point keeps the caller going.
	return pos + 1
}

// contraction extends a word that ends at e by 's 't 're 've 'm 'll 'd in
// any case. With Unicode folding, U+017F LATIN SMALL LETTER LONG S folds to s
// (no other code point folds to one of these letters).
func (m *o200kMatcher) contraction(e int) int {
	t := m.t
	if e+1 >= len(t) || t[e] != '\'' {
		return e
	}
	c1 := asciiLower(t[e+1])
	if m.unicodeFold && c1 == 'ſ' {
		c1 = 's'
	}
	switch c1 {
	case 's', 't', 'm', 'd':
		return e + 2
	case 'r', 'v':
		if e+2 < len(t) && asciiLower(t[e+2]) == 'e' {
			return e + 3
		}
	case 'l':
		if e+2 < len(t) && asciiLower(t[e+2]) == 'l' {
			return e + 3
		}
	}
	return e
}
