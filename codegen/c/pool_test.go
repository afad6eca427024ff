package c

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/targets"
)

// poolDriver exercises kiln_parallel_for on the pool: every iteration of
// every loop runs exactly once, for ranges of 1 to 100 iterations at 1 to
// 5 threads; a loop inside a running loop runs serially; calling threads
// have teams of their own (three callers at once) that end with them; a
// worker slowed down gives its chunks to the caller; and the thread count
// follows kiln_set_num_threads_here, then kiln_set_num_threads.
const poolDriver = `
#include <stdio.h>
#include <dirent.h>

static int failures;
#define CHECK(c, ...) do { if (!(c)) { ++failures; fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

typedef struct {
  int32_t* hits;
  int64_t base;
  int nested;
} count_ctx;

static void count_fn(void* p, int64_t lo, int64_t hi) {
  count_ctx* c = (count_ctx*)p;
  for (int64_t i = lo; i < hi; ++i) {
    if (c->nested) {
      /* A loop inside a loop: runs on this thread, each inner
         iteration once. */
      count_ctx in = {c->hits + (i - c->base) * 4, 0, 0};
      kiln_parallel_for(count_fn, &in, 0, 4);
    } else {
      __atomic_fetch_add(&c->hits[i - c->base], 1, __ATOMIC_RELAXED);
    }
  }
}

/* run_counts checks every range and thread count; returns the failures. */
static void run_counts(int rounds) {
  static KILN_THREAD_LOCAL int32_t hits[400];
  for (int r = 0; r < rounds; ++r) {
    for (int32_t t = 1; t <= 5; ++t) {
      kiln_set_num_threads_here(t);
      for (int64_t n = 1; n <= 100; n += (n < 20 ? 1 : 7)) {
        for (int nested = 0; nested < 2; ++nested) {
          int64_t m = nested ? n * 4 : n;
          memset(hits, 0, sizeof hits);
          count_ctx c = {hits, 5, nested};
          kiln_parallel_for(count_fn, &c, 5, 5 + n);
          for (int64_t i = 0; i < m; ++i) CHECK(hits[i] == 1, "threads %d n %d nested %d: iteration %d ran %d times", (int)t, (int)n, nested, (int)i, (int)hits[i]);
        }
      }
    }
  }
  kiln_set_num_threads_here(0);
}

static void* caller_main(void* p) {
  (void)p;
  run_counts(1);
  return NULL;
}

/* Stealing: iterations on a worker are slow, so the caller, done with
   its own chunks, takes the worker's. */
static KILN_THREAD_LOCAL int is_caller;
static int32_t by_caller;
static void slow_fn(void* p, int64_t lo, int64_t hi) {
  (void)p;
  for (int64_t i = lo; i < hi; ++i) {
    if (is_caller) {
      __atomic_fetch_add(&by_caller, 1, __ATOMIC_RELAXED);
    } else {
      struct timespec d = {0, 2000000};
      nanosleep(&d, NULL);
    }
  }
}

static int tasks(void) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

int main(void) {
  run_counts(1);
  int before = tasks();

  /* Three callers at once, each with its own team. */
  pthread_t th[3];
  for (int i = 0; i < 3; ++i) CHECK(pthread_create(&th[i], NULL, caller_main, NULL) == 0, "pthread_create");
  for (int i = 0; i < 3; ++i) pthread_join(th[i], NULL);

  /* Their teams ended with them. A thread joined may still be listed
     for a moment (the kernel clears its id before it is gone, and
     qemu's threads linger longer): wait up to two seconds; a team that
     leaked stays. */
  int after = tasks();
  for (int i = 0; i < 200 && after != before; ++i) {
    struct timespec d = {0, 10000000};
    nanosleep(&d, NULL);
    after = tasks();
  }
  CHECK(after == before, "%d threads after the callers ended, %d before", after, before);

  is_caller = 1;
  kiln_set_num_threads_here(2);
  kiln_parallel_for(slow_fn, NULL, 0, 64);
  CHECK(by_caller > 40, "the caller ran %d of 64 iterations when the worker was slow, want more than 40", (int)by_caller);

  kiln_set_num_threads_here(0);
  kiln_set_num_threads(3);
  CHECK(kiln_thread_count() == 3, "kiln_set_num_threads(3): count %d", (int)kiln_thread_count());
  kiln_set_num_threads_here(2);
  CHECK(kiln_thread_count() == 2, "kiln_set_num_threads_here(2): count %d", (int)kiln_thread_count());
  if (failures == 0) printf("ok\n");
  return failures != 0;
}
`

// poolProgram is a C program of the pool's translation unit and a
// driver.
func poolProgram(driver string) string { return threadsSource(true) + driver }

// buildPoolProgram compiles a pool program with the pool library's flags
// and extra flags.
func buildPoolProgram(t *testing.T, src string, extra ...string) string {
	t.Helper()
	return buildThreadsProgram(t, compilerCommand(""), true, src, extra...)
}

// buildThreadsProgram compiles a program of threadsSource(pool) with the
// compiler command cc, the library's thread flags (ThreadFlags) and extra
// flags, warnings as errors.
func buildThreadsProgram(t *testing.T, cc []string, pool bool, src string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "threads.c")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "threads")
	args := append(append(append(cc[1:], "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror"), ThreadFlags(pool)...), extra...)
	args = append(args, file, "-o", exe)
	if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("pool %v: %v: %s", pool, err, out)
	}
	return exe
}

// envWithout is the process's environment without the variables whose
// "NAME=" starts with prefix.
func envWithout(prefix string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, prefix) {
			env = append(env, e)
		}
	}
	return env
}

// runPool runs a pool program under each wait policy (spinning without
// end, sleeping at once, the default) with OMP_NUM_THREADS unset; with
// a runner (an emulator and its arguments), through it.
func runPool(t *testing.T, exe string, env ...string) {
	t.Helper()
	runPoolWith(t, nil, exe, env...)
}

func runPoolWith(t *testing.T, runner []string, exe string, env ...string) {
	t.Helper()
	for _, policy := range []string{"active", "passive", ""} {
		argv := append(append([]string(nil), runner...), exe)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(envWithout("OMP_"), env...)
		if policy != "" {
			cmd.Env = append(cmd.Env, "OMP_WAIT_POLICY="+policy)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("OMP_WAIT_POLICY=%q: %v\n%s", policy, err, out)
		}
	}
}

// TestThreadPool runs the pool driver built as the library is.
func TestThreadPool(t *testing.T) {
	testenv.CC(t)
	runPool(t, buildPoolProgram(t, poolProgram(poolDriver)))
}

// TestThreadPoolRaces runs the pool driver under ThreadSanitizer: any
// data race between the caller, its workers and the teams' ends fails.
func TestThreadPoolRaces(t *testing.T) {
	testenv.CC(t)
	testenv.Need(t, "ThreadSanitizer (apt-get install libtsan2)", probeFlags(t.TempDir(), "-fsanitize=thread"))
	exe := buildPoolProgram(t, poolProgram(poolDriver), "-fsanitize=thread", "-g")
	runPool(t, exe, "TSAN_OPTIONS=halt_on_error=1 exitcode=66")
}

// TestThreadPoolArm runs the pool driver built for 64-bit Arm (where
// waiting threads pause with the yield instruction) under qemu-aarch64.
func TestThreadPoolArm(t *testing.T) {
	if testing.Short() {
		t.Skip("emulates a 64-bit Arm CPU; skipped with -short")
	}
	cc := testenv.Tool(t, crossCompilers[targets.AArch64])
	qemu := testenv.Tool(t, "qemu-aarch64")
	exe := buildThreadsProgram(t, []string{cc}, true, poolProgram(poolDriver), "-static")
	runPoolWith(t, []string{qemu}, exe)
}
