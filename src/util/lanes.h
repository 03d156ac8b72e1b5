/* Lanes: several flows of control on one thread, switched cooperatively
 * (stackful coroutines). A worker thread runs its transactions on lanes so
 * that one waiting for a remote memory operation yields the thread to the
 * next lane instead of sleeping: several transactions in flight per thread,
 * with no locks between them since only one lane runs at a time.
 *
 * Each lane has a stack of its own (mmap'd, with a guard page below it). A
 * switch saves the callee-saved registers and the stack pointer; nothing is
 * preempted: a lane runs until it yields, sleeps or returns. All state is per
 * thread, so threads run lanes of their own independently. */
#ifndef PODDB_UTIL_LANES_H
#define PODDB_UTIL_LANES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* The most lanes one lanes_run runs: the only limit besides memory. */
#define LANES_MAX 64
/* The stack of a lane when lanes_run is given 0. */
#define LANES_DEFAULT_STACK (256u * 1024u)

typedef void (*lane_fn)(void *arg, unsigned lane);

/* Runs fn(arg, i) for i = 0..n-1 as lanes of the calling thread and returns
 * when every one has returned. Lane 0 runs first; the others start on their
 * first turn. n == 1: fn(arg, 0) is called directly on the caller's stack, at
 * no switching cost. stack_bytes is rounded up to the page size, 0 meaning
 * LANES_DEFAULT_STACK; an overflow hits the guard page and faults instead of
 * corrupting memory. The stacks are freed before it returns. Returns 0, or -1
 * with err when n is 0 or above LANES_MAX, when the stacks cannot be
 * allocated, or when called on a lane (lanes do not nest). */
int lanes_run(unsigned n, size_t stack_bytes, lane_fn fn, void *arg, pod_err *err);

/* The index of the lane running now (0 under lanes_run with n == 1), or -1
 * when the caller is not on a lane. */
int lanes_self(void);

/* How many lanes the calling thread runs: n of its lanes_run, 0 outside. */
unsigned lanes_count(void);

/* Gives the thread to the next lane (round robin) that has not returned, idle
 * ones included since they must look at their queue again; returns when this
 * lane's turn comes back. Returns at once when the caller is alone: not on a
 * lane, n == 1, or every other lane has returned. */
void lanes_yield(void);

/* Marks the calling lane idle (waiting for work from outside the thread, e.g.
 * calls on a queue) or busy again. Lanes start busy; one that has returned
 * counts as idle. No effect outside lanes. */
void lanes_set_idle(bool idle);

/* Whether another lane of this thread is busy (neither idle nor returned): a
 * lane about to block the whole thread (pthread_cond_wait, nanosleep) asks
 * this first and, when true, yields instead. A lane in lanes_sleep_ns counts
 * as busy, since it needs its turns to wake up. False outside lanes. */
bool lanes_others_busy(void);

/* Waits at least ns nanoseconds (CLOCK_MONOTONIC) and lets the other lanes
 * run meanwhile: yields while another lane is busy and not sleeping itself;
 * when none is, the thread sleeps until the earliest end of the sleeping
 * lanes' waits (this one's included), so that lanes all waiting do not spin.
 * Outside lanes, or alone: nanosleep. What is left of a wait below 20 us is
 * spun instead of slept (a nanosleep that short oversleeps it). */
void lanes_sleep_ns(uint64_t ns);

/* A pointer of the calling lane's own (e.g. the worker it runs for): what a
 * thread-local variable is to a thread, saved and restored on every switch.
 * A lane starts with the value its lanes_run caller had, and the caller's
 * value is back when lanes_run returns. Outside lanes: a thread-local. */
void *lanes_local(void);
void lanes_set_local(void *p);

#endif
