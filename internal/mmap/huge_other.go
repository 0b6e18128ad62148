//go:build !linux

package mmap

func adviseHuge([]byte) {}

func populate([]byte) error { return errNoPopulate }

func dontneed([]byte) error { return nil }
