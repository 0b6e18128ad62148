package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// preTokenizer splits gpt2 input into words before BPE. llama.cpp chooses the
// split rules from tokenizer.ggml.pre (llama_vocab::impl::load); each kind
// here is one of its rule sets, written by hand because Go's regexp has no
// lookahead and its \s, \p{L} are not the reference's classes.
type preTokenizer int

const (
	// preDefault is llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT: four regexes
	// applied one after the other, each splitting the pieces of the last:
	//   [\p{P}\$\+<=>\^~\|]+
	//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
	//   \p{N}+
	//   [0-9][0-9][0-9]
	preDefault preTokenizer = iota
	// preGPT2 is the GPT-2 regex alone:
	//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	preGPT2
	// preLlama3 is the Llama-3 regex (see splitLlama3), digits in groups of
	// up to three.
	preLlama3
	// preQwen2 is the Llama-3 regex with single digits (\p{N} for \p{N}{1,3}).
	preQwen2
	// preGPT4o is llama.cpp's adaptation of the o200k regex (see splitGPT4o).
	preGPT4o
	// preO200k is the o200k regex as tiktoken and Hugging Face run it (see
	// splitO200k). No GGUF names it: llama.cpp always runs its adaptation,
	// preGPT4o, so only a tokenizer.json reader chooses this one.
	preO200k
)

// preSpec is what a tokenizer.ggml.pre value selects.
type preSpec struct {
	split preTokenizer
	// ignoreMerges: a pre-token that is a whole vocabulary entry is taken as
	// that token without running the merges (llama.cpp's ignore_merges, set
	// for the Llama-3 family). It changes ids where the merges would not
	// rebuild the entry.
	ignoreMerges bool
}

// preTokenizers maps tokenizer.ggml.pre values to their split rules. The
// names are those llama.cpp maps to these rule sets without changing anything
// else about encoding (pre types that add SEP tokens, drop BOS or need other
// steps are left out, so that they fail loudly instead of encoding wrongly).
var preTokenizers = map[string]preSpec{
	"":                {split: preDefault},
	"default":         {split: preDefault},
	"gpt-2":           {split: preGPT2},
	"phi-2":           {split: preGPT2},
	"mpt":             {split: preGPT2},
	"olmo":            {split: preGPT2},
	"jais":            {split: preGPT2},
	"trillion":        {split: preGPT2},
	"granite-docling": {split: preGPT2},
	"exaone4":         {split: preGPT2},
	"jina-es":         {split: preGPT2},
	"jina-de":         {split: preGPT2},
	"jina-v2-es":      {split: preGPT2},
	"jina-v2-de":      {split: preGPT2},
	"gigachat":        {split: preGPT2},
	"a.x-4.0":         {split: preGPT2},
	"mellum":          {split: preGPT2},
	"modern-bert":     {split: preGPT2},

	"llama-bpe": {split: preLlama3, ignoreMerges: true},
	"llama3":    {split: preLlama3, ignoreMerges: true},
	"llama-v3":  {split: preLlama3, ignoreMerges: true},
	"falcon3":   {split: preLlama3, ignoreMerges: true},
	"falcon-h1": {split: preLlama3, ignoreMerges: true},
	"pixtral":   {split: preLlama3, ignoreMerges: true},
	"midm-2.0":  {split: preLlama3, ignoreMerges: true},
	"lfm2":      {split: preLlama3, ignoreMerges: true},
	// The same regex without ignore_merges (LLAMA_VOCAB_PRE_TYPE_DBRX,
	// _SMAUG); a tokenizer.json with the Llama-3 regex and ignore_merges
	// false maps here too.
	"dbrx":      {split: preLlama3},
	"smaug-bpe": {split: preLlama3},

	"qwen2":            {split: preQwen2},
	"deepseek-r1-qwen": {split: preQwen2},
	"megrez":           {split: preQwen2},
	"stablelm2":        {split: preQwen2},

	"gpt-4o":  {split: preGPT4o},
	"llama4":  {split: preGPT4o},
	"kanana2": {split: preGPT4o},
}

// preO200kName is the Vocab.Pre value of the exact o200k splitter. It is not
// a llama.cpp name (the angle brackets keep it from clashing with one); the
// tokenizer.json reader sets it for the o200k regex.
const preO200kName = "<tiktoken-o200k>"

func init() {
	preTokenizers[preO200kName] = preSpec{split: preO200k}
}

// supportedPre lists the accepted tokenizer.ggml.pre values for an error
// message, the missing value ("") left out.
func supportedPre() string {
	names := make([]string, 0, len(preTokenizers))
	for k := range preTokenizers {
		if k != "" && k != preO200kName {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// split returns the words of text as raw UTF-8. Text that Go's decoder
// accepts comes back as substrings of text; otherwise each word is the
// re-encoding of the code points the lax decoder read (see decodeCodepoints),
// which is what llama.cpp byte-encodes.
func (p preTokenizer) split(text string) []string {
	cpts := decodeCodepoints(text)
	// The splitters work on lengths of consecutive pieces, in code points, as
	// llama.cpp's unicode_regex_split does.
	spans := []int{len(cpts)}
	switch p {
	case preDefault:
		spans = splitRuns(cpts, spans, isDefaultPunct)
		spans = splitGPT2(cpts, spans)
		spans = splitRuns(cpts, spans, isNumber)
		spans = splitDigitTriples(cpts, spans)
	case preGPT2:
		spans = splitGPT2(cpts, spans)
	case preLlama3:
		spans = splitLlama3(cpts, spans, 3)
	case preQwen2:
		spans = splitLlama3(cpts, spans, 1)
	case preGPT4o:
		spans = splitGPT4o(cpts, spans)
	case preO200k:
		spans = splitO200k(cpts, spans)
	}

	words := make([]string, 0, len(spans))
	start := 0
	if utf8.ValidString(text) {
		off := 0
		for _, n := range spans {
			w := off
			for _, c := range cpts[start : start+n] {
				w += utf8.RuneLen(c)
			}
			words = append(words, text[off:w])
			off = w
			start += n
		}
		return words
	}
	for _, n := range spans {
		var utf []byte
		for _, c := range cpts[start : start+n] {
			utf = appendCodepoint(utf, c)
		}
		words = append(words, string(utf))
		start += n
	}
	return words
}

// byteEncode replaces every byte of raw by its printable stand-in (see
// byteToUnicode): the form of gpt2 vocabulary entries and merges.
func byteEncode(raw string) string {
	var sb strings.Builder
	sb.Grow(len(raw) * 2)
	for i := 0; i < len(raw); i++ {
		sb.WriteString(byteToUnicode[raw[i]])
	}
	return sb.String()
}

// decodeCodepoints is llama.cpp's unicode_cpts_from_utf8. It is laxer than
// Go's decoder on purpose: it accepts overlong forms and surrogates (checking
// only the continuation-byte pattern), and turns each byte it cannot decode
// into U+FFFD, resuming at the next byte.
func decodeCodepoints(s string) []rune {
	out := make([]rune, 0, len(s))
	cont := func(i int) bool { return s[i]&0xC0 == 0x80 }
	for i := 0; i < len(s); {
		b := rune(s[i])
		switch {
		case b&0x80 == 0:
			out = append(out, b)
			i++
			continue
		case b&0x40 == 0:
			// A stray continuation byte.
		case b&0x20 == 0:
			if i+1 < len(s) && cont(i+1) {
				out = append(out, (b&0x1F)<<6|rune(s[i+1])&0x3F)
				i += 2
				continue
			}
		case b&0x10 == 0:
			if i+2 < len(s) && cont(i+1) && cont(i+2) {
				out = append(out, (b&0x0F)<<12|(rune(s[i+1])&0x3F)<<6|rune(s[i+2])&0x3F)
				i += 3
				continue
			}
		case b&0x08 == 0:
			if i+3 < len(s) && cont(i+1) && cont(i+2) && cont(i+3) {
				out = append(out, (b&0x07)<<18|(rune(s[i+1])&0x3F)<<12|(rune(s[i+2])&0x3F)<<6|rune(s[i+3])&0x3F)
				i += 4
				continue
			}
		}
		out = append(out, unicode.ReplacementChar)
		i++
	}
	return out
}

// appendCodepoint is llama.cpp's unicode_cpt_to_utf8, which (unlike Go's
// encoder) writes surrogates as they are. Code points above U+10FFFF, which
// only the lax decoder can produce, make llama.cpp throw; they become U+FFFD.
func appendCodepoint(b []byte, c rune) []byte {
	switch {
	case c < 0:
		c = unicode.ReplacementChar
	case c <= 0x7F:
		return append(b, byte(c))
	case c <= 0x7FF:
		return append(b, 0xC0|byte(c>>6), 0x80|byte(c)&0x3F)
	case c > 0x10FFFF:
		c = unicode.ReplacementChar
	}
	if c <= 0xFFFF {
		return append(b, 0xE0|byte(c>>12), 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
	}
	return append(b, 0xF0|byte(c>>18), 0x80|byte(c>>12)&0x3F, 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
}

// Code point classes used by the pre-tokenizers. llama.cpp takes them from
// tables generated with Python's regex module (\p{L}, \p{N}, \s = Unicode
// White_Space) for Unicode 15.1; Go's unicode package has the same classes for
// Unicode 15.0. The only letters 15.1 added are CJK Extension I, patched in
// here. (Should Go move past 15.1, code points assigned later would count as
// letters here but not in llama.cpp.)
func isLetter(c rune) bool {
	return c <= unicode.MaxRune && unicode.IsLetter(c) || c >= 0x2EBF0 && c <= 0x2EE5D
}

func isNumber(c rune) bool     { return c <= unicode.MaxRune && unicode.IsNumber(c) }
func isWhitespace(c rune) bool { return c <= unicode.MaxRune && unicode.IsSpace(c) }

// isDefaultPunct is the class [\p{P}\$\+<=>\^~\|]. llama.cpp runs it on its
// "collapsed" text, where ASCII stays as is and other code points become a
// byte naming their category, so it means exactly this.
func isDefaultPunct(c rune) bool {
	switch c {
	case '$', '+', '<', '=', '>', '^', '~', '|':
		return true
	}
	return c <= unicode.MaxRune && !isWhitespace(c) && unicode.IsPunct(c)
}

// splitRuns splits every piece into maximal runs of code points that are in
// class and runs that are not: what std::regex_iterator does for "[class]+",
// keeping the text between matches as pieces too.
func splitRuns(cpts []rune, spans []int, class func(rune) bool) []int {
	out := make([]int, 0, len(spans))
	start := 0
	for _, n := range spans {
		end := start + n
		for i := start; i < end; {
			in := class(cpts[i])
			j := i + 1
			for j < end && class(cpts[j]) == in {
				j++
			}
			out = append(out, j-i)
			i = j
		}
		start = end
	}
	return out
}

// splitDigitTriples applies "[0-9][0-9][0-9]": every three ASCII digits in a
// row, leftmost first, become a piece of their own.
func splitDigitTriples(cpts []rune, spans []int) []int {
	digit := func(c rune) bool { return c >= '0' && c <= '9' }
	out := make([]int, 0, len(spans))
	start := 0
	for _, n := range spans {
		end := start + n
		last := start // end of the previous match
		for i := start; i+3 <= end; {
			if digit(cpts[i]) && digit(cpts[i+1]) && digit(cpts[i+2]) {
				if i > last {
					out = append(out, i-last)
				}
				out = append(out, 3)
				i += 3
				last = i
				continue
			}
			i++
		}
		if last < end {
			out = append(out, end-last)
		}
		start = end
	}
	return out
}

// splitGPT2 is llama.cpp's unicode_regex_split_custom_gpt2, a hand-written
// matcher for the GPT-2 regex (Go's regexp has no (?!\S) lookahead):
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Each piece is matched on its own: a position outside the piece reads as
// "no character", which is what makes \s+(?!\S) leave the last space of a
// run for the word that follows.
func splitGPT2(cpts []rune, spans []int) []int {
	out := make([]int, 0, len(spans)+len(cpts)/4)
	start := 0
	for _, n := range spans {
		ini, end := start, start+n
		start = end

		const (
			fLetter = 1 << iota
			fNumber
			fSpace
			fAny // any code point inside the piece (llama.cpp: flags != 0)
		)
		flags := func(p int) int {
			if p < ini || p >= end {
				return 0
			}
			c := cpts[p]
			f := fAny
			if isLetter(c) {
				f |= fLetter
			}
			if isNumber(c) {
				f |= fNumber
			}
			if isWhitespace(c) {
				f |= fSpace
			}
			return f
		}
		prev := ini
		add := func(e int) int {
			l := e - prev
			if l > 0 {
				out = append(out, l)
			}
			prev = e
			return l
		}

		for pos := ini; pos < end; {
			c := cpts[pos]

			// 's|'t|'re|'ve|'m|'ll|'d
			if c == '\'' && pos+1 < end {
				c1 := cpts[pos+1]
				if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
					pos += add(pos + 2)
					continue
				}
				if pos+2 < end {
					c2 := cpts[pos+2]
					if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}

			f2 := flags(pos)
			if c == ' ' {
				f2 = flags(pos + 1)
			}
			// " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+"
			var cls func(int) bool
			switch {
			case f2&fLetter != 0:
				cls = func(f int) bool { return f&fLetter != 0 }
			case f2&fNumber != 0:
				cls = func(f int) bool { return f&fNumber != 0 }
			case f2 != 0 && f2&(fSpace|fLetter|fNumber) == 0:
				cls = func(f int) bool { return f != 0 && f&(fSpace|fLetter|fNumber) == 0 }
			}
			if cls != nil {
				if c == ' ' {
					pos++
				}
				for cls(flags(pos)) {
					pos++
				}
				add(pos)
				continue
			}

			nws := 0
			for flags(pos+nws)&fSpace != 0 {
				nws++
			}
			// \s+(?!\S): a run of spaces followed by a character gives up its
			// last space to that character's word.
			if nws > 1 && pos+nws < end {
				pos += nws - 1
				add(pos)
				continue
			}
			// \s+
			if nws > 0 {
				pos += nws
				add(pos)
				continue
			}
			// No rule matched: a piece of one code point.
			pos++
			add(pos)
		}
	}
	return out
}
