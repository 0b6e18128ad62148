//go:build !linux

package mmap

func adviseHuge([]byte) {}
