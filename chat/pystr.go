package chat

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python's str methods as templates call them. gonja ships versions of these,
// but several differ from Python in ways prompts show (strip() without
// arguments keeps U+001C..U+001F and lstrip/rstrip default to a space only,
// split's maxsplit is off by one, replace needs a count), so the ones chat
// templates use are written here from Python's definitions.

// pyIsSpace is str.isspace for one character: Go's unicode.IsSpace plus the
// four information separators U+001C..U+001F, which Python counts as
// whitespace (bidirectional class B or S).
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is str.strip/lstrip/rstrip: with chars nil, whitespace; otherwise
// any of the characters in *chars.
func pyStrip(s string, chars *string, left, right bool) string {
	cut := pyIsSpace
	if chars != nil {
		set := *chars
		cut = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s
}

// pySplit is str.split(sep, maxsplit). sep nil splits on runs of whitespace
// and drops empty strings; maxsplit < 0 means no limit.
func pySplit(s string, sep *string, maxsplit int) []string {
	if sep != nil {
		n := -1
		if maxsplit >= 0 {
			n = maxsplit + 1
		}
		return strings.SplitN(s, *sep, n)
	}
	var out []string
	rest := strings.TrimLeftFunc(s, pyIsSpace)
	for rest != "" {
		if maxsplit >= 0 && len(out) == maxsplit {
			out = append(out, rest) // the remainder keeps its trailing whitespace
			break
		}
		end := strings.IndexFunc(rest, pyIsSpace)
		if end < 0 {
			out = append(out, rest)
			break
		}
		out = append(out, rest[:end])
		rest = strings.TrimLeftFunc(rest[end:], pyIsSpace)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// pyRSplit is str.rsplit(sep, maxsplit): the same pieces as split when there
// is no limit, taken from the right when there is.
func pyRSplit(s string, sep *string, maxsplit int) []string {
	if maxsplit < 0 {
		return pySplit(s, sep, maxsplit)
	}
	var rev []string
	if sep != nil {
		rest := s
		for len(rev) < maxsplit {
			i := strings.LastIndex(rest, *sep)
			if i < 0 {
				break
			}
			rev = append(rev, rest[i+len(*sep):])
			rest = rest[:i]
		}
		rev = append(rev, rest)
	} else {
		rest := strings.TrimRightFunc(s, pyIsSpace)
		for rest != "" {
			if len(rev) == maxsplit {
				rev = append(rev, rest)
				break
			}
			i := strings.LastIndexFunc(rest, pyIsSpace)
			if i < 0 {
				rev = append(rev, rest)
				break
			}
			_, size := utf8.DecodeRuneInString(rest[i:])
			rev = append(rev, rest[i+size:])
			rest = strings.TrimRightFunc(rest[:i], pyIsSpace)
		}
	}
	out := make([]string, len(rev))
	for i, p := range rev {
		out[len(rev)-1-i] = p
	}
	return out
}

// pyReplace is str.replace(old, new, count): count < 0 replaces all, and an
// empty old inserts new before every character and at the end.
func pyReplace(s, old, new string, count int) string {
	if old != "" {
		return strings.Replace(s, old, new, count)
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if count >= 0 && n >= count {
			b.WriteRune(r)
			continue
		}
		b.WriteString(new)
		b.WriteRune(r)
		n++
	}
	if count < 0 || n < count {
		b.WriteString(new)
	}
	return b.String()
}

// pySliceBounds applies Python's slice rules to [start:end] over n code
// points (negative counts from the end, out of range clamps).
func pySliceBounds(n int, start, end *int) (int, int) {
	norm := func(p *int, def int) int {
		if p == nil {
			return def
		}
		i := *p
		if i < 0 {
			i += n
			if i < 0 {
				i = 0
			}
		}
		if i > n {
			i = n
		}
		return i
	}
	return norm(start, 0), norm(end, n)
}
