package crashfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mountT mounts a crashfs for one test (skipped when FUSE cannot be used,
// unless SPINE_REQUIRE_FAULTS=1) and unmounts it at the end.
func mountT(t *testing.T, opts ...Option) (f *FS, mnt, backing string) {
	t.Helper()
	dir := t.TempDir()
	mnt, backing = filepath.Join(dir, "mnt"), filepath.Join(dir, "backing")
	f, err := Mount(mnt, backing, opts...)
	if err != nil {
		if errors.Is(err, ErrUnavailable) && os.Getenv("SPINE_REQUIRE_FAULTS") != "1" {
			t.Skipf("FUSE is not usable here (needs root and /dev/fuse; SPINE_REQUIRE_FAULTS=1 makes this a failure): %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		if mounted(mnt) {
			t.Errorf("%s is still mounted", mnt)
		}
	})
	return f, mnt, backing
}

func mounted(mp string) bool {
	data, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) > 1 && fields[1] == mp {
			return true
		}
	}
	return false
}

func mustWrite(t *testing.T, f *os.File, data string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(data), off); err != nil {
		t.Fatal(err)
	}
}

func mustSync(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func wantContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s holds %q (%d bytes), want %q (%d bytes)", path, short(got), len(got), short([]byte(want)), len(want))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(len(want)) {
		t.Fatalf("%s: stat size %d, want %d", path, fi.Size(), len(want))
	}
}

func short(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

func crash(t *testing.T, f *FS) {
	t.Helper()
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
}

func TestFsyncedWriteSurvivesCrashAndTheRestIsLost(t *testing.T) {
	f, mnt, backing := mountT(t)
	p := filepath.Join(mnt, "log")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "hello", 0)
	mustSync(t, fh)
	mustWrite(t, fh, " world", 5)
	// A second handle (another reader) sees the unsynced bytes.
	wantContent(t, p, "hello world")
	// The backing file has only the synced ones.
	wantContent(t, filepath.Join(backing, "log"), "hello")
	fh.Close()

	// Another file, never synced: created (metadata is durable at once)
	// but empty after the crash.
	if err := os.WriteFile(filepath.Join(mnt, "unsynced"), []byte("gone"), 0o644); err != nil {
		t.Fatal(err)
	}
	crash(t, f)
	wantContent(t, p, "hello")
	wantContent(t, filepath.Join(mnt, "unsynced"), "")
	st := f.Stats()
	if st.Crashes != 1 || st.DroppedBytes != int64(len(" world")+len("gone")) || st.DroppedFiles != 2 {
		t.Fatalf("stats after crash: %+v", st)
	}
	if st.SyncedBytes != 5 || st.Syncs != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestTruncateIsHeldUntilFsync(t *testing.T) {
	f, mnt, _ := mountT(t)
	p := filepath.Join(mnt, "f")
	orig := strings.Repeat("a", 10000)
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, orig, 0)
	mustSync(t, fh)
	// Shrink, then grow: the regrown range reads as zeros, not the old bytes.
	if err := fh.Truncate(100); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, orig[:100])
	if err := fh.Truncate(5000); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, orig[:100]+strings.Repeat("\x00", 4900))
	fh.Close()
	crash(t, f)
	wantContent(t, p, orig)

	// truncate(2) by path and O_TRUNC, not synced: undone by a crash.
	if err := os.Truncate(p, 10); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, orig[:10])
	fh, err = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "new", 0)
	fh.Close()
	wantContent(t, p, "new")
	crash(t, f)
	wantContent(t, p, orig)

	// Synced: kept.
	fh, err = os.OpenFile(p, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "short", 0)
	mustSync(t, fh)
	fh.Close()
	crash(t, f)
	wantContent(t, p, "short")
}

func TestFallocate(t *testing.T) {
	f, mnt, _ := mountT(t)
	p := filepath.Join(mnt, "seg")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "head", 0)
	mustSync(t, fh)
	const size = 1 << 20
	if err := unix.Fallocate(int(fh.Fd()), 0, 0, size); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "head"+strings.Repeat("\x00", size-4))
	// KEEP_SIZE changes nothing visible.
	if err := unix.Fallocate(int(fh.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 2*size); err != nil {
		t.Fatal(err)
	}
	// A hole punched into held data.
	mustWrite(t, fh, "abcdef", 100)
	if err := unix.Fallocate(int(fh.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 101, 4); err != nil {
		t.Fatal(err)
	}
	want := []byte("head" + strings.Repeat("\x00", size-4))
	copy(want[100:], "a\x00\x00\x00\x00f")
	wantContent(t, p, string(want))
	fh.Close()
	crash(t, f)
	wantContent(t, p, "head")

	// Allocated and synced: the size is durable.
	fh, err = os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(fh.Fd()), 0, 0, size); err != nil {
		t.Fatal(err)
	}
	mustSync(t, fh)
	fh.Close()
	crash(t, f)
	wantContent(t, p, "head"+strings.Repeat("\x00", size-4))
}

func TestRename(t *testing.T) {
	f, mnt, _ := mountT(t)
	target := filepath.Join(mnt, "state")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, fh)
	fh.Close()

	// The write-fsync-rename idiom: durable.
	tmp := filepath.Join(mnt, "state.tmp")
	fh, err = os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "new", 0)
	mustSync(t, fh)
	fh.Close()
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	wantContent(t, target, "new")
	crash(t, f)
	wantContent(t, target, "new")
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the renamed-away name is back: %v", err)
	}

	// Renamed without the fsync: the rename is kept (metadata is durable
	// at once in this model), the data is not.
	if err := os.WriteFile(tmp, []byte("newer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	wantContent(t, target, "newer")
	crash(t, f)
	wantContent(t, target, "")

	// Held data follows the file through a rename, then an fsync under
	// the new name applies it.
	fh, err = os.Create(filepath.Join(mnt, "a"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "moved", 0)
	if err := os.Rename(filepath.Join(mnt, "a"), filepath.Join(mnt, "b")); err != nil {
		t.Fatal(err)
	}
	mustSync(t, fh)
	fh.Close()
	crash(t, f)
	wantContent(t, filepath.Join(mnt, "b"), "moved")
}

// bolt reads its file through a read-only shared mmap and writes it with
// pwrite: the mapping must see the held bytes, and after a crash only the
// durable ones.
//
// The mapping is read by a helper process (this test binary run again): a
// process must not fault on a mapping of a FUSE file it serves itself. The
// fault blocks its thread outside any system call, so a garbage
// collection's stop-the-world waits for that thread while the FUSE server
// that would answer the fault is stopped: a deadlock (seen under load).
func TestMmapSeesHeldDataAndAfterCrashOnlyDurable(t *testing.T) {
	if mode := os.Getenv("CRASHFS_MMAP_HELPER"); mode != "" {
		if err := mmapHelper(mode, os.Getenv("CRASHFS_MMAP_FILE")); err != nil {
			os.Stderr.WriteString("mmap helper: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	f, mnt, _ := mountT(t)
	p := filepath.Join(mnt, "db")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write(bytes.Repeat([]byte("D"), 3*pageSize)); err != nil {
		t.Fatal(err)
	}
	mustSync(t, fh)
	fh.Close()
	runMmapHelper(t, "held", p)
	wantContent(t, p, strings.Repeat("D", 10)+"held"+strings.Repeat("D", 3*pageSize-14)+strings.Repeat("H", pageSize))
	crash(t, f)
	runMmapHelper(t, "durable", p)
}

func runMmapHelper(t *testing.T, mode, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMmapSeesHeldDataAndAfterCrashOnlyDurable$")
	cmd.Env = append(os.Environ(), "CRASHFS_MMAP_HELPER="+mode, "CRASHFS_MMAP_FILE="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmap helper (%s): %v\n%s", mode, err, out)
	}
}

// mmapHelper: "held" maps the file (3 durable pages of 'D'), writes into
// a page it has read and past the end with pwrite, and checks the mapping
// shows both; "durable" checks that the file and a mapping of it show the
// 3 durable pages only.
func mmapHelper(mode, path string) error {
	durable := bytes.Repeat([]byte("D"), 3*pageSize)
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fh.Close()
	switch mode {
	case "held":
		m, err := unix.Mmap(int(fh.Fd()), 0, 4*pageSize, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		defer unix.Munmap(m)
		if !bytes.Equal(m[:3*pageSize], durable) {
			return errors.New("the mapping does not show the file")
		}
		if _, err := fh.WriteAt([]byte("held"), 10); err != nil {
			return err
		}
		if _, err := fh.WriteAt(bytes.Repeat([]byte("H"), pageSize), 3*pageSize); err != nil {
			return err
		}
		if string(m[10:14]) != "held" || m[4*pageSize-1] != 'H' {
			return fmt.Errorf("the mapping does not see the held writes: %q %q", m[10:14], m[4*pageSize-1])
		}
		return nil
	case "durable":
		fi, err := fh.Stat()
		if err != nil {
			return err
		}
		if fi.Size() != int64(len(durable)) {
			return fmt.Errorf("size after the crash %d, want %d", fi.Size(), len(durable))
		}
		m, err := unix.Mmap(int(fh.Fd()), 0, len(durable), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		defer unix.Munmap(m)
		if i := bytes.IndexFunc(m, func(r rune) bool { return r != 'D' }); i >= 0 {
			return fmt.Errorf("after the crash the mapping shows bytes that were never fsynced (first at %d: %q)", i, m[i:i+4])
		}
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func TestIgnoreSyncLosesEverythingAfterItWasSwitchedOn(t *testing.T) {
	f, mnt, _ := mountT(t)
	p := filepath.Join(mnt, "wal")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "durable;", 0)
	mustSync(t, fh)
	f.SetIgnoreSync(true)
	mustWrite(t, fh, "acknowledged;", 8)
	mustSync(t, fh) // answers success
	wantContent(t, p, "durable;acknowledged;")
	fh.Close()
	crash(t, f)
	wantContent(t, p, "durable;")
	st := f.Stats()
	if st.IgnoredSyncs != 1 || st.DroppedBytes != int64(len("acknowledged;")) {
		t.Fatalf("stats: %+v", st)
	}
	// Switched off again, fsync applies.
	f.SetIgnoreSync(false)
	fh, err = os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "again", 8)
	mustSync(t, fh)
	fh.Close()
	crash(t, f)
	wantContent(t, p, "durable;again")
}

func TestUnlinkForgetsHeldData(t *testing.T) {
	f, mnt, _ := mountT(t)
	p := filepath.Join(mnt, "x")
	if err := os.WriteFile(p, []byte("held"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	// A new file may get the same backing inode: it must start empty.
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantContent(t, p, "")
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	crash(t, f)
	wantContent(t, p, "")
	if fi, err := os.Stat(filepath.Join(mnt, "d")); err != nil || !fi.IsDir() {
		t.Fatalf("mkdir was not durable: %v", err)
	}
}

// A random sequence of writes, truncates, fsyncs and crashes on a few
// files, checked against a model of each file's current and durable
// content.
func TestRandomOpsMatchModel(t *testing.T) {
	f, mnt, _ := mountT(t)
	rng := rand.New(rand.NewSource(1))
	const files = 3
	cur := make([][]byte, files)
	dur := make([][]byte, files)
	handles := make([]*os.File, files)
	open := func(i int) {
		fh, err := os.OpenFile(filepath.Join(mnt, "r"+string(rune('0'+i))), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = fh
	}
	for i := range handles {
		open(i)
	}
	check := func(step int) {
		for i := range handles {
			got, err := os.ReadFile(handles[i].Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, cur[i]) {
				t.Fatalf("step %d: file %d differs from the model (len %d, want %d)", step, i, len(got), len(cur[i]))
			}
		}
	}
	for step := 0; step < 400; step++ {
		i := rng.Intn(files)
		switch op := rng.Intn(20); {
		case op < 11:
			off := rng.Intn(3 * pageSize)
			data := make([]byte, 1+rng.Intn(2*pageSize))
			rng.Read(data)
			if _, err := handles[i].WriteAt(data, int64(off)); err != nil {
				t.Fatal(err)
			}
			if need := off + len(data); need > len(cur[i]) {
				cur[i] = append(cur[i], make([]byte, need-len(cur[i]))...)
			}
			copy(cur[i][off:], data)
		case op < 14:
			size := rng.Intn(4 * pageSize)
			if err := handles[i].Truncate(int64(size)); err != nil {
				t.Fatal(err)
			}
			if size < len(cur[i]) {
				cur[i] = cur[i][:size]
			} else {
				cur[i] = append(cur[i], make([]byte, size-len(cur[i]))...)
			}
		case op < 18:
			mustSync(t, handles[i])
			dur[i] = append([]byte(nil), cur[i]...)
		case op < 19:
			check(step)
		default:
			for _, h := range handles {
				h.Close()
			}
			crash(t, f)
			for j := range handles {
				cur[j] = append([]byte(nil), dur[j]...)
				open(j)
			}
			check(step)
		}
	}
	check(400)
	for _, h := range handles {
		h.Close()
	}
}

// An fsync still in progress when its process is SIGKILLed (the kernel
// interrupts the request) applies nothing: the power went before the flush
// ended. The fsyncing process is this test binary run again as a helper.
func TestKilledFsyncIsAbandoned(t *testing.T) {
	if p := os.Getenv("CRASHFS_FSYNC_HELPER"); p != "" {
		fh, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, fh, "+lost", 7)
		os.Stdout.WriteString("fsyncing\n")
		fh.Sync()
		os.Stdout.WriteString("fsynced\n")
		os.Exit(0)
	}
	f, mnt, _ := mountT(t, WithSyncDelay(time.Second))
	p := filepath.Join(mnt, "f")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, fh, "durable", 0)
	mustSync(t, fh) // takes the delay
	fh.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledFsyncIsAbandoned$")
	cmd.Env = append(os.Environ(), "CRASHFS_FSYNC_HELPER="+p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "fsyncing\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %v", line, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.waitingSyncs.Load() == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the helper's fsync never reached the file system")
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	wantContent(t, p, "durable+lost")
	if st := f.Stats(); st.Syncs != 1 {
		t.Fatalf("the killed fsync was applied: %+v", st)
	}
	crash(t, f)
	wantContent(t, p, "durable")
}
