/* The thread pool: every task runs once on every thread with the right
 * (ith, nth), dispatch returns only after all are done, both the spinning
 * and the sleeping hand-over work, and free joins cleanly. */
#include "tn-test.h"

#include "cpu/tn-cpu.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

typedef struct {
    atomic_int calls[8];
    atomic_int bad_nth;
    int expect_nth;
    long *slots; /* one per thread, written without atomics */
    int round;
} task_state;

static void count_task(void *ctx, int ith, int nth) {
    task_state *s = ctx;
    if (nth != s->expect_nth || ith < 0 || ith >= nth)
        atomic_fetch_add(&s->bad_nth, 1);
    else
        atomic_fetch_add(&s->calls[ith], 1);
    /* Plain stores the caller must see after dispatch returns. */
    s->slots[ith] += s->round;
}

static void run_rounds(tn_cpu *cpu, int rounds, bool pause_between) {
    int nth = tn_cpu_threads(cpu);
    task_state s;
    memset(&s, 0, sizeof s);
    long slots[8] = {0};
    s.slots = slots;
    s.expect_nth = nth;
    long expect = 0;
    for (int r = 1; r <= rounds; r++) {
        s.round = r;
        expect += r;
        tn_cpu_parallel(cpu, count_task, &s);
        for (int i = 0; i < nth; i++)
            if (slots[i] != expect) {
                CHECKF(0, "round %d: thread %d's work not visible after dispatch", r, i);
                return;
            }
        if (pause_between) {
            struct timespec ts = {0, 3000000}; /* past the spin: workers sleep */
            nanosleep(&ts, NULL);
        }
    }
    CHECK(atomic_load(&s.bad_nth) == 0);
    for (int i = 0; i < nth; i++)
        CHECKF(atomic_load(&s.calls[i]) == rounds, "thread %d ran %d of %d tasks", i,
               atomic_load(&s.calls[i]), rounds);
}

int main(void) {
    setenv("TERN_SPIN_US", "500", 1);
    for (int n = 1; n <= 4; n++) {
        tn_cpu *cpu = tn_cpu_new(n);
        CHECK(cpu != NULL);
        if (!cpu)
            continue;
        CHECK(tn_cpu_threads(cpu) == n);
        run_rounds(cpu, 2000, false);
        run_rounds(cpu, 20, true);
        tn_cpu_free(cpu);
    }
    /* No spinning at all: every hand-over goes through the futex. */
    setenv("TERN_SPIN_US", "0", 1);
    tn_cpu *cpu = tn_cpu_new(3);
    CHECK(cpu != NULL);
    if (cpu) {
        run_rounds(cpu, 500, false);
        tn_cpu_free(cpu);
    }
    /* Made and freed without ever dispatching. */
    tn_cpu_free(tn_cpu_new(2));
    tn_cpu_free(NULL);
    cpu = tn_cpu_new(0);
    CHECK(cpu && tn_cpu_threads(cpu) >= 1);
    tn_cpu_free(cpu);

    /* No pool: the task runs once on the caller. */
    task_state s;
    memset(&s, 0, sizeof s);
    long slot = 0;
    s.slots = &slot;
    s.expect_nth = 1;
    s.round = 1;
    tn_cpu_parallel(NULL, count_task, &s);
    CHECK(atomic_load(&s.calls[0]) == 1 && slot == 1);
    return tn_test_finish("threadpool");
}
