package c

// This file holds the C text of kiln_parallel_for, which runs the
// parallel loops of a threaded library (Options.OpenMP): the code
// generator outlines each parallel loop into a function of a range of
// its iterations (outline.go) and calls kiln_parallel_for with it.
//
// With Options.ThreadPool (host libraries that share the process with
// no other OpenMP code), the loops run on kiln's own pool: each OS
// thread that calls a parallel loop gets a team of worker threads of its
// own, as OpenMP gives each calling thread its team, so that the
// runtime's executors, forks and pinned device threads keep their
// threads apart. Measured against libgomp on a 2-core Zen 5 VM, a fork
// and join of the pool costs about 0.7 µs against libgomp's 3.6 µs, and
// int8 mobilenet_v2 runs about 100 parallel loops per inference.
//
// A job splits the loop into chunks (KILN_POOL_CHUNKS per thread), and
// thread t owns a contiguous run of them, as a static schedule gives it:
// kernels that run one after the other give each thread the same part
// of the data, which stays in its core's cache. A thread that finishes
// its own chunks takes the unclaimed ones of the others, so that a slow
// core (a busy VM's, or a hybrid CPU's small core) does not hold up the
// loop by a share of it. Workers spin on the team's job word while
// waiting (OMP_WAIT_POLICY: "active" spins without end, "passive" sleeps
// at once, otherwise two milliseconds) and then sleep on a condition
// variable.
//
// Without a pool, kiln_parallel_for runs an OpenMP team splitting the
// range as schedule(static) does (the library is then built with
// -fopenmp: the dnnl backend's oneDNN runs on libgomp, and two thread
// pools spinning for the same cores would starve each other), and
// without threads it runs the whole range on the calling thread.

// poolDecls declares kiln_parallel_for in every translation unit.
const poolDecls = `/* kiln_par_fn runs iterations [lo, hi) of an outlined parallel loop. */
typedef void (*kiln_par_fn)(void* ctx, int64_t lo, int64_t hi);
KILN_HIDDEN void kiln_parallel_for(kiln_par_fn fn, void* ctx, int64_t lo, int64_t hi);
`

// poolDefs defines kiln_parallel_for (in the translation unit holding
// the runtime definitions, after runtimeDefs).
const poolDefs = `#if defined(KILN_THREAD_POOL)
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* At most KILN_POOL_MAX threads run a loop (the caller and its workers);
   each takes KILN_POOL_CHUNKS chunks of it before others take its rest. */
#define KILN_POOL_MAX 255
#define KILN_POOL_CHUNKS 4
/* A chunk counter holds the job's stamp (40 bits of its generation) and
   the next chunk to claim (24 bits). */
#define KILN_STAMP_MASK ((UINT64_C(1) << 40) - 1)
#if defined(__x86_64__) || defined(__i386__)
#define KILN_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define KILN_RELAX() __asm__ __volatile__("yield")
#else
#define KILN_RELAX() ((void)0)
#endif

typedef struct kiln_team kiln_team;

typedef struct {
  kiln_team* team;
  int32_t me;    /* thread number in the team, 1.. */
  uint64_t seen; /* the job word when the worker started */
} kiln_worker_arg;

typedef struct {
  uint64_t v;
  char pad[56];
} kiln_chunk_counter;

struct kiln_team {
  /* The job, written by the calling thread before it publishes word
     (generation << 8 | thread count); on one cache line. */
  uint64_t word KILN_ALIGN64;
  kiln_par_fn fn;
  void* ctx;
  int64_t lo, n, chunks;
  /* Workers that finished the current job. */
  uint32_t done KILN_ALIGN64;
  int32_t sleepers KILN_ALIGN64, stop;
  /* Claims of each thread's run of chunks. */
  kiln_chunk_counter next[KILN_POOL_MAX] KILN_ALIGN64;
  int32_t workers, last_threads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t threads[KILN_POOL_MAX - 1];
  kiln_worker_arg args[KILN_POOL_MAX - 1];
  kiln_team* link; /* the list of all teams */
};

static pthread_once_t kiln_pool_once = PTHREAD_ONCE_INIT;
static int kiln_pool_ok;
static pthread_key_t kiln_team_key;
static pthread_mutex_t kiln_teams_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_team* kiln_teams;
static int32_t kiln_env_threads;
/* How long a waiting worker spins before it sleeps: -1 without end. */
static int64_t kiln_spin_ns = 2000000;
/* The processors of the process and the threads of all teams (callers
   and workers): with more threads than processors, a spinning thread
   holds a processor another one needs, so waits spin only briefly. */
static int32_t kiln_cpus = 1;
static int32_t kiln_pool_threads;
#define KILN_THROTTLED_SPIN_NS 20000
static KILN_THREAD_LOCAL kiln_team* kiln_my_team;
/* Set while the thread runs a job: a parallel loop inside runs serially. */
static KILN_THREAD_LOCAL int kiln_in_job;
static KILN_THREAD_LOCAL int32_t kiln_affinity_threads;

static void kiln_team_free(kiln_team* tm) {
  pthread_mutex_lock(&tm->mu);
  __atomic_store_n(&tm->stop, 1, __ATOMIC_SEQ_CST);
  pthread_cond_broadcast(&tm->cv);
  pthread_mutex_unlock(&tm->mu);
  for (int32_t i = 0; i < tm->workers; ++i) pthread_join(tm->threads[i], NULL);
  __atomic_fetch_sub(&kiln_pool_threads, tm->workers + 1, __ATOMIC_RELAXED);
  pthread_cond_destroy(&tm->cv);
  pthread_mutex_destroy(&tm->mu);
  free(tm);
}

/* kiln_team_unlink removes tm from the list of teams; 0 when another
   thread (the library's destructor) took it first. */
static int kiln_team_unlink(kiln_team* tm) {
  int found = 0;
  pthread_mutex_lock(&kiln_teams_mu);
  for (kiln_team** p = &kiln_teams; *p != NULL; p = &(*p)->link) {
    if (*p == tm) {
      *p = tm->link;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&kiln_teams_mu);
  return found;
}

/* A calling thread's team ends with the thread. */
static void kiln_team_exit(void* p) {
  kiln_team* tm = (kiln_team*)p;
  if (tm != NULL && kiln_team_unlink(tm)) kiln_team_free(tm);
}

/* In a child process after fork the workers do not exist: forget the
   teams (their memory is lost) and start over. */
static void kiln_pool_forked(void) {
  pthread_mutex_init(&kiln_teams_mu, NULL);
  kiln_teams = NULL;
  kiln_my_team = NULL;
  if (kiln_pool_ok) pthread_setspecific(kiln_team_key, NULL);
}

static void kiln_pool_init(void) {
  const char* s = getenv("OMP_NUM_THREADS");
  if (s != NULL) {
    char* end;
    long v = strtol(s, &end, 10);
    if (end != s && v > 0) kiln_env_threads = v > KILN_POOL_MAX ? KILN_POOL_MAX : (int32_t)v;
  }
  s = getenv("OMP_WAIT_POLICY");
  if (s != NULL && (strcmp(s, "active") == 0 || strcmp(s, "ACTIVE") == 0)) kiln_spin_ns = -1;
  if (s != NULL && (strcmp(s, "passive") == 0 || strcmp(s, "PASSIVE") == 0)) kiln_spin_ns = 0;
  long c = sysconf(_SC_NPROCESSORS_ONLN);
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) c = CPU_COUNT(&set);
#endif
  kiln_cpus = c > 0 ? (int32_t)c : 1;
  if (pthread_key_create(&kiln_team_key, kiln_team_exit) != 0) return;
  pthread_atfork(NULL, NULL, kiln_pool_forked);
  kiln_pool_ok = 1;
}

/* Unloading the library ends every team (their threads run its code)
   and the key whose destructor is in it. */
__attribute__((destructor)) static void kiln_pool_fini(void) {
  if (!kiln_pool_ok) return;
  for (;;) {
    pthread_mutex_lock(&kiln_teams_mu);
    kiln_team* tm = kiln_teams;
    if (tm != NULL) kiln_teams = tm->link;
    pthread_mutex_unlock(&kiln_teams_mu);
    if (tm == NULL) break;
    kiln_team_free(tm);
  }
  kiln_my_team = NULL;
  pthread_key_delete(kiln_team_key);
  kiln_pool_ok = 0;
}

/* The start of part i of n items split into parts runs, the first n %
   parts runs one longer (OpenMP's static schedule). */
static int64_t kiln_split(int64_t n, int64_t parts, int64_t i) {
  int64_t q = n / parts, r = n % parts;
  return q * i + (i < r ? i : r);
}

/* kiln_claim takes the next chunk of [first, end) from a counter for the
   job stamped stamp: -1 when none is left. A counter still holding an
   older stamp starts at first. */
static int64_t kiln_claim(uint64_t* v, uint64_t stamp, int64_t first, int64_t end) {
  uint64_t old = __atomic_load_n(v, __ATOMIC_RELAXED);
  for (;;) {
    int64_t next = (old >> 24) == stamp ? (int64_t)(old & 0xffffff) : first;
    if (next >= end) return -1;
    uint64_t nv = (stamp << 24) | (uint64_t)(next + 1);
    if (__atomic_compare_exchange_n(v, &old, nv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return next;
  }
}

/* kiln_team_work runs thread me's chunks of the job, then any chunks
   the other threads have not claimed yet. */
static void kiln_team_work(kiln_team* tm, int32_t me, int32_t threads, uint64_t stamp) {
  const int64_t chunks = tm->chunks, lo = tm->lo, n = tm->n;
  for (int32_t k = 0; k < threads; ++k) {
    int32_t u = (me + k) % threads;
    const int64_t first = kiln_split(chunks, threads, u), end = kiln_split(chunks, threads, u + 1);
    for (;;) {
      int64_t c = kiln_claim(&tm->next[u].v, stamp, first, end);
      if (c < 0) break;
      tm->fn(tm->ctx, lo + kiln_split(n, chunks, c), lo + kiln_split(n, chunks, c + 1));
    }
  }
}

static int64_t kiln_ns_since(const struct timespec* t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)(t.tv_sec - t0->tv_sec) * 1000000000 + (t.tv_nsec - t0->tv_nsec);
}

/* kiln_next_job waits for a job word other than seen (or the team's
   end): it spins, then sleeps. */
static int kiln_oversubscribed(void) {
  return __atomic_load_n(&kiln_pool_threads, __ATOMIC_RELAXED) > kiln_cpus;
}

static uint64_t kiln_next_job(kiln_team* tm, uint64_t seen) {
  uint64_t w;
  if (kiln_spin_ns != 0) {
    int64_t spin = kiln_spin_ns;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t i = 1;; ++i) {
      w = __atomic_load_n(&tm->word, __ATOMIC_ACQUIRE);
      if (w != seen || __atomic_load_n(&tm->stop, __ATOMIC_RELAXED)) return w;
      KILN_RELAX();
      if ((i & 255) == 0) {
        if (kiln_oversubscribed()) spin = KILN_THROTTLED_SPIN_NS;
        if (spin > 0 && kiln_ns_since(&t0) > spin) break;
      }
    }
  }
  /* The caller publishes the word, then wakes sleepers if it sees any; a
     worker counts itself a sleeper, then reads the word, both under the
     mutex: one of them sees the other's write. */
  pthread_mutex_lock(&tm->mu);
  __atomic_fetch_add(&tm->sleepers, 1, __ATOMIC_SEQ_CST);
  while ((w = __atomic_load_n(&tm->word, __ATOMIC_SEQ_CST)) == seen && !__atomic_load_n(&tm->stop, __ATOMIC_SEQ_CST)) {
    pthread_cond_wait(&tm->cv, &tm->mu);
  }
  __atomic_fetch_sub(&tm->sleepers, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&tm->mu);
  return w;
}

static void* kiln_worker_main(void* p) {
  kiln_worker_arg* a = (kiln_worker_arg*)p;
  kiln_team* tm = a->team;
  const int32_t me = a->me;
  uint64_t seen = a->seen;
  kiln_in_job = 1;
  for (;;) {
    uint64_t w = kiln_next_job(tm, seen);
    if (__atomic_load_n(&tm->stop, __ATOMIC_ACQUIRE)) break;
    seen = w;
    int32_t threads = (int32_t)(w & 0xff);
    if (me < threads) {
      kiln_team_work(tm, me, threads, (w >> 8) & KILN_STAMP_MASK);
      __atomic_fetch_add(&tm->done, 1, __ATOMIC_RELEASE);
    }
  }
  return NULL;
}

/* kiln_team_get returns the calling thread's team with at least want
   workers if it can start them (fewer if it cannot), or NULL. */
static kiln_team* kiln_team_get(int32_t want) {
  pthread_once(&kiln_pool_once, kiln_pool_init);
  if (!kiln_pool_ok) return NULL;
  kiln_team* tm = kiln_my_team;
  if (tm == NULL) {
    void* p = NULL;
    if (posix_memalign(&p, 64, sizeof(kiln_team)) != 0) return NULL;
    tm = (kiln_team*)p;
    memset(tm, 0, sizeof *tm);
    if (pthread_mutex_init(&tm->mu, NULL) != 0) {
      free(tm);
      return NULL;
    }
    if (pthread_cond_init(&tm->cv, NULL) != 0) {
      pthread_mutex_destroy(&tm->mu);
      free(tm);
      return NULL;
    }
    if (pthread_setspecific(kiln_team_key, tm) != 0) {
      kiln_team_free(tm);
      return NULL;
    }
    pthread_mutex_lock(&kiln_teams_mu);
    tm->link = kiln_teams;
    kiln_teams = tm;
    pthread_mutex_unlock(&kiln_teams_mu);
    __atomic_fetch_add(&kiln_pool_threads, 1, __ATOMIC_RELAXED);
    kiln_my_team = tm;
  }
  if (tm->workers < want) {
    /* Workers take no signals (they inherit the mask): those go to the
       process's own threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    while (tm->workers < want) {
      kiln_worker_arg* a = &tm->args[tm->workers];
      a->team = tm;
      a->me = tm->workers + 1;
      a->seen = tm->word;
      if (pthread_create(&tm->threads[tm->workers], NULL, kiln_worker_main, a) != 0) break;
      tm->workers++;
      __atomic_fetch_add(&kiln_pool_threads, 1, __ATOMIC_RELAXED);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  return tm->workers > 0 ? tm : NULL;
}

/* kiln_default_threads: OMP_NUM_THREADS when set, else the processors
   the calling thread may run on (a pinned device thread: its cores). */
static int32_t kiln_default_threads(void) {
  pthread_once(&kiln_pool_once, kiln_pool_init);
  if (kiln_env_threads > 0) return kiln_env_threads;
  if (kiln_affinity_threads == 0) {
    int32_t n = 0;
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = (int32_t)CPU_COUNT(&set);
#endif
    if (n <= 0) {
      long c = sysconf(_SC_NPROCESSORS_ONLN);
      n = c > 0 ? (int32_t)(c > KILN_POOL_MAX ? KILN_POOL_MAX : c) : 1;
    }
    kiln_affinity_threads = n;
  }
  return kiln_affinity_threads;
}

void kiln_parallel_for(kiln_par_fn fn, void* ctx, int64_t lo, int64_t hi) {
  if (hi <= lo) return;
  const int64_t n = hi - lo;
  int32_t threads = kiln_in_job ? 1 : kiln_thread_count();
  if (threads > KILN_POOL_MAX) threads = KILN_POOL_MAX;
  if (threads > n) threads = (int32_t)n;
  kiln_team* tm = threads > 1 ? kiln_team_get(threads - 1) : NULL;
  if (tm == NULL) {
    fn(ctx, lo, hi);
    return;
  }
  if (threads > tm->workers + 1) threads = tm->workers + 1;
  const uint64_t gen = (tm->word >> 8) + 1, stamp = gen & KILN_STAMP_MASK;
  /* Counters of threads the last job did not use may hold any old stamp:
     give them the previous one (the others hold it already). */
  for (int32_t u = tm->last_threads; u < threads; ++u) {
    __atomic_store_n(&tm->next[u].v, ((stamp - 1) & KILN_STAMP_MASK) << 24, __ATOMIC_RELAXED);
  }
  tm->last_threads = threads;
  int64_t chunks = (int64_t)threads * KILN_POOL_CHUNKS;
  tm->fn = fn;
  tm->ctx = ctx;
  tm->lo = lo;
  tm->n = n;
  tm->chunks = chunks < n ? chunks : n;
  __atomic_store_n(&tm->done, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&tm->word, gen << 8 | (uint64_t)threads, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&tm->sleepers, __ATOMIC_SEQ_CST) > 0) {
    pthread_mutex_lock(&tm->mu);
    pthread_cond_broadcast(&tm->cv);
    pthread_mutex_unlock(&tm->mu);
  }
  kiln_in_job = 1;
  kiln_team_work(tm, 0, threads, stamp);
  kiln_in_job = 0;
  /* The join: spin, yielding now and then (often when the threads
     outnumber the processors: a worker may be waiting for this one's). */
  const uint32_t yield_mask = kiln_oversubscribed() ? 63 : 4095;
  for (uint32_t i = 1; __atomic_load_n(&tm->done, __ATOMIC_ACQUIRE) != (uint32_t)(threads - 1); ++i) {
    KILN_RELAX();
    if ((i & yield_mask) == 0) sched_yield();
  }
}
#elif defined(_OPENMP)
void kiln_parallel_for(kiln_par_fn fn, void* ctx, int64_t lo, int64_t hi) {
  if (hi <= lo) return;
  const int64_t n = hi - lo;
  int32_t threads = kiln_thread_count();
  if (threads > n) threads = (int32_t)n;
  if (threads <= 1 || omp_in_parallel()) {
    fn(ctx, lo, hi);
    return;
  }
  KILN_PRAGMA(omp parallel num_threads(threads))
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t q = n / nt, r = n % nt;
    const int64_t a = q * t + (t < r ? t : r), b = a + q + (t < r ? 1 : 0);
    if (a < b) fn(ctx, lo + a, lo + b);
  }
}
#else
void kiln_parallel_for(kiln_par_fn fn, void* ctx, int64_t lo, int64_t hi) {
  if (hi > lo) fn(ctx, lo, hi);
}
#endif
`
