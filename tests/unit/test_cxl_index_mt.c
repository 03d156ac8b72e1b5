/* The CXL index with several threads of the owner host in one process: two
 * writers on disjoint keys, a compactor rebuilding the tree every 20 ms and
 * two readers checking lookups and ordered scans of keys that are never
 * removed. Runs under ASan and ThreadSanitizer (make tsan). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cxl/region.h"
#include "helpers/testutil.h"
#include "pod/cxl_index.h"
static struct cxl_region *R; static struct xebr *X; static struct cxl_index *IX;
static int stop; static int fails;
static void enc(uint64_t k, unsigned char o[8]) { for (int i = 7; i >= 0; i--, k >>= 8) o[i] = (unsigned char)k; }
static uint64_t dec(const void *p) { const unsigned char *b = p; uint64_t k = 0; for (int i = 0; i < 8; i++) k = k << 8 | b[i]; return k; }
struct sc { uint64_t last; int n; int bad; };
static bool vis(void *a, const void *key, uint64_t v) { struct sc *s = a; uint64_t k = dec(key); if ((s->n && k <= s->last) || v != k * 3 + 1) s->bad = 1; s->last = k; s->n++; return s->n < 200; }
static void *writer(void *arg) {
  int w = (int)(intptr_t)arg; uint64_t x = 88172645463325252ull + (uint64_t)w;
  unsigned char kb[8];
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    uint64_t k = (x % 20000) * 4 + (uint64_t)w; /* disjoint per writer: w in 1,2 */
    enc(k, kb);
    if (x & 1024) cxl_index_insert(IX, w, kb, k * 3 + 1); else cxl_index_remove(IX, w, kb, NULL);
  }
  xebr_drain(X, w, 5000);
  return NULL;
}
static void *compactor(void *arg) {
  int w = (int)(intptr_t)arg; int n = 0;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    if (cxl_index_compact(IX, w) != BT_OK) __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
    xebr_collect(X, w); n++;
    struct timespec ts = {0, 20000000}; nanosleep(&ts, NULL);
  }
  xebr_drain(X, w, 5000);
  fprintf(stderr, "%d compactions\n", n);
  return NULL;
}
static void *reader(void *arg) {
  int w = (int)(intptr_t)arg; uint64_t x = 1234567 + (uint64_t)w; unsigned char kb[8]; uint64_t v; long ops = 0;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    uint64_t k = (x % 20000) * 4; enc(k, kb);
    if (cxl_index_lookup(IX, w, kb, &v) != BT_OK || v != k * 3 + 1) __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
    struct sc s = {0};
    cxl_index_scan_forward(IX, w, kb, true, vis, &s);
    if (s.bad) __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
    ops++;
  }
  fprintf(stderr, "reader %d: %ld ops\n", w, ops);
  return NULL;
}
START_TEST(owner_threads_and_readers)
{
  struct pod_config *c = malloc(sizeof *c);
  tu_make_config(c, 1, 1024ull << 20, 64ull << 20, false);
  c->hosts[0].workers = 6;
  pod_err err = {{0}};
  R = cxl_region_open(c, 0, CXL_OPEN_CREATE, &err);
  ck_assert_msg(R != NULL, "%s", err.msg);
  X = xebr_open(R, &err);
  ck_assert_msg(X != NULL, "%s", err.msg);
  IX = cxl_index_create(R, X, 1, 0, 8, 0, &err);
  ck_assert_msg(IX != NULL, "%s", err.msg);
  unsigned char kb[8];
  for (uint64_t k = 0; k < 80000; k += 4) { enc(k, kb); cxl_index_insert(IX, 0, kb, k * 3 + 1); } /* stable: k%4==0 */
  pthread_t t[6];
  pthread_create(&t[0], NULL, writer, (void *)1);
  pthread_create(&t[1], NULL, writer, (void *)2);
  pthread_create(&t[2], NULL, compactor, (void *)3);
  pthread_create(&t[3], NULL, reader, (void *)4);
  pthread_create(&t[4], NULL, reader, (void *)5);
  struct timespec ts = {3, 0}; nanosleep(&ts, NULL);
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 5; i++) pthread_join(t[i], NULL);
  xebr_drain(X, 0, 1000);
  pod_err verr = {{0}};
  if (!bt_verify(cxl_index_tree(IX), &verr)) { fprintf(stderr, "verify: %s\n", verr.msg); fails++; }
  struct cxl_index_stats st; cxl_index_get_stats(IX, 0, &st);
  struct xebr_stats xs; xebr_get_stats(X, &xs);
  fprintf(stderr, "fails %d, keys %llu nodes %llu live %llu retired %llu freed %llu\n", fails, (unsigned long long)st.tree.keys,
          (unsigned long long)st.tree.nodes, (unsigned long long)st.live_nodes, (unsigned long long)xs.retired, (unsigned long long)xs.freed);
  if (st.live_nodes != st.tree.nodes || xs.retired != xs.freed) fails++;
  cxl_index_close(IX); xebr_close(X, 1000); cxl_region_close(R); free(c);
  ck_assert_msg(fails == 0, "%d failed checks (see the lines above)", fails);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cxl_index_mt");
    TCase *t = tu_tcase(s, "threads", 120);
    tcase_add_test(t, owner_threads_and_readers);
    return tu_run(s);
}
