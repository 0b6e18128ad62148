package tokenizer

import "strings"

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
		key  []byte
		q    = bigramQueue{bpe: true}
	)
	for _, raw := range t.pre.split(text) {
		if t.ignoreMerges {
			// Llama-3: a pre-token that is a vocabulary entry is that
			// token, whatever the merges would make of it.
			if id, ok := t.ids[byteEncode(raw)]; ok {
				out = append(out, id)
				continue
			}
		}
		if t.mergeByID && len(raw) <= maxFastWord {
			var ok bool
			if out, ok = t.mergeSmall(raw, out); ok {
				continue
			}
		}
		out, syms, key = t.mergeWord(byteEncode(raw), out, syms, key, &q)
	}
	return out
}

// maxFastWord is the longest word (in bytes) mergeSmall takes. Its quadratic
// search for the best pair beats a heap on short words, which are nearly all
// words; longer ones (runs of symbols, long identifiers) go to mergeWord.
const maxFastWord = 48

// mergeSmall merges one short word by token ids: every byte starts as the
// token of its stand-in, and the pair with the lowest merge rank (the leftmost
// of equals) merges until none has a rank. That is the order llama.cpp's queue
// pops them in: a queue entry is live exactly while its two symbols are still
// neighbours and unchanged. It reports false, having appended nothing, when a
// byte has no token; mergeWord then does what llama.cpp does.
func (t *Tokenizer) mergeSmall(raw string, out []int32) ([]int32, bool) {
	// pairs[i] is the merge of parts[i] and parts[i+1] (rank none when
	// they do not merge), kept beside the parts so that each pair is looked
	// up once.
	var (
		parts [maxFastWord]int32
		pairs [maxFastWord]pairMerge
	)
	n := len(raw)
	for i := 0; i < n; i++ {
		id := t.byteID[raw[i]]
		if id < 0 {
			return out, false
		}
		parts[i] = id
	}
	for i := 0; i+1 < n; i++ {
		// Two bytes: the small table, not the map.
		pairs[i] = t.bytePairs[raw[i]][raw[i+1]]
	}
	for n > 1 {
		best := 0
		for i := 1; i+1 < n; i++ {
			if pairs[i].rank < pairs[best].rank {
				best = i
			}
		}
		if pairs[best].rank == noMerge {
			break
		}
		parts[best] = pairs[best].result
		copy(parts[best+1:n-1], parts[best+2:n])
		if best+2 < n-1 {
			// The pairs right of the merge move one place left.
			copy(pairs[best+1:n-2], pairs[best+2:n-1])
		}
		n--
		if best > 0 {
			pairs[best-1] = t.pairMerge(parts[best-1], parts[best])
		}
		if best+1 < n {
			pairs[best] = t.pairMerge(parts[best], parts[best+1])
		}
	}
	return append(out, parts[:n]...), true
}

// noMerge is the rank of two tokens that do not merge: worse than any.
const noMerge = int32(1<<31 - 1)

// pairMerge looks up the merge of tokens l and r.
func (t *Tokenizer) pairMerge(l, r int32) pairMerge {
	if m, ok := t.pairs[pairKey(l, r)]; ok {
		return m
	}
	return pairMerge{rank: noMerge}
}

// pairKey packs the ids of a merge's two sides.
func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// pairMerge is a merge of two tokens: its rank and the token it makes.
type pairMerge struct{ rank, result int32 }

// buildMerges reads the merges list into ranks (by text, what llama.cpp
// looks up) and pairs (by token ids, for mergeSmall).
func (t *Tokenizer) buildMerges(merges []string) {
	t.ranks = make(map[string]int32, len(merges))
	t.pairs = make(map[uint64]pairMerge, len(merges))
	t.mergeByID = true
	for i, m := range merges {
		// llama.cpp splits at the first space after the first byte and
		// keeps the first rank of a duplicated pair. Entries without such
		// a space become an empty pair that no lookup can hit.
		sp := strings.IndexByte(m[min(1, len(m)):], ' ')
		if sp < 0 {
			continue
		}
		if _, dup := t.ranks[m]; dup {
			continue
		}
		t.ranks[m] = int32(i)
		t.maxMergeLen = max(t.maxMergeLen, int32(len(m)))

		sp += min(1, len(m))
		l, lok := t.ids[m[:sp]]
		r, rok := t.ids[m[sp+1:]]
		if !lok || !rok {
			// Only a symbol that is no token could take part in this
			// merge, and mergeSmall never holds one.
			continue
		}
		res, ok := t.ids[m[:sp]+m[sp+1:]]
		if !ok {
			// Merging two tokens can make text that is no token, which
			// only the text-based merge handles.
			t.mergeByID = false
			continue
		}
		t.pairs[pairKey(l, r)] = pairMerge{rank: int32(i), result: res}
	}
	for b := range t.byteID {
		t.byteID[b] = -1
		if id, ok := t.ids[byteToUnicode[b]]; ok {
			t.byteID[b] = id
		}
	}
	// Most lookups are of two single bytes (every word starts so): a
	// 256×256 table (512 KiB) answers them from cache.
	t.bytePairs = new([256][256]pairMerge)
	for l := range 256 {
		for r := range 256 {
			t.bytePairs[l][r] = pairMerge{rank: noMerge}
			if t.byteID[l] >= 0 && t.byteID[r] >= 0 {
				t.bytePairs[l][r] = t.pairMerge(t.byteID[l], t.byteID[r])
			}
		}
	}
}

// mergeWord merges one byte-encoded word the way llama.cpp does, by text,
// and appends its tokens. syms, key and q are scratch space, returned for
// reuse.
func (t *Tokenizer) mergeWord(word string, out []int32, syms []symbol, key []byte, q *bigramQueue) ([]int32, []symbol, []byte) {
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
	return out, syms, key
}
