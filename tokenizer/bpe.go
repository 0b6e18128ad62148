package tokenizer

// byteToUnicode is GPT-2's bytes_to_unicode table: every byte maps to a
// printable code point so that BPE tokens are valid text. Printable Latin-1
// bytes map to themselves; the other 68 bytes map to U+0100 and up, in byte
// order, so all of them are below 256+68. unicodeToByte is the reverse (-1
// for code points that stand for no byte).
var (
	byteToUnicode [256]string
	unicodeToByte [256 + 68]int16
)

func init() {
	for i := range unicodeToByte {
		unicodeToByte[i] = -1
	}
	next := rune(256)
	for b := 0; b < 256; b++ {
		r := rune(b)
		printable := (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if !printable {
			r = next
			next++
		}
		byteToUnicode[b] = string(r)
		unicodeToByte[r] = int16(b)
	}
}

// encodeBPE is llm_tokenizer_bpe_session::tokenize for one raw fragment.
func (t *Tokenizer) encodeBPE(text string, out []int32) []int32 {
	var (
		syms []symbol
		q    = bigramQueue{bpe: true}
		key  []byte
	)
	for _, word := range t.pre.split(text) {
		if t.ignoreMerges {
			// Llama-3: a pre-token that is a vocabulary entry is that
			// token, whatever the merges would make of it.
			if id, ok := t.ids[word]; ok {
				out = append(out, id)
				continue
			}
		}
		syms = splitSymbols(word, syms)
		q.items = q.items[:0]

		tryAdd := func(left, right int32) {
			if left < 0 || right < 0 {
				return
			}
			l, r := &syms[left], &syms[right]
			if l.n+r.n+1 > t.maxMergeLen {
				return
			}
			// The merge key is "left right", the form of the merges list.
			key = append(key[:0], word[l.start:l.start+l.n]...)
			key = append(key, ' ')
			key = append(key, word[r.start:r.start+r.n]...)
			rank, ok := t.ranks[string(key)]
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
	}
	return out
}
