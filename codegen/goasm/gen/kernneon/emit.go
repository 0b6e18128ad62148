package main

import (
	"fmt"
	"go/format"
	"strings"
)

// A small emitter of Go arm64 assembly: text lines with fixed registers (no
// allocator), functions with their Go declarations and argument frames, and
// read-only data. Instructions Go's assembler knows are written in its
// syntax; the others as WORD with an encoding from enc.go and the ARM
// mnemonic in a comment.

// v is a vector register V0..V31.
type v int

func (r v) String() string { return fmt.Sprintf("V%d", int(r)) }

// arr is r with an arrangement, e.g. V3.S4.
func (r v) arr(a string) string { return fmt.Sprintf("V%d.%s", int(r), a) }

// list is the register list [Vr.a, Vr+1.a, ...] of n consecutive registers.
func (r v) list(n int, a string) string {
	s := make([]string, n)
	for i := range s {
		s[i] = (r + v(i)).arr(a)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// A param is one argument or result of a Go function.
type param struct{ name, typ string }

// size returns the byte size (also the alignment, at most 8) of the types
// the kernels take.
func (p param) size() int {
	switch p.typ {
	case "int", "uintptr":
		return 8
	case "float32":
		return 4
	case "[]byte", "[]float32", "[]uint16":
		return 24
	}
	panic("kernneon: unsupported parameter type " + p.typ)
}

// frame lays out ABI0 arguments and results on the stack: each at a
// multiple of its alignment, results from the next multiple of 8. It
// returns the offsets of the names go vet's asmdecl expects (x, x_base,
// x_len, x_cap, ret) and the total size (the end of the last result, not
// rounded: asmdecl wants $…-60 for a float32 after 56 bytes of arguments).
func frame(args, results []param) (map[string]int, int) {
	off := map[string]int{}
	n := 0
	place := func(p param, name string) {
		a := min(p.size(), 8)
		n = (n + a - 1) / a * a
		if strings.HasPrefix(p.typ, "[]") {
			off[name+"_base"], off[name+"_len"], off[name+"_cap"] = n, n+8, n+16
		} else {
			off[name] = n
		}
		n += p.size()
	}
	for _, p := range args {
		place(p, p.name)
	}
	n = (n + 7) / 8 * 8
	for i, p := range results {
		name := "ret"
		if len(results) > 1 {
			name = fmt.Sprintf("ret%d", i)
		}
		place(p, name)
	}
	return off, n
}

// A file collects the functions and data of neon_arm64.s and the Go
// declarations of neon_arm64_stubs.go.
type file struct {
	gen         string // the generator's import path, for the headers
	data, text  strings.Builder
	stubs       strings.Builder
	constraints string
}

// u64Data defines read-only data sym<> of the given 8-byte words and
// returns its name.
func (f *file) u64Data(sym string, words ...uint64) string {
	for i, w := range words {
		fmt.Fprintf(&f.data, "DATA %s<>+%d(SB)/8, $0x%016x\n", sym, 8*i, w)
	}
	fmt.Fprintf(&f.data, "GLOBL %s<>(SB), RODATA|NOPTR, $%d\n\n", sym, 8*len(words))
	return sym + "<>(SB)"
}

// A fn is one function being emitted.
type fn struct {
	f    *file
	name string
	off  map[string]int
}

// function starts TEXT ·name with the given doc lines (the stub's comment),
// arguments and results. The kernels are leaves without locals: NOSPLIT,
// NOFRAME.
func (f *file) function(name string, doc []string, args, results []param) *fn {
	off, size := frame(args, results)
	var sig []string
	for _, p := range args {
		sig = append(sig, p.name+" "+p.typ)
	}
	var res []string
	for _, p := range results {
		res = append(res, p.typ)
	}
	decl := "func " + name + "(" + strings.Join(sig, ", ") + ")"
	if len(res) == 1 {
		decl += " " + res[0]
	} else if len(res) > 1 {
		decl += " (" + strings.Join(res, ", ") + ")"
	}
	f.stubs.WriteString("\n")
	for _, d := range doc {
		fmt.Fprintf(&f.stubs, "// %s\n", d)
	}
	fmt.Fprintf(&f.stubs, "//\n//go:noescape\n%s\n", decl)
	fmt.Fprintf(&f.text, "// %s\nTEXT ·%s(SB), NOSPLIT|NOFRAME, $0-%d\n", decl, name, size)
	return &fn{f: f, name: name, off: off}
}

// op emits one instruction in Go's syntax.
func (g *fn) op(format string, args ...any) {
	fmt.Fprintf(&g.f.text, "\t"+format+"\n", args...)
}

// word emits an instruction Go's assembler lacks, with its ARM mnemonic.
func (g *fn) word(enc uint32, mnemonic string, args ...any) {
	fmt.Fprintf(&g.f.text, "\tWORD $0x%08x // %s\n", enc, fmt.Sprintf(mnemonic, args...))
}

// arg is the FP operand of a named argument (name, name_base, ...).
func (g *fn) arg(name string) string {
	o, ok := g.off[name]
	if !ok {
		panic("kernneon: " + g.name + " has no argument " + name)
	}
	return fmt.Sprintf("%s+%d(FP)", name, o)
}

// label defines name_s; lbl returns its name.
func (g *fn) label(s string) { fmt.Fprintf(&g.f.text, "\n%s:\n", g.lbl(s)) }

func (g *fn) lbl(s string) string { return g.name + "_" + s }

// end closes the function.
func (g *fn) end() {
	g.op("RET")
	g.f.text.WriteString("\n")
}

// Instructions by name, ARM operand order (destination first) for the
// WORD-encoded ones.

func (g *fn) sdot(vd, vn, vm v, lane int) {
	g.word(sdotElem(int(vd), int(vn), int(vm), lane), "sdot v%d.4s, v%d.16b, v%d.4b[%d]", vd, vn, vm, lane)
}

func (g *fn) fmulElem(vd, vn, vm v, lane int) {
	g.word(fmulElem(int(vd), int(vn), int(vm), lane), "fmul v%d.4s, v%d.4s, v%d.s[%d]", vd, vn, vm, lane)
}

func (g *fn) scvtf(vd, vn v) {
	g.word(scvtf4S(int(vd), int(vn)), "scvtf v%d.4s, v%d.4s", vd, vn)
}

func (g *fn) fcvtl(vd, vn v) { g.word(fcvtl(int(vd), int(vn)), "fcvtl v%d.4s, v%d.4h", vd, vn) }

func (g *fn) fcvtl2(vd, vn v) { g.word(fcvtl2(int(vd), int(vn)), "fcvtl2 v%d.4s, v%d.8h", vd, vn) }

func (g *fn) mla(vd, vn, vm v) {
	g.word(mla4S(int(vd), int(vn), int(vm)), "mla v%d.4s, v%d.4s, v%d.4s", vd, vn, vm)
}

func (g *fn) mlaElem(vd, vn, vm v, lane int) {
	g.word(mlaElem4S(int(vd), int(vn), int(vm), lane), "mla v%d.4s, v%d.4s, v%d.s[%d]", vd, vn, vm, lane)
}

func (g *fn) saddlp(vd, vn v) { g.word(saddlp4S(int(vd), int(vn)), "saddlp v%d.4s, v%d.8h", vd, vn) }

func (g *fn) sdotVec(vd, vn, vm v) {
	g.word(sdot4S(int(vd), int(vn), int(vm)), "sdot v%d.4s, v%d.16b, v%d.16b", vd, vn, vm)
}

// xtl sign- (signed) or zero-extends the low (hi: high) half of vn's
// bytes to halves, or (word) of its halves to words: SXTL/SXTL2 as WORDs,
// UXTL/UXTL2 in Go's syntax.
func (g *fn) xtl(signed bool, vd, vn v, word, hi bool) {
	from, to := "8b", "8h"
	if hi {
		from = "16b"
	}
	if word {
		from, to = "4h", "4s"
		if hi {
			from = "8h"
		}
	}
	if !signed {
		m := map[bool]string{false: "VUXTL", true: "VUXTL2"}[hi]
		goArr := func(a string) string { // "16b" → "B16"
			return strings.ToUpper(a[len(a)-1:]) + a[:len(a)-1]
		}
		g.op("%s %s, %s", m, vn.arr(goArr(from)), vd.arr(goArr(to)))
		return
	}
	m := map[bool]string{false: "sxtl", true: "sxtl2"}[hi]
	g.word(sxtl(int(vd), int(vn), word, hi), m+" v%d.%s, v%d.%s", vd, to, vn, from)
}

// widen extends 16 bytes of src to four registers of int32 from dst
// (signed or not), through tmp and tmp+1.
func (g *fn) widen(src, dst, tmp v, signed bool) {
	g.xtl(signed, tmp, src, false, false)
	g.xtl(signed, tmp+1, src, false, true)
	g.xtl(signed, dst, tmp, true, false)
	g.xtl(signed, dst+1, tmp, true, true)
	g.xtl(signed, dst+2, tmp+1, true, false)
	g.xtl(signed, dst+3, tmp+1, true, true)
}

// asm returns neon_arm64.s.
func (f *file) asm() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "// Code generated by %s. DO NOT EDIT.\n\n//go:build %s\n\n#include \"textflag.h\"\n\n", f.gen, f.constraints)
	b.WriteString(f.data.String())
	b.WriteString(strings.TrimRight(f.text.String(), "\n") + "\n")
	return []byte(b.String())
}

// goStubs returns neon_arm64_stubs.go, gofmt'ed.
func (f *file) goStubs() ([]byte, error) {
	src := fmt.Sprintf("// Code generated by %s. DO NOT EDIT.\n\n//go:build %s\n\npackage kern\n%s", f.gen, f.constraints, f.stubs.String())
	return format.Source([]byte(src))
}

func (g *fn) sshr(vd, vn v, shift int) {
	g.word(sshr4S(int(vd), int(vn), shift), "sshr v%d.4s, v%d.4s, #%d", vd, vn, shift)
}

func (g *fn) neg(vd, vn v) { g.word(neg4S(int(vd), int(vn)), "neg v%d.4s, v%d.4s", vd, vn) }

// bit is BIT: the bits of src where mask has ones into dst's bytes, the
// others kept (Go's VBIT mask, src, dst).
func (g *fn) bit(dst, src, mask v) {
	g.op("VBIT %s, %s, %s", mask.arr("B16"), src.arr("B16"), dst.arr("B16"))
}
