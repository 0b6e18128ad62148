package tokenizer

// spmSpace is U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space.
const spmSpace = "\u2581"

// symbol is a run of bytes of the text being merged. Symbols form a linked
// list in text order; a symbol that was merged into its left neighbour keeps
// n == 0. Because only neighbours merge, a symbol is always one contiguous
// slice text[start : start+n], which lets lookups slice the input instead of
// building strings.
type symbol struct {
	prev, next int32
	start, n   int32
}

// bigram is a candidate merge of symbols left and right into one token of
// size bytes. key is the score (SPM) or the negated rank (BPE): higher wins.
type bigram struct {
	left, right int32
	size        int32
	key         float32
	rank        int32
	result      int32 // BPE by ids: the token the merge makes
}

// bigramQueue is a binary max-heap on (score, -left) for SPM and
// (-rank, -left) for BPE: the best merge first and, among equals, the
// leftmost one, which is the order of llama.cpp's std::priority_queue
// comparators. Entries that compare fully equal are interchangeable: at most
// one entry per left symbol can still be valid (see the staleness checks).
type bigramQueue struct {
	items []bigram
	bpe   bool
}

func (q *bigramQueue) less(a, b *bigram) bool { // a is "better" than b
	if q.bpe {
		if a.rank != b.rank {
			return a.rank < b.rank
		}
	} else if a.key != b.key {
		return a.key > b.key
	}
	return a.left < b.left
}

func (q *bigramQueue) push(b bigram) {
	q.items = append(q.items, b)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(&q.items[i], &q.items[p]) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *bigramQueue) pop() bigram {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items = q.items[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= last {
			break
		}
		best := l
		if r := l + 1; r < last && q.less(&q.items[r], &q.items[l]) {
			best = r
		}
		if !q.less(&q.items[best], &q.items[i]) {
			break
		}
		q.items[i], q.items[best] = q.items[best], q.items[i]
		i = best
	}
	return top
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by a
// lead byte, judged by its high nibble only. Continuation and invalid bytes
// count as 1, so malformed text still splits into symbols.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// splitSymbols splits text into one symbol per (possibly malformed) UTF-8
// character, linked in order.
func splitSymbols(text string, syms []symbol) []symbol {
	syms = syms[:0]
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := int32(len(syms))
		next := i + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{prev: i - 1, next: next, start: int32(off), n: int32(n)})
		off += n
	}
	return syms
}

// encodeSPM is llm_tokenizer_spm_session::tokenize on text whose spaces are
// already escaped: merge the best-scoring adjacent pair that forms a token
// until none does, then emit each symbol as its token or as byte tokens.
func (t *Tokenizer) encodeSPM(text string, out []int32) []int32 {
	syms := splitSymbols(text, make([]symbol, 0, len(text)))
	q := bigramQueue{items: make([]bigram, 0, len(syms))}

	tryAdd := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := &syms[left], &syms[right]
		if l.n+r.n > t.maxTokenLen {
			return
		}
		id, ok := t.ids[text[l.start:l.start+l.n+r.n]]
		if !ok {
			return
		}
		q.push(bigram{left: left, right: right, size: l.n + r.n, key: t.scores[id]})
	}

	for i := 1; i < len(syms); i++ {
		tryAdd(int32(i-1), int32(i))
	}
	for len(q.items) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		// Stale: one side was merged away or grew since the entry was made.
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

	if len(syms) == 0 {
		return out
	}
	for i := int32(0); i != -1; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		// Not a token: llama.cpp's resegment would look the text up in its
		// rev_merge map, but every merged symbol is a token, so only single
		// characters get here and they always go to byte tokens.
		for j := 0; j < len(piece); j++ {
			out = t.appendByte(out, piece[j])
		}
	}
	return out
}

// appendByte emits the byte-fallback token for b. llama.cpp throws when a
// vocabulary has neither <0xNN> nor the one-byte token; we emit UNK instead
// (or nothing if there is no UNK) so that Encode cannot fail.
func (t *Tokenizer) appendByte(out []int32, b byte) []int32 {
	if id := t.byteToken[b]; id >= 0 {
		return append(out, id)
	}
	if t.unk >= 0 {
		return append(out, t.unk)
	}
	return out
}
