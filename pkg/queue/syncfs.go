package queue

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/kingdom-dev/kingdom/pkg/atomicfile"
)

// Group sync with one syncfs(2) (issue #15). Making N staged files durable
// with N fdatasyncs costs, on ext4 without a journal, per file: the data
// block's write, a synchronous write of the inode-table block and a flush of
// the disk's cache (~45 µs of the caller's CPU and ~65 µs of wall time each,
// eight in parallel). syncfs writes every dirty page and inode of the
// filesystem in one pass (inodes sharing a table block in one write) and
// flushes the cache once (then once more: syncClose): a batch of 768
// recycled files was durable in ~9 ms and 1 ms of CPU instead of ~50 ms and
// 27 ms.
//
// It also writes what other processes left dirty on the same filesystem.
// That work is bounded: syncfs is used only when the machine's dirty and
// under-writeback page cache (/proc/meminfo, every filesystem: an upper
// bound of this one's) is at most syncfsBytesPerFile per file it replaces an
// fdatasync for, and at most syncfsMaxDirty in all. Measured here (2 cores,
// virtio disk, ~1.1 GB/s): 768 recycled files took 50–66 ms and 26–37 ms
// of CPU with fdatasyncs; one syncfs took 49 ms with 50 MB of another
// process's data dirty and 87 ms with 200 MB, with 2–3 ms of CPU (and ~20 ms
// of the kernel flusher's for the 200 MB, which it writes within 30 s
// anyway). So 128 KiB per file keeps the call's wall time near the
// fdatasyncs' it replaces while its CPU is a tenth. Otherwise (a small
// batch, a heavy writer elsewhere, no /proc) each file is fdatasync'd as
// before.
//
// Errors: syncfs reports a writeback error of the filesystem since the
// descriptor it is called on was opened (errseq). It is called on the
// batch's first-opened file, opened before any of the batch's data was
// written, so a lost page of any file of the batch fails the whole batch
// (as it may be another process's page, the batch is retried, never
// reported done on a guess).

// syncfsMinFiles is the smallest batch synced with syncfs.
var syncfsMinFiles = 16

// syncfsBytesPerFile bounds the dirty page cache per file of the batch.
var syncfsBytesPerFile int64 = 128 << 10

// syncfsMaxDirty bounds the dirty page cache syncfs may have to write.
var syncfsMaxDirty int64 = 128 << 20

// syncfsCalls and syncfsFiles count the group syncs done with syncfs and
// the files they covered (tests, benchmarks).
var syncfsCalls, syncfsFiles atomic.Int64

// openSeq orders the files a Spares opens for writing, so a batch knows
// its first-opened one.
var openSeq atomic.Uint64

// syncClose makes every file durable and closes it: one syncfs when the
// batch is large and the machine's dirty page cache small, else
// atomicfile.SyncClose (fdatasync each, in parallel). first is the index of
// the file opened before all the others' data was written. An error names
// every path when syncfs failed (none of them is known durable).
func syncClose(files []*os.File, paths []string, first int) error {
	if len(files) >= syncfsMinFiles && syncfsCheap(len(files)) {
		var errs []error
		for i, f := range files {
			if i == first {
				continue
			}
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("write %s: %w", paths[i], err))
			}
		}
		err := atomicfile.Syncfs(files[first])
		if err == nil {
			// syncfs flushes the disk's cache before its last pass over the
			// block device's buffers (ext4 without a journal writes the
			// inode tables there: sizes, extents); one fdatasync of a file
			// now clean is that flush after them, so every file is durable,
			// metadata included, before any rename, as with an fdatasync
			// each.
			err = atomicfile.Fdatasync(files[first])
		}
		if cerr := files[first].Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s and %d more: %w", paths[first], len(files)-1, err))
		}
		if len(errs) == 0 {
			syncfsCalls.Add(1)
			syncfsFiles.Add(int64(len(files)))
		}
		return errors.Join(errs...)
	}
	return atomicfile.SyncClose(files, paths, true)
}

// syncfsCheap reports whether a syncfs for n files is bounded (see above).
func syncfsCheap(n int) bool {
	dirty, ok := dirtyBytes()
	return ok && dirty <= syncfsMaxDirty && dirty <= int64(n)*syncfsBytesPerFile
}

// dirtyBytes is the page cache waiting to be written: Dirty + Writeback of
// /proc/meminfo.
func dirtyBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	var total int64
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() && found < 2 {
		line := sc.Bytes()
		var rest []byte
		switch {
		case bytes.HasPrefix(line, []byte("Dirty:")):
			rest = line[len("Dirty:"):]
		case bytes.HasPrefix(line, []byte("Writeback:")):
			rest = line[len("Writeback:"):]
		default:
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		total += kb << 10
		found++
	}
	return total, found == 2
}

// SyncfsStats returns how many group syncs used syncfs and how many files
// they made durable, since the process started (benchmarks report the
// share of files synced that way).
func SyncfsStats() (calls, files int64) { return syncfsCalls.Load(), syncfsFiles.Load() }
