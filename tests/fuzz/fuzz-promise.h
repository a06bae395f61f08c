/* What a fuzz target asserts about the code under test: a broken promise
 * traps, which libFuzzer reports as a crash with the input that broke it
 * (assert() would vanish under NDEBUG and print less). */
#ifndef TN_FUZZ_PROMISE_H
#define TN_FUZZ_PROMISE_H

#define PROMISE(cond)         \
    do {                      \
        if (!(cond))          \
            __builtin_trap(); \
    } while (0)

#endif
