/* The C allocator contract, as a program that prints what each call did.
 * scripts/preload-test.sh runs it on glibc and under LD_PRELOAD of the nearflow library; the
 * two outputs must be the same line for line. Lines say what a caller can see: null or not,
 * errno, whether the block has the alignment asked for, whether a fresh zeroed block left the
 * resident set small. Sizes near SIZE_MAX once crashed the library (a length that wrapped),
 * a 64 TiB malloc succeeded on paper, a huge calloc wrote every page, errno stayed 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *show(void *p) { return p ? "ptr" : "null"; }

/* Resident set in MiB, from /proc/self/statm. */
static long rss_mib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024) / 1024;
}

static void try_malloc(const char *what, size_t n) {
  errno = 0;
  void *p = malloc(n);
  int e = errno;
  printf("malloc(%s): %s errno=%d\n", what, show(p), p ? 0 : e);
  free(p);
}

static void try_memalign(const char *fn, size_t align, size_t n) {
  errno = 0;
  void *p = strcmp(fn, "memalign") == 0 ? memalign(align, n) : aligned_alloc(align, n);
  int e = errno;
  /* The alignment glibc gives: at least 16, the next power of two otherwise. */
  size_t a = 16;
  while (a < align && a != 0) a <<= 1;
  int aligned = p && a != 0 && ((uintptr_t)p % a) == 0;
  printf("%s(%zu, %zu): %s errno=%d aligned=%d\n", fn, align, n, show(p), p ? 0 : e, aligned);
  if (p) memset(p, 1, n);
  free(p);
}

int main(void) {
  const size_t MiB = 1 << 20;
  try_malloc("0", 0);
  try_malloc("SIZE_MAX", SIZE_MAX);
  try_malloc("SIZE_MAX - 1 MiB", SIZE_MAX - MiB);
  try_malloc("SIZE_MAX / 2 + 1", SIZE_MAX / 2 + 1);
  try_malloc("PTRDIFF_MAX", PTRDIFF_MAX);
  try_malloc("PTRDIFF_MAX - 4 MiB", PTRDIFF_MAX - 4 * MiB);
  try_malloc("64 TiB", (size_t)64 << 40);
  try_malloc("8 MiB", 8 * MiB);
  try_malloc("100 MiB", 100 * MiB);

  /* realloc: a failure leaves the old block whole. */
  char *p = malloc(1 * MiB);
  memset(p, 7, 1 * MiB);
  errno = 0;
  char *q = realloc(p, SIZE_MAX - MiB);
  printf("realloc(1 MiB block, SIZE_MAX - 1 MiB): %s errno=%d old block intact=%d\n", show(q),
         q ? 0 : errno, q == NULL && p[0] == 7 && p[MiB - 1] == 7);
  errno = 0;
  q = realloc(p, (size_t)64 << 40);
  printf("realloc(1 MiB block, 64 TiB): %s errno=%d old block intact=%d\n", show(q),
         q ? 0 : errno, q == NULL && p[0] == 7 && p[MiB - 1] == 7);
  q = realloc(p, 3 * MiB);
  printf("realloc(1 MiB block, 3 MiB): %s kept=%d\n", show(q), q && q[0] == 7 && q[MiB - 1] == 7);
  free(q);
  errno = 0;
  q = realloc(NULL, 100);
  printf("realloc(NULL, 100): %s\n", show(q));
  free(q);

  /* posix_memalign reports through its result. */
  void *r = NULL;
  int rc = posix_memalign(&r, 64, SIZE_MAX - MiB);
  printf("posix_memalign(64, SIZE_MAX - 1 MiB): rc=%d\n", rc);
  rc = posix_memalign(&r, 3, 10);
  printf("posix_memalign(3, 10): rc=%d\n", rc);
  rc = posix_memalign(&r, 0, 10);
  printf("posix_memalign(0, 10): rc=%d\n", rc);
  rc = posix_memalign(&r, 4, 10);
  printf("posix_memalign(4, 10): rc=%d\n", rc);
  rc = posix_memalign(&r, 4096, 3 * MiB);
  printf("posix_memalign(4096, 3 MiB): rc=%d aligned=%d\n", rc, rc == 0 && (uintptr_t)r % 4096 == 0);
  if (rc == 0) free(r);

  try_memalign("memalign", 0, 10);
  try_memalign("memalign", 3, 10);
  try_memalign("memalign", 24, 100);
  try_memalign("memalign", 4096, 64 * 1024);
  try_memalign("memalign", 1 << 21, 3 * MiB);
  try_memalign("memalign", SIZE_MAX / 2 + 2, 10);
  try_memalign("memalign", 64, SIZE_MAX - MiB);
  try_memalign("aligned_alloc", 0, 10);
  try_memalign("aligned_alloc", 3, 10);
  try_memalign("aligned_alloc", 64, 100 * 1024);
  try_memalign("aligned_alloc", 4096, 3 * MiB);

  /* calloc: overflow and an impossible size fail; a large zeroed block is lazily zero. */
  errno = 0;
  void *c = calloc(SIZE_MAX / 2, 3);
  printf("calloc(SIZE_MAX / 2, 3): %s errno=%d\n", show(c), c ? 0 : errno);
  free(c);
  errno = 0;
  c = calloc((size_t)1 << 24, (size_t)1 << 22);
  printf("calloc(2^24, 2^22) = 64 TiB: %s errno=%d\n", show(c), c ? 0 : errno);
  free(c);
  long before = rss_mib();
  c = calloc(1, (size_t)4 << 30);
  long after = rss_mib();
  int zero = c != NULL;
  for (size_t off = 0; c && off < ((size_t)4 << 30); off += 256 * MiB)
    zero &= ((char *)c)[off] == 0;
  printf("calloc(1, 4 GiB): %s zero=%d resident grew under 64 MiB=%d\n", show(c), zero,
         after - before < 64);
  free(c);
  for (size_t n = 1; n <= 64 * MiB; n *= 4) {
    char *d = malloc(n);
    memset(d, 0xab, n);
    free(d);
    char *z = calloc(1, n);
    int all = 1;
    for (size_t i = 0; i < n; i += (n / 64) + 1) all &= z[i] == 0;
    all &= z[n - 1] == 0;
    printf("calloc(1, %zu) after a dirty block of the same size: zero=%d\n", n, all);
    free(z);
  }
  return 0;
}
