package amx

import (
	"fmt"
	"syscall"
)

// requestTileData is arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
func requestTileData() error {
	const archReqXcompPerm, xfeatureXTileData = 0x1023, 18
	if _, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXTileData, 0); e != 0 {
		return fmt.Errorf("amx: the kernel refused the tile state (arch_prctl: %v)", e)
	}
	return nil
}
