package tokenizer

// splitGPT4o is what llama.cpp does for tokenizer.ggml.pre "gpt-4o". It does
// not run the o200k regex itself but an adaptation,
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?
//	|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with std::regex (ECMAScript: the first alternative that matches wins, and
// quantifiers backtrack greedily) on a "collapsed" text where every non-ASCII
// code point is one byte standing for its class: whitespace, letter, number or
// something else. So, unlike o200k proper (splitO200k):
//
//   - the case classes are approximate: an ASCII letter has its case, every
//     non-ASCII letter counts as upper and lower case at once;
//   - combining marks (\p{M}) are not letters: they split words, which
//     changes the ids of Devanagari, Arabic, Thai and Khmer text;
//   - the contractions fold ASCII case only.
//
// The reference engine's goldens follow this adaptation, so a GGUF file's
// "gpt-4o" must too. The regex structure is the same as o200k's, so the two
// share the matcher and differ in the classes.
func splitGPT4o(cpts []rune, spans []int) []int {
	return splitO200kLike(cpts, spans, gpt4oClass, false)
}

// gpt4oClass is the class of a non-ASCII code point in the collapsed text:
// whitespace first (the collapsed byte is a vertical tab), then letter (both
// cases), number, or anything else.
func gpt4oClass(c rune) uint8 {
	switch {
	case isWhitespace(c):
		return o2Lead | o2Space
	case isLetter(c):
		return o2Upper | o2Lower
	case isNumber(c):
		return o2Number
	}
	return o2Lead | o2Other
}
