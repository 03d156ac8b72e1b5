#include "util/lanes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/cpu.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__SANITIZE_THREAD__)
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

/* What a switch saves of a flow of control: a lane's, or the scheduler's (the
 * thread's own stack, in lanes_run). */
struct context {
#if defined(__x86_64__)
    void *sp; /* the registers are saved on the stack, below it */
#else
    ucontext_t uc;
#endif
    void *local;       /* its lanes_local while another context runs */
    const void *stack; /* lowest byte and size of its stack (the scheduler's: as ASan sees it) */
    size_t stack_size;
    void *fiber; /* ThreadSanitizer's state of the context */
};

struct lane {
    struct context ctx;
    uint64_t wake_at; /* in lanes_sleep_ns: the end of the wait; 0 otherwise */
    bool idle, done;
};

struct lanes {
    struct lane *lane;
    struct context sched;
    unsigned n, cur;
    unsigned left; /* lanes not returned */
    unsigned busy; /* lanes neither idle nor returned */
    lane_fn fn;
    void *arg;
};

static __thread struct lanes *run;
static __thread void *local;

#if defined(__x86_64__)
/* lanes_swap(save, to): pushes the callee-saved registers, the MXCSR and the
 * x87 control word (whose control bits the SysV ABI also makes callee-saved),
 * stores the stack pointer in *save, then loads `to` and pops the same from
 * there, returning into the context that saved it. Caller-saved registers need
 * no saving: the compiler sees an ordinary call. Hidden so that the call is
 * direct, not through the PLT. */
void lanes_swap(void **save, void *to) __attribute__((visibility("hidden")));
__asm__(".text\n"
        ".globl lanes_swap\n"
        ".hidden lanes_swap\n"
        ".type lanes_swap, @function\n"
        "lanes_swap:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size lanes_swap, .-lanes_swap\n");

/* A new lane's stack as lanes_swap leaves one, so that the first switch to it
 * "returns" into entry with the alignment of a function just called: zeroed
 * registers (rbp 0 ends backtraces), the caller's MXCSR and x87 control word,
 * and a null return address that entry never uses. */
static int context_make(struct context *c, char *stack, size_t size, void (*entry)(void))
{
    uint64_t *top = (uint64_t *)((uintptr_t)(stack + size) & ~(uintptr_t)15);
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
    top[-1] = 0;
    top[-2] = (uint64_t)(uintptr_t)entry;
    for (int i = 3; i <= 8; i++) top[-i] = 0; /* rbp rbx r12 r13 r14 r15 */
    top[-9] = mxcsr | (uint64_t)fpucw << 32;
    c->sp = top - 9;
    return 0;
}

static void context_swap(struct context *from, struct context *to)
{
    lanes_swap(&from->sp, to->sp);
}
#else
static int context_make(struct context *c, char *stack, size_t size, void (*entry)(void))
{
    if (getcontext(&c->uc) != 0) return -1;
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL; /* entry never returns */
    makecontext(&c->uc, entry, 0);
    return 0;
}

static void context_swap(struct context *from, struct context *to)
{
    swapcontext(&from->uc, &to->uc);
}
#endif

/* Switches from the running context to `to`, telling the sanitizers; returns
 * when something switches back. A context that ends (a returned lane) passes
 * ends so that ASan frees its fake stack; it is never switched back to. */
static void context_switch(struct context *from, struct context *to, bool ends)
{
    from->local = local;
    local = to->local;
#if defined(__SANITIZE_ADDRESS__)
    void *fake_stack = NULL;
    __sanitizer_start_switch_fiber(ends ? NULL : &fake_stack, to->stack, to->stack_size);
#else
    (void)ends;
#endif
#if defined(__SANITIZE_THREAD__)
    __tsan_switch_to_fiber(to->fiber, 0);
#endif
    context_swap(from, to);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake_stack, NULL, NULL);
#endif
}

/* The first code a lane runs, on its own stack: fn, then back to the
 * scheduler for good. */
static void lane_entry(void)
{
    struct lanes *r = run;
#if defined(__SANITIZE_ADDRESS__)
    /* Lane 0 is entered from the scheduler: the first entry tells ASan's
     * view of the thread's stack, which the last switch of each lane needs. */
    const void *from_stack;
    size_t from_size;
    __sanitizer_finish_switch_fiber(NULL, &from_stack, &from_size);
    if (!r->sched.stack) {
        r->sched.stack = from_stack;
        r->sched.stack_size = from_size;
    }
#endif
    unsigned i = r->cur;
    r->fn(r->arg, i);
    struct lane *l = &r->lane[i];
    if (!l->idle) r->busy--;
    l->idle = l->done = true;
    r->left--;
    context_switch(&l->ctx, &r->sched, true);
    __builtin_unreachable();
}

/* The lane after i, round robin, that has not returned (i itself when alone). */
static unsigned next_lane(const struct lanes *r, unsigned i)
{
    for (unsigned j = i + 1;; j++) {
        if (j == r->n) j = 0; /* cheaper than a division (%) on every yield */
        if (j == i || !r->lane[j].done) return j;
    }
}

/* n == 1: the caller is lane 0, alone on its own stack. */
static int run_one(lane_fn fn, void *arg)
{
    struct lane one = {0};
    struct lanes r = {.lane = &one, .n = 1, .left = 1, .busy = 1};
    void *caller_local = local;
    run = &r;
    fn(arg, 0);
    run = NULL;
    local = caller_local;
    return 0;
}

/* The stacks of n lanes in one mapping: for each, a guard page then size
 * bytes. NULL with err when it cannot be had. */
static char *map_stacks(unsigned n, size_t size, size_t page, pod_err *err)
{
    size_t slot = size + page;
    char *base = mmap(NULL, n * slot, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) {
        pod_err_set(err, "lanes_run: cannot map %u stacks of %zu bytes: %s.", n, size,
                    strerror(errno));
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        if (mprotect(base + i * slot, page, PROT_NONE) != 0) {
            pod_err_set(err, "lanes_run: cannot protect a stack's guard page: %s.",
                        strerror(errno));
            munmap(base, n * slot);
            return NULL;
        }
    }
    return base;
}

int lanes_run(unsigned n, size_t stack_bytes, lane_fn fn, void *arg, pod_err *err)
{
    if (n == 0 || n > LANES_MAX) {
        pod_err_set(err, "lanes_run: %u lanes asked for; a thread runs from 1 to %d.", n,
                    LANES_MAX);
        return -1;
    }
    if (run) {
        pod_err_set(err, "lanes_run: called on lane %u; lanes do not run lanes of their own.",
                    run->cur);
        return -1;
    }
    if (n == 1) return run_one(fn, arg);

    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = stack_bytes ? stack_bytes : LANES_DEFAULT_STACK;
    if (size > SIZE_MAX / n - 2 * page) {
        pod_err_set(err, "lanes_run: %u stacks of %zu bytes do not fit in the address space.",
                    n, stack_bytes);
        return -1;
    }
    size = (size + page - 1) / page * page;
    struct lanes r = {.n = n, .left = n, .busy = n, .fn = fn, .arg = arg};
    r.lane = calloc(n, sizeof *r.lane);
    if (!r.lane) {
        pod_err_set(err, "lanes_run: out of memory for %u lanes.", n);
        return -1;
    }
    char *stacks = map_stacks(n, size, page, err);
    if (!stacks) {
        free(r.lane);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        struct context *c = &r.lane[i].ctx;
        c->stack = stacks + i * (size + page) + page;
        c->stack_size = size;
        c->local = local;
        if (context_make(c, (char *)c->stack, size, lane_entry) != 0) {
            pod_err_set(err, "lanes_run: cannot make the context of a lane: %s.",
                        strerror(errno));
            munmap(stacks, n * (size + page));
            free(r.lane);
            return -1;
        }
    }
#if defined(__SANITIZE_THREAD__)
    r.sched.fiber = __tsan_get_current_fiber();
    for (unsigned i = 0; i < n; i++) r.lane[i].ctx.fiber = __tsan_create_fiber(0);
#endif

    /* The thread's own stack schedules: it starts lane 0, and each time a
     * lane returns to it, the next that has not. */
    run = &r;
    for (;;) {
        context_switch(&r.sched, &r.lane[r.cur].ctx, false);
        if (r.left == 0) break;
        r.cur = next_lane(&r, r.cur);
    }
    run = NULL;

#if defined(__SANITIZE_THREAD__)
    for (unsigned i = 0; i < n; i++) __tsan_destroy_fiber(r.lane[i].ctx.fiber);
#endif
#if defined(__SANITIZE_ADDRESS__)
    /* Frames left on the stacks (lane_entry's never returns) keep their
     * redzones poisoned; memory mapped later at these addresses must not
     * inherit them. */
    ASAN_UNPOISON_MEMORY_REGION(stacks, n * (size + page));
#endif
    munmap(stacks, n * (size + page));
    free(r.lane);
    return 0;
}

int lanes_self(void)
{
    return run ? (int)run->cur : -1;
}

unsigned lanes_count(void)
{
    return run ? run->n : 0;
}

void lanes_yield(void)
{
    struct lanes *r = run;
    if (!r || r->left < 2) return;
    unsigned from = r->cur, to = next_lane(r, from);
    r->cur = to;
    context_switch(&r->lane[from].ctx, &r->lane[to].ctx, false);
}

void lanes_set_idle(bool idle)
{
    struct lanes *r = run;
    if (!r) return;
    struct lane *l = &r->lane[r->cur];
    if (l->idle == idle) return;
    l->idle = idle;
    if (idle) r->busy--;
    else r->busy++;
}

bool lanes_others_busy(void)
{
    const struct lanes *r = run;
    if (!r) return false;
    return r->busy > (r->lane[r->cur].idle ? 0u : 1u);
}

/* A wait shorter than this is spun: a nanosleep that short oversleeps it
 * several times over (a wake-up costs tens of microseconds). */
#define SPIN_BELOW_NS 20000ull

static void sleep_until(uint64_t until, uint64_t now)
{
    uint64_t ns = until - now;
    if (ns < SPIN_BELOW_NS) {
        pod_cpu_relax(); /* the caller looks at the clock again */
        return;
    }
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL); /* cut short by a signal: the caller looks at the clock again */
}

void lanes_sleep_ns(uint64_t ns)
{
    uint64_t now = pod_mono_ns(), until = now + ns;
    struct lanes *r = run;
    if (!r || r->left < 2) {
        for (; now < until; now = pod_mono_ns()) sleep_until(until, now);
        return;
    }
    struct lane *self = &r->lane[r->cur];
    self->wake_at = until;
    for (; now < until; now = pod_mono_ns()) {
        /* The thread may sleep only while no other lane has work to do now:
         * until the first wait among the lanes ends. */
        uint64_t wake = until;
        bool work = false;
        for (unsigned j = 0; j < r->n && !work; j++) {
            const struct lane *o = &r->lane[j];
            if (o == self || o->done) continue;
            if (o->wake_at) {
                if (o->wake_at < wake) wake = o->wake_at;
            } else if (!o->idle) {
                work = true;
            }
        }
        if (work || wake <= now) lanes_yield();
        else sleep_until(wake, now);
    }
    self->wake_at = 0;
}

void *lanes_local(void)
{
    return local;
}

void lanes_set_local(void *p)
{
    local = p;
}
