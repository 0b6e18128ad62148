// Package mmap maps files read-only, so model weights and plans are used in
// place: a 10 GB model costs page cache, not heap, and loads as fast as it is
// touched. Systems without mmap here read the file instead.
package mmap
