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
//
// llama.cpp merges each word by text: it looks the pair "left right" up in
// the merges list until no pair of neighbours has a rank. When every merge of
// two tokens makes a token (true of real vocabularies) and every byte of the
// word has a token, every symbol along the way is a token, so the same merges
// can be done on token ids, which is much faster; mergeSmall and mergeLong
// do that. Other words go to mergeText, llama.cpp's way.
func (t *Tokenizer) encodeBPE(text string, out []int32) []int32 {
	var ok bool
	for _, raw := range t.pre.split(text) {
		if t.ignoreMerges {
			// Llama-3: a pre-token that is a vocabulary entry is that
			// token, whatever the merges would make of it.
			if id, found := t.ids[byteEncode(raw)]; found {
				out = append(out, id)
				continue
			}
		}
		if t.mergeByID {
			if len(raw) <= maxFastWord {
				out, ok = t.mergeSmall(raw, out)
			} else {
				out, ok = t.mergeLong(raw, out)
			}
			if ok {
				continue
			}
		}
		out = t.mergeText(byteEncode(raw), out)
	}
	return out
}

// maxFastWord is the longest word (in bytes) mergeSmall takes. Its quadratic
// search for the best pair beats a heap on short words, which are nearly all
// words; longer ones (runs of symbols, long identifiers) go to mergeLong.
const maxFastWord = 48

// mergeSmall merges one short word by token ids: every byte starts as the
// token of its stand-in, and the pair with the lowest merge rank (the leftmost
// of equals) merges until none has a rank. That is the order llama.cpp's queue
// pops them in: a queue entry is live exactly while its two symbols are still
// neighbours and unchanged. It reports false, having appended nothing, when a
// byte has no token.
func (t *Tokenizer) mergeSmall(raw string, out []int32) ([]int32, bool) {
	// pairs[i] is the merge of parts[i] and parts[i+1] (rank noMerge when
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

// mergeLong merges a long word by token ids with llama.cpp's queue: a heap
// of candidate merges, lowest rank then leftmost first, skipping entries
// whose symbols changed since. Like mergeSmall it reports false when a byte
// has no token.
func (t *Tokenizer) mergeLong(raw string, out []int32) ([]int32, bool) {
	n := len(raw)
	ids := make([]int32, n)
	for i := 0; i < n; i++ {
		if ids[i] = t.byteID[raw[i]]; ids[i] < 0 {
			return out, false
		}
	}
	syms := splitSymbols(byteRuns(n), make([]symbol, 0, n))
	q := bigramQueue{bpe: true, items: make([]bigram, 0, n)}
	tryAdd := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		m := t.pairMerge(ids[left], ids[right])
		if m.rank == noMerge {
			return
		}
		q.push(bigram{left: left, right: right, size: syms[left].n + syms[right].n, rank: m.rank, result: m.result})
	}
	for i := 1; i < n; i++ {
		tryAdd(int32(i-1), int32(i))
	}
	for len(q.items) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue // stale: a side merged away or grew
		}
		l.n += r.n
		r.n = 0
		ids[b.left] = b.result
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, ids[i])
	}
	return out, true
}

// byteRuns returns a string of n ASCII bytes, so that splitSymbols makes one
// symbol per byte of a word (byte-encoded text has one code point per byte).
func byteRuns(n int) string { return strings.Repeat("a", n) }

// noMerge is the rank of two tokens that do not merge: worse than any.
const noMerge = int32(1<<31 - 1)

// pairKey packs the ids of a merge's two sides.
func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// pairMerge is a merge of two tokens: its rank and the token it makes.
type pairMerge struct{ rank, result int32 }

// pairMerge looks up the merge of tokens l and r.
func (t *Tokenizer) pairMerge(l, r int32) pairMerge {
	if m, ok := t.pairs[pairKey(l, r)]; ok {
		return m
	}
	return pairMerge{rank: noMerge}
}

// buildMerges reads the merges list into pairs, the merges of two tokens by
// their ids. The text form llama.cpp looks up is built on first use (see
// mergeText): vocabularies whose merges all make tokens never need it.
func (t *Tokenizer) buildMerges(merges []string) {
	t.pairs = make(map[uint64]pairMerge, len(merges))
	t.mergeByID = true
	var buf []byte
	for i, m := range merges {
		// llama.cpp splits at the first space after the first byte and
		// keeps the first rank of a duplicated pair.
		sp := strings.IndexByte(m[min(1, len(m)):], ' ')
		if sp < 0 {
			continue
		}
		sp += min(1, len(m))
		l, lok := t.ids[m[:sp]]
		r, rok := t.ids[m[sp+1:]]
		if !lok || !rok {
			// Only a symbol that is no token could take part in this
			// merge, and the id-based merges never hold one.
			continue
		}
		key := pairKey(l, r)
		if _, dup := t.pairs[key]; dup {
			continue
		}
		buf = append(append(buf[:0], m[:sp]...), m[sp+1:]...)
		res, ok := t.ids[string(buf)]
		if !ok {
			// Merging two tokens can make text that is no token, which
			// only the text-based merge handles.
			t.mergeByID = false
			continue
		}
		t.pairs[key] = pairMerge{rank: int32(i), result: res}
	}
	t.textMerges = &textMerges{list: merges}

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
