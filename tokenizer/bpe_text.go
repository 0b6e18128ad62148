package tokenizer

import (
	"strings"
	"sync"
)

// textMerges is the merges list as llama.cpp looks it up: by the text
// "left right". It is built on first use, since only vocabularies with
// merges that make no token, or with bytes that have no token, need it.
type textMerges struct {
	list []string

	once   sync.Once
	ranks  map[string]int32 // "left right" → rank, first rank of duplicates
	maxLen int32            // longest key, to skip lookups that cannot hit
}

func (m *textMerges) build() {
	m.ranks = make(map[string]int32, len(m.list))
	for i, line := range m.list {
		// Entries without a space after the first byte become an empty
		// pair that no lookup can hit.
		if strings.IndexByte(line[min(1, len(line)):], ' ') < 0 {
			continue
		}
		if _, dup := m.ranks[line]; !dup {
			m.ranks[line] = int32(i)
			m.maxLen = max(m.maxLen, int32(len(line)))
		}
	}
}

// mergeText merges one byte-encoded word the way llama.cpp does, by text,
// and appends its tokens.
func (t *Tokenizer) mergeText(word string, out []int32) []int32 {
	tm := t.textMerges
	tm.once.Do(tm.build)
	syms := splitSymbols(word, make([]symbol, 0, len(word)))
	q := bigramQueue{bpe: true}
	var key []byte

	tryAdd := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := &syms[left], &syms[right]
		if l.n+r.n+1 > tm.maxLen {
			return
		}
		// The merge key is "left right", the form of the merges list.
		key = append(key[:0], word[l.start:l.start+l.n]...)
		key = append(key, ' ')
		key = append(key, word[r.start:r.start+r.n]...)
		rank, ok := tm.ranks[string(key)]
		if !ok {
			return
		}
		q.push(bigram{left: left, right: right, size: l.n + r.n, rank: rank})
	}

	for i := 1; i < len(syms); i++ {
		tryAdd(int32(i-1), int32(i))
	}
	for len(q.items) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		// llama.cpp compares the pair's text with the text recorded in the
		// entry; symbols are contiguous slices starting at the fixed left
		// position, so comparing lengths is the same test.
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}

	for _, s := range syms {
		if s.n == 0 {
			continue
		}
		piece := word[s.start : s.start+s.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		// A symbol that is not a token: llama.cpp tries each byte of its
		// (byte-encoded) text as a one-byte token and silently drops the
		// bytes that are not. Only ASCII bytes can match.
		for j := 0; j < len(piece); j++ {
			if id := t.byteToken[piece[j]]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	return out
}
