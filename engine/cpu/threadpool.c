/* A persistent thread pool for the forward pass.
 *
 * A decode step dispatches a few hundred short tasks (one per matmul), so
 * dispatch latency matters: workers spin on the dispatch word for a short
 * while after each task (the next one usually comes within microseconds),
 * then sleep on a futex so that an idle engine costs no CPU. Dispatch
 * allocates nothing.
 *
 * The n slots (ith = 0..n-1) of a task are claimed, not assigned: the caller
 * and the workers take them with a compare-and-swap, and the caller keeps
 * taking slots until none is left. On a machine busy with other work a
 * worker may not get a core for milliseconds; its slot is then run by the
 * caller instead of waited for. The caller only waits for slots that are
 * actually running. */
#include "tn-cpu-internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long a worker (or the waiting caller) spins before sleeping. Long
 * enough to bridge the gap between two matmuls of one decode step, short
 * enough that an idle engine goes quiet at once. */
#define TN_SPIN_NS_DEFAULT 200000

static void futex_wait(atomic_uint *addr, unsigned expected) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *addr) {
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until *addr != value or the spin budget is spent; true if it moved.
 * After the first microsecond or so the spin yields the core now and then:
 * when another process holds the other core, the thread we wait for may be
 * queued on ours, and a pure spin would keep it off the core for the whole
 * budget (measured: one dispatch per 200 us, one core busy, on a loaded
 * 2-core machine). sched_yield costs a fraction of a microsecond when
 * nothing else wants the core. */
static bool spin_while_equal(atomic_uint *addr, unsigned value, int64_t spin_ns) {
    if (spin_ns <= 0)
        return atomic_load_explicit(addr, memory_order_acquire) != value;
    int64_t deadline = 0;
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(addr, memory_order_acquire) != value)
            return true;
        cpu_relax();
        if ((i & 63) == 63) {
            int64_t t = now_ns();
            if (!deadline)
                deadline = t + spin_ns;
            else if (t >= deadline)
                return false;
            if (i >= 255)
                sched_yield();
        }
    }
}

/* One slot, through the wrapper when there is one. Read after the state
 * moved: the dispatch's store published wrap with fn and ctx. */
static inline void run_slot(const tn_cpu *cpu, tn_task_fn fn, void *ctx, int ith, int n) {
    if (cpu->wrap)
        cpu->wrap(cpu->wrap_arg, fn, ctx, ith, n);
    else
        fn(ctx, ith, n);
}

/* Claims and runs slots of the current generation until none is left.
 * Returns the state word last seen (slot field >= n_threads). */
static unsigned run_slots(tn_cpu *cpu, unsigned s) {
    const unsigned n = (unsigned)cpu->n_threads;
    while ((s & TN_SLOT_MASK) < n) {
        if (!atomic_compare_exchange_weak(&cpu->state, &s, s + 1))
            continue; /* s now holds the fresh value */
        /* The slot is ours, so the caller cannot start another generation
         * (and overwrite fn/ctx) before we count it done. */
        run_slot(cpu, cpu->fn, cpu->ctx, (int)(s & TN_SLOT_MASK), (int)n);
        if (atomic_fetch_add(&cpu->done, 1) + 1 == n && atomic_load(&cpu->caller_sleeping))
            futex_wake_all(&cpu->done);
        s = atomic_load(&cpu->state);
    }
    return s;
}

static void *worker_main(void *arg) {
    tn_worker *wk = arg;
    tn_cpu *cpu = wk->cpu;
    unsigned s = atomic_load(&cpu->state);
    for (;;) {
        s = run_slots(cpu, s);
        if (atomic_load_explicit(&cpu->stop, memory_order_acquire))
            return NULL;
        if (!spin_while_equal(&cpu->state, s, cpu->spin_ns)) {
            /* Announce the sleep before re-checking, so that a dispatcher
             * that moves the state after our check sees us (both sides are
             * sequentially consistent). */
            atomic_fetch_add(&cpu->sleepers, 1);
            while (atomic_load(&cpu->state) == s && !atomic_load(&cpu->stop))
                futex_wait(&cpu->state, s);
            atomic_fetch_sub(&cpu->sleepers, 1);
        }
        s = atomic_load(&cpu->state);
    }
}

static int physical_cores(void) {
    cpu_set_t set;
    int logical = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        logical = CPU_COUNT(&set);
    if (logical <= 0)
        logical = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (logical <= 0)
        return 1;
    /* SMT siblings share the core's load ports and caches: for kernels that
     * are bound by memory or by the vector units a second thread per core
     * only adds contention. */
    int per_core = 1;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "r");
    if (f) {
        char buf[128];
        if (fgets(buf, sizeof buf, f)) {
            int a, b;
            if (sscanf(buf, "%d-%d", &a, &b) == 2 && b > a)
                per_core = b - a + 1;
            else
                for (const char *p = buf; *p; p++)
                    per_core += *p == ',';
        }
        fclose(f);
    }
    int cores = logical / (per_core > 0 ? per_core : 1);
    return cores > 0 ? cores : 1;
}

tn_cpu *tn_cpu_new(int n_threads) {
    if (n_threads <= 0)
        n_threads = physical_cores();
    if (n_threads > 512)
        n_threads = 512;
    tn_cpu *cpu = aligned_alloc(TN_CACHE_LINE, (sizeof *cpu + TN_CACHE_LINE - 1) /
                                                   TN_CACHE_LINE * TN_CACHE_LINE);
    if (!cpu)
        return NULL;
    memset(cpu, 0, sizeof *cpu);
    cpu->n_threads = n_threads;
    cpu->isa = tn_isa_best();
    cpu->spin_ns = TN_SPIN_NS_DEFAULT;
    const char *spin = getenv("TERN_SPIN_US");
    if (spin && *spin)
        cpu->spin_ns = (int64_t)atol(spin) * 1000;
    /* Generation 0 has no free slot: nothing to run until a dispatch. */
    atomic_init(&cpu->state, (unsigned)n_threads);
    atomic_init(&cpu->done, 0);
    atomic_init(&cpu->sleepers, 0);
    atomic_init(&cpu->caller_sleeping, 0);
    atomic_init(&cpu->stop, false);
    cpu->ranges = aligned_alloc(TN_CACHE_LINE, sizeof *cpu->ranges * 2 * (size_t)n_threads);
    if (!cpu->ranges) {
        free(cpu);
        return NULL;
    }
    tn_chunk_ranges_split(cpu->ranges, n_threads, 0);
    if (n_threads > 1) {
        cpu->workers = calloc((size_t)n_threads - 1, sizeof *cpu->workers);
        if (!cpu->workers) {
            free(cpu->ranges);
            free(cpu);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            tn_worker *wk = &cpu->workers[i - 1];
            wk->cpu = cpu;
            wk->ith = i;
            if (pthread_create(&wk->thread, NULL, worker_main, wk) != 0) {
                /* Run with the threads we got rather than fail. */
                cpu->n_threads = i;
                break;
            }
        }
    }
    return cpu;
}

void tn_cpu_free(tn_cpu *cpu) {
    if (!cpu)
        return;
    if (cpu->n_threads > 1) {
        atomic_store(&cpu->stop, true);
        atomic_fetch_add(&cpu->state, 1u << TN_SLOT_BITS);
        futex_wake_all(&cpu->state);
        for (int i = 1; i < cpu->n_threads; i++)
            pthread_join(cpu->workers[i - 1].thread, NULL);
    }
    free(cpu->workers);
    free(cpu->ranges);
    free(cpu->act);
    free(cpu->thr);
    free(cpu);
}

int tn_cpu_threads(const tn_cpu *cpu) { return cpu ? cpu->n_threads : 1; }

void tn_cpu_set_task_wrap(tn_cpu *cpu, tn_task_wrap wrap, void *arg) {
    if (!cpu)
        return;
    cpu->wrap = wrap;
    cpu->wrap_arg = arg;
}

void tn_cpu_parallel(tn_cpu *cpu, tn_task_fn fn, void *ctx) {
    if (!cpu || cpu->n_threads == 1) {
        if (cpu)
            run_slot(cpu, fn, ctx, 0, 1);
        else
            fn(ctx, 0, 1);
        return;
    }
    const unsigned n = (unsigned)cpu->n_threads;
    cpu->fn = fn;
    cpu->ctx = ctx;
    atomic_store_explicit(&cpu->done, 0, memory_order_relaxed);
    unsigned gen = (atomic_load_explicit(&cpu->state, memory_order_relaxed) >> TN_SLOT_BITS) + 1;
    /* Slot 0 is taken by the caller right away; the store publishes fn, ctx
     * and done. */
    atomic_store(&cpu->state, gen << TN_SLOT_BITS | 1);
    if (atomic_load(&cpu->sleepers) > 0)
        futex_wake_all(&cpu->state);

    run_slot(cpu, fn, ctx, 0, (int)n);
    unsigned d = atomic_fetch_add(&cpu->done, 1) + 1;
    if (d < n) {
        run_slots(cpu, atomic_load(&cpu->state));
        for (;;) {
            d = atomic_load_explicit(&cpu->done, memory_order_acquire);
            if (d == n)
                break;
            if (spin_while_equal(&cpu->done, d, cpu->spin_ns))
                continue;
            atomic_store(&cpu->caller_sleeping, 1);
            d = atomic_load(&cpu->done);
            if (d != n)
                futex_wait(&cpu->done, d);
            atomic_store(&cpu->caller_sleeping, 0);
        }
    }
    /* done == n was read with acquire: every slot's writes are visible. */
}
