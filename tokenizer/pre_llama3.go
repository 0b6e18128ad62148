package tokenizer

// splitLlama3 is llama.cpp's unicode_regex_split_custom_llama3 (maxDigits 3)
// and unicode_regex_split_custom_qwen2 (maxDigits 1), a hand-written matcher
// for the Llama-3 regex
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// and Qwen2's, which has \p{N} in place of \p{N}{1,3}. As in splitGPT2, each
// piece is matched on its own and \s is Unicode White_Space (NBSP, U+3000,
// U+2028, U+0085 and vertical tab included), which is what the reference's
// code point flags say.
func splitLlama3(cpts []rune, spans []int, maxDigits int) []int {
	out := make([]int, 0, len(spans)+len(cpts)/4)
	start := 0
	for _, n := range spans {
		ini, end := start, start+n
		start = end

		// cpt and the class tests read "nothing" outside the piece, as the
		// reference's OUT_OF_RANGE code point and empty flags do.
		const outside = -1
		cpt := func(p int) rune {
			if p < ini || p >= end {
				return outside
			}
			return cpts[p]
		}
		letter := func(p int) bool { return p >= ini && p < end && isLetter(cpts[p]) }
		number := func(p int) bool { return p >= ini && p < end && isNumber(cpts[p]) }
		space := func(p int) bool { return p >= ini && p < end && isWhitespace(cpts[p]) }

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

			// (?i:'s|'t|'re|'ve|'m|'ll|'d)
			if c == '\'' && pos+1 < end {
				c1 := asciiLower(cpt(pos + 1))
				if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
					pos += add(pos + 2)
					continue
				}
				if pos+2 < end {
					c2 := asciiLower(cpt(pos + 2))
					if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}

			// [^\r\n\p{L}\p{N}]?\p{L}+
			if c != '\r' && c != '\n' && !number(pos) && (letter(pos) || letter(pos+1)) {
				pos++
				for letter(pos) {
					pos++
				}
				add(pos)
				continue
			}

			// \p{N}{1,3} (Qwen2: \p{N})
			if number(pos) {
				ini := pos
				for number(pos) {
					pos++
					if pos-ini >= maxDigits {
						add(pos)
						ini = pos
					}
				}
				add(pos)
				continue
			}

			// " ?[^\s\p{L}\p{N}]+[\r\n]*"
			p2 := pos
			if c == ' ' {
				p2 = pos + 1
			}
			other := func(p int) bool { return p >= ini && p < end && !space(p) && !letter(p) && !number(p) }
			if other(p2) {
				pos = p2
				for other(pos) {
					pos++
				}
				for c2 := cpt(pos); c2 == '\r' || c2 == '\n'; c2 = cpt(pos) {
					pos++
				}
				add(pos)
				continue
			}

			nws, lastNL := 0, 0
			for space(pos + nws) {
				if c2 := cpts[pos+nws]; c2 == '\r' || c2 == '\n' {
					lastNL = pos + nws + 1
				}
				nws++
			}
			// \s*[\r\n]+: the run of spaces up to its last line break.
			if lastNL > 0 {
				pos = lastNL
				add(pos)
				continue
			}
			// \s+(?!\S): a run followed by a character leaves its last
			// space to that character's word.
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
			// No rule matched: one code point. (Every code point is a
			// letter, number, space or other, so this is not reached; the
			// reference has the same fallback.)
			pos++
			add(pos)
		}
	}
	return out
}

// asciiLower lowers A–Z. The reference calls its full Unicode lowercase map,
// but no code point outside A–Z lowers to one of the contraction letters
// (s, t, m, d, r, v, e, l), so the result of the tests is the same.
func asciiLower(c rune) rune {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
