package main

import "testing"

// TestFaddEncoding: LLVM's words (llvm-mc -triple=aarch64 -show-encoding).
func TestFaddEncoding(t *testing.T) {
	for _, c := range []struct {
		asm       string
		got, want uint32
	}{
		{"fadd v0.4s, v1.4s, v2.4s", fadd4S(0, 1, 2), 0x4e22d420},
		{"fadd v31.4s, v17.4s, v5.4s", fadd4S(31, 17, 5), 0x4e25d63f},
		{"fadd v7.4s, v7.4s, v30.4s", fadd4S(7, 7, 30), 0x4e3ed4e7},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %#08x, want %#08x", c.asm, c.got, c.want)
		}
	}
}
