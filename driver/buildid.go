package driver

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
)

// executableID identifies the running build of kiln for caches whose
// entries depend on its code (measured partitioning's choices: another
// build has other kernels and schedules, so its measurements do not
// carry over). It is the Go build ID the linker writes near the start of
// the executable (in the ELF note .note.go.buildid when the C linker
// linked it, as with cgo), or, when that cannot be read, the
// executable's path, size and modification time.
var executableID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return "unknown executable"
	}
	f, err := os.Open(exe)
	if err != nil {
		return "unreadable executable " + exe
	}
	defer f.Close()
	if ef, err := elf.NewFile(f); err == nil {
		if sec := ef.Section(".note.go.buildid"); sec != nil {
			if data, err := sec.Data(); err == nil {
				if id, ok := noteBuildID(data); ok {
					return "go build id " + id
				}
			}
		}
	}
	head := make([]byte, 64<<10)
	n, _ := f.ReadAt(head, 0)
	if id, ok := goBuildID(head[:n]); ok {
		return "go build id " + id
	}
	st, err := f.Stat()
	if err != nil {
		return "executable " + exe
	}
	return fmt.Sprintf("executable %s size %d modified %d", exe, st.Size(), st.ModTime().UnixNano())
})

// goBuildID finds the Go build ID in the first bytes of an executable
// (`\xff Go build ID: "ID"\n \xff`).
func goBuildID(head []byte) (string, bool) {
	const prefix = "\xff Go build ID: \""
	i := bytes.Index(head, []byte(prefix))
	if i < 0 {
		return "", false
	}
	rest := head[i+len(prefix):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 || j > 400 {
		return "", false
	}
	return string(rest[:j]), true
}

// noteBuildID reads the Go build ID from the contents of an ELF note
// section .note.go.buildid: namesz, descsz and type (4 bytes each,
// little-endian), the name "Go\x00\x00", then the ID as the descriptor.
func noteBuildID(note []byte) (string, bool) {
	if len(note) < 16 {
		return "", false
	}
	namesz, descsz := binary.LittleEndian.Uint32(note), binary.LittleEndian.Uint32(note[4:])
	if namesz != 4 || descsz == 0 || descsz > 400 || int(16+descsz) > len(note) || string(note[12:16]) != "Go\x00\x00" {
		return "", false
	}
	return string(note[16 : 16+descsz]), true
}
