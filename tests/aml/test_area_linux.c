/* AML's linux area (aml/area/linux.h) on memarea's host NUMA memory: its declarations, the
 * ready-made area, every policy, creation's refusals, mmap without binding, mbind and
 * check_binding, fprintf, and a custom area over it. What the kernel says is the ground truth
 * (linux_util.h). The mmap options and munmap's refusals: test_area_linux_options.c. */
#include <aml.h>
#include <aml/area/linux.h>
#include <memarea/memarea.h>

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "linux_util.h"


/* --- Tests --------------------------------------------------------------------------------- */

static void test_declarations(void) {
  CHECK_EQ(AML_AREA_LINUX_POLICY_DEFAULT, 0);
  CHECK_EQ(AML_AREA_LINUX_POLICY_BIND, 1);
  CHECK_EQ(AML_AREA_LINUX_POLICY_PREFERRED, 2);
  CHECK_EQ(AML_AREA_LINUX_POLICY_INTERLEAVE, 3);
  CHECK_EQ(offsetof(struct aml_area_linux_data, nodeset), 0);
  CHECK_EQ(offsetof(struct aml_area_linux_mmap_options, ptr), 0);
  CHECK(offsetof(struct aml_area_linux_mmap_options, flags) <
        offsetof(struct aml_area_linux_mmap_options, mode));
  CHECK(offsetof(struct aml_area_linux_mmap_options, mode) <
        offsetof(struct aml_area_linux_mmap_options, fd));
  CHECK(offsetof(struct aml_area_linux_mmap_options, fd) <
        offsetof(struct aml_area_linux_mmap_options, offset));
  CHECK(aml_area_linux.ops == &aml_area_linux_ops);
  CHECK(aml_area_linux_ops.mmap != NULL && aml_area_linux_ops.munmap != NULL &&
        aml_area_linux_ops.fprintf != NULL);
  const struct aml_area_linux_data *d = (const struct aml_area_linux_data *)aml_area_linux.data;
  REQUIRE(d != NULL);
  CHECK(d->nodeset == NULL);
  CHECK_EQ(d->policy, AML_AREA_LINUX_POLICY_DEFAULT);
  CHECK_EQ(aml_support_backends(AML_BACKEND_LIBNUMA), 1);
}

/** The ready-made area: memarea host memory, default policy, every size. */
static void test_default_area(void) {
  const size_t sizes[] = {1, 4096, 3 * 4096 + 5, (1u << 20) + 3};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; ++k) {
    const size_t n = sizes[k];
    void *p = aml_area_mmap(&aml_area_linux, n, NULL);
    REQUIRE(p != NULL);
    CHECK_EQ((uintptr_t)p % page, 0);
    CHECK(untouched(p, n));
    CHECK(pages_have_policy(p, n, K_DEFAULT, NULL));
    CHECK(memarea_host_memory(p, n));
    CHECK(write_read_random(p, n, 0x1234 + k));
    CHECK(pages_on(p, n, &allowed));
    CHECK_EQ(aml_area_linux_check_binding((struct aml_area_linux_data *)aml_area_linux.data, p,
                                          n),
             1);
    CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n), AML_SUCCESS);
    CHECK(unknown_to_memarea(p));
  }
  /* size 0 and NULL through the generic calls, as AML */
  CHECK(aml_area_mmap(&aml_area_linux, 0, NULL) == NULL);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, NULL, 10), AML_SUCCESS);
}

/** Every policy over the allowed set and over each allowed node alone: the kernel holds the
 *  policy on every page before any is touched, the pages land on the set, the data survives,
 *  and memarea's copies and managed-memory calls take the memory. */
static void check_area(const struct aml_bitmap *nodemask, enum aml_area_linux_policy policy) {
  const struct aml_bitmap *set = nodemask ? nodemask : &allowed;
  struct aml_area *area = (struct aml_area *)0x1;
  REQUIRE(aml_area_linux_create(&area, nodemask, policy) == AML_SUCCESS);
  REQUIRE(area != NULL && area != (struct aml_area *)0x1);
  CHECK(area->ops == &aml_area_linux_ops);
  struct aml_area_linux_data *data = (struct aml_area_linux_data *)area->data;
  REQUIRE(data != NULL && data->nodeset != NULL);
  CHECK_EQ(data->policy, policy);
  /* the data's libnuma node set holds exactly the chosen nodes */
  struct aml_bitmap held;
  aml_bitmap_zero(&held);
  aml_bitmap_copy_from_ulong(&held, data->nodeset->maskp, data->nodeset->size);
  CHECK_EQ(aml_bitmap_isequal(&held, set), 1);

  const size_t sizes[] = {3 * 4096 + 5, (1u << 20) + 3};
  for (size_t k = 0; k < 2; ++k) {
    const size_t n = sizes[k];
    void *p = aml_area_mmap(area, n, NULL);
    REQUIRE(p != NULL);
    CHECK(untouched(p, n));
    CHECK(has_area_policy(p, n, policy, set));
    CHECK(memarea_host_memory(p, n));
    CHECK(write_read_random(p, n, 77 + k + 10 * (unsigned)policy));
    CHECK(pages_on(p, n, policy == AML_AREA_LINUX_POLICY_DEFAULT ? &allowed : set));
    CHECK(has_area_policy(p, n, policy, set)); /* touching does not change it */
    CHECK_EQ(aml_area_linux_check_binding(data, p, n), 1);

    /* memarea copies it, both ways */
    unsigned char *copy = malloc(n);
    REQUIRE(copy != NULL);
    CHECK_EQ(memarea_memcpy(copy, p, n), MEMAREA_SUCCESS);
    CHECK(memcmp(copy, p, n) == 0);
    memset(copy, 0x5c, n);
    CHECK_EQ(memarea_memcpy(p, copy, n), MEMAREA_SUCCESS);
    CHECK(memcmp(copy, p, n) == 0);
    free(copy);

    /* managed-memory advice: preferring a node changes the policy, unset puts the area's back */
    const int node = aml_bitmap_first(set);
    CHECK_EQ(memarea_mem_advise_host_numa(p, n, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, node),
             MEMAREA_SUCCESS);
    struct aml_bitmap one;
    aml_bitmap_zero(&one);
    aml_bitmap_set(&one, (unsigned)node);
    CHECK(pages_have_policy(p, n, K_PREFERRED, &one));
    CHECK_EQ(memarea_mem_advise_host_numa(p, n, MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
                                          node),
             MEMAREA_SUCCESS);
    CHECK(has_area_policy(p, n, policy, set));
    CHECK_EQ(memarea_mem_prefetch_host_numa_async(p, n, node, NULL), MEMAREA_SUCCESS);
    CHECK(pages_on(p, n, &one));

    CHECK_EQ(aml_area_munmap(area, p, n), AML_SUCCESS);
    CHECK(unknown_to_memarea(p));
  }
  aml_area_linux_destroy(&area);
  CHECK(area == NULL);
}

static void test_policies(void) {
  const enum aml_area_linux_policy policies[] = {
      AML_AREA_LINUX_POLICY_DEFAULT, AML_AREA_LINUX_POLICY_BIND, AML_AREA_LINUX_POLICY_PREFERRED,
      AML_AREA_LINUX_POLICY_INTERLEAVE};
  for (int k = 0; k < 4; ++k) {
    check_area(NULL, policies[k]);
    check_area(&allowed, policies[k]);
    int tried = 0;
    for (int n = aml_bitmap_first(&allowed); n >= 0 && n < AML_BITMAP_MAX && tried < 4; ++n) {
      if (aml_bitmap_isset(&allowed, (unsigned)n) != 1) continue;
      struct aml_bitmap one;
      aml_bitmap_zero(&one);
      aml_bitmap_set(&one, (unsigned)n);
      check_area(&one, policies[k]);
      ++tried;
    }
  }
}

static void test_create_errors(void) {
  struct aml_area *area = (struct aml_area *)0x1;
  struct aml_bitmap mask;

  /* a node outside the allowed set: -AML_EDOM, also with allowed nodes beside it */
  aml_bitmap_zero(&mask);
  aml_bitmap_set(&mask, node_outside_allowed());
  CHECK_EQ(aml_area_linux_create(&area, &mask, AML_AREA_LINUX_POLICY_BIND), -AML_EDOM);
  CHECK(area == NULL);
  aml_bitmap_copy(&mask, &allowed);
  aml_bitmap_set(&mask, AML_BITMAP_MAX - 1);
  area = (struct aml_area *)0x1;
  CHECK_EQ(aml_area_linux_create(&area, &mask, AML_AREA_LINUX_POLICY_INTERLEAVE), -AML_EDOM);
  CHECK(area == NULL);

  /* no node, no area pointer, policies that do not exist */
  aml_bitmap_zero(&mask);
  CHECK_EQ(aml_area_linux_create(&area, &mask, AML_AREA_LINUX_POLICY_BIND), -AML_EINVAL);
  CHECK(area == NULL);
  CHECK_EQ(aml_area_linux_create(NULL, NULL, AML_AREA_LINUX_POLICY_BIND), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_create(&area, NULL, (enum aml_area_linux_policy)4), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_create(&area, NULL, (enum aml_area_linux_policy)-1), -AML_EINVAL);
  CHECK(area == NULL);

  /* destroy tolerates NULL, and never frees the ready-made area */
  aml_area_linux_destroy(NULL);
  area = NULL;
  aml_area_linux_destroy(&area);
  struct aml_area *ready = &aml_area_linux;
  aml_area_linux_destroy(&ready);
  CHECK(ready == NULL);
  CHECK(aml_area_linux.ops == &aml_area_linux_ops);

  /* a data whose policy is garbage cannot map */
  struct aml_area_linux_data bad = {NULL, (enum aml_area_linux_policy)9};
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_linux_ops.mmap((struct aml_area_data *)&bad, page, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_linux_ops.mmap(NULL, page, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
}

/** aml_area_linux_mmap maps without any policy, whatever the area's data says. */
static void test_mmap_without_binding(void) {
  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, NULL, AML_AREA_LINUX_POLICY_BIND) == AML_SUCCESS);
  void *p = aml_area_linux_mmap(area->data, 2 * page, NULL);
  REQUIRE(p != NULL);
  CHECK(pages_have_policy(p, 2 * page, K_DEFAULT, NULL));
  CHECK(memarea_host_memory(p, 2 * page));
  CHECK_EQ(aml_area_linux_check_binding((struct aml_area_linux_data *)area->data, p, 2 * page),
           0);
  CHECK_EQ(aml_area_linux_munmap(area->data, p, 2 * page), AML_SUCCESS);
  aml_errno = AML_SUCCESS;
  CHECK(aml_area_linux_mmap(NULL, 0, NULL) == NULL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  aml_area_linux_destroy(&area);
}

/** mbind and check_binding: true and false cases, ranges split in two, bad arguments. */
static void test_mbind_and_check_binding(void) {
  const size_t n = 4 * page;
  char *p = aml_area_mmap(&aml_area_linux, n, NULL);
  REQUIRE(p != NULL);
  struct aml_area_linux_data bind = {NULL, AML_AREA_LINUX_POLICY_BIND};
  struct aml_area_linux_data interleave = {NULL, AML_AREA_LINUX_POLICY_INTERLEAVE};
  struct aml_area_linux_data preferred = {NULL, AML_AREA_LINUX_POLICY_PREFERRED};
  struct aml_area_linux_data deflt = {NULL, AML_AREA_LINUX_POLICY_DEFAULT};

  CHECK_EQ(aml_area_linux_check_binding(&deflt, p, n), 1);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&interleave, p, n), 0);

  CHECK_EQ(aml_area_linux_mbind(&bind, p, n), AML_SUCCESS);
  CHECK(pages_have_policy(p, n, K_BIND, &allowed));
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 1);
  CHECK_EQ(aml_area_linux_check_binding(&deflt, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&interleave, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&preferred, p, n), 0);

  /* the last page differs: the whole range no longer matches, the first three still do */
  CHECK_EQ(aml_area_linux_mbind(&interleave, p + 3 * page, page), AML_SUCCESS);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, 3 * page), 1);
  CHECK_EQ(aml_area_linux_check_binding(&interleave, p + 3 * page, 1), 1);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p + 3 * page - 1, 2), 0);

  /* preferred over one node */
  struct aml_bitmap first_node;
  aml_bitmap_zero(&first_node);
  aml_bitmap_set(&first_node, (unsigned)aml_bitmap_first(&allowed));
  CHECK_EQ(aml_area_linux_mbind(&preferred, p, n), AML_SUCCESS);
  CHECK(has_area_policy(p, n, AML_AREA_LINUX_POLICY_PREFERRED, &allowed));
  CHECK_EQ(aml_area_linux_check_binding(&preferred, p, n), 1);
  CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);

  /* DEFAULT resets the policy (AML's mbind passed a node set with MPOL_DEFAULT: EINVAL) */
  CHECK_EQ(aml_area_linux_mbind(&deflt, p, n), AML_SUCCESS);
  CHECK(pages_have_policy(p, n, K_DEFAULT, NULL));
  CHECK_EQ(aml_area_linux_check_binding(&deflt, p, n), 1);

  /* a data whose node set is a created area's (libnuma's struct bitmask) */
  struct aml_area *area = NULL;
  REQUIRE(aml_area_linux_create(&area, &first_node, AML_AREA_LINUX_POLICY_BIND) ==
          AML_SUCCESS);
  struct aml_area_linux_data *ad = (struct aml_area_linux_data *)area->data;
  CHECK_EQ(aml_area_linux_mbind(ad, p, n), AML_SUCCESS);
  CHECK(pages_have_policy(p, n, K_BIND, &first_node));
  CHECK_EQ(aml_area_linux_check_binding(ad, p, n), 1);
  if (allowed_count > 1) { /* the whole allowed set is not the first node alone */
    CHECK_EQ(aml_area_linux_check_binding(&bind, p, n), 0);
  }

  /* the data survives: touching does not change the binding */
  CHECK(write_read_random(p, n, 3));
  CHECK_EQ(aml_area_linux_check_binding(ad, p, n), 1);
  CHECK(pages_on(p, n, &first_node));

  /* bad arguments change nothing and set aml_errno */
  aml_errno = AML_SUCCESS;
  CHECK_EQ(aml_area_linux_mbind(NULL, p, n), -AML_EINVAL);
  CHECK_EQ(aml_errno, AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, NULL, n), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, p, 0), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, p + 1, page), -AML_EINVAL); /* not page-aligned */
  struct aml_area_linux_data garbage = {NULL, (enum aml_area_linux_policy)7};
  CHECK_EQ(aml_area_linux_mbind(&garbage, p, n), -AML_EINVAL);
  CHECK(pages_have_policy(p, n, K_BIND, &first_node));

  CHECK_EQ(aml_area_linux_check_binding(NULL, p, n), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_check_binding(ad, NULL, n), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_check_binding(ad, p, 0), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_check_binding(&garbage, p, n), -AML_EINVAL);

  aml_area_linux_destroy(&area);
  CHECK_EQ(aml_area_munmap(&aml_area_linux, p, n), AML_SUCCESS);

  /* an unmapped range */
  char *gone = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(gone != MAP_FAILED);
  REQUIRE(munmap(gone, page) == 0);
  CHECK_EQ(aml_area_linux_check_binding(&deflt, gone, page), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_mbind(&bind, gone, page), -AML_EINVAL);
}

/** Reads what fprintf wrote to a memory stream. */
static char *printed(const struct aml_area *area, const char *prefix, int *rc) {
  char *text = NULL;
  size_t len = 0;
  FILE *stream = open_memstream(&text, &len);
  REQUIRE(stream != NULL);
  *rc = aml_area_fprintf(stream, prefix, area);
  fclose(stream);
  return text;
}

static int count_lines(const char *text) {
  int lines = 0;
  for (const char *c = text; *c; ++c) lines += *c == '\n';
  return lines;
}

static void test_fprintf(void) {
  int rc = -1;
  char *text = printed(&aml_area_linux, "dflt", &rc);
  CHECK_EQ(rc, AML_SUCCESS);
  REQUIRE(text != NULL);
  CHECK(strstr(text, "dflt: area-linux: ") == text);
  CHECK(strstr(text, "\ndflt: bitmask: 0x0\n") != NULL);
  CHECK(strstr(text, "\ndflt: policy: default\n") != NULL);
  CHECK_EQ(count_lines(text), 3);
  CHECK_EQ(text[strlen(text) - 1], '\n');
  free(text);

  struct aml_area *area = NULL;
  struct aml_bitmap first_node;
  aml_bitmap_zero(&first_node);
  aml_bitmap_set(&first_node, (unsigned)aml_bitmap_first(&allowed));
  REQUIRE(aml_area_linux_create(&area, &first_node, AML_AREA_LINUX_POLICY_INTERLEAVE) ==
          AML_SUCCESS);
  text = printed(area, "mine", &rc);
  CHECK_EQ(rc, AML_SUCCESS);
  REQUIRE(text != NULL);
  char expected[128];
  snprintf(expected, sizeof expected, "mine: area-linux: %p\n", (void *)area->data);
  CHECK(strstr(text, expected) == text);
  snprintf(expected, sizeof expected, "\nmine: bitmask: size: %lu\n",
           ((struct aml_area_linux_data *)area->data)->nodeset->size);
  CHECK(strstr(text, expected) != NULL);
  CHECK(strstr(text, "\nmine: bitmask: maskp: ") != NULL);
  CHECK(strstr(text, "\nmine: policy: interleave\n") != NULL);
  CHECK_EQ(count_lines(text), 4); /* each item on its own line */
  free(text);

  /* NULL prefix prints as "", NULL stream is refused */
  text = printed(area, NULL, &rc);
  CHECK_EQ(rc, AML_SUCCESS);
  REQUIRE(text != NULL);
  CHECK(strstr(text, ": area-linux: ") == text);
  free(text);
  CHECK_EQ(aml_area_fprintf(NULL, "x", area), -AML_EINVAL);
  CHECK_EQ(aml_area_linux_fprintf(area->data, NULL, "x"), -AML_EINVAL);
  aml_area_linux_destroy(&area);
}

/* --- A custom area wrapping the linux area, as AML's first area tutorial builds one -------- */

struct counting_data {
  struct aml_area *inner; /* the linux area that places the pages */
  int maps, unmaps;
};

static void *counting_mmap(const struct aml_area_data *data, size_t size,
                           struct aml_area_mmap_options *opts) {
  struct counting_data *d = (struct counting_data *)data;
  ++d->maps;
  return d->inner->ops->mmap(d->inner->data, size, opts);
}

static int counting_munmap(const struct aml_area_data *data, void *ptr, size_t size) {
  struct counting_data *d = (struct counting_data *)data;
  ++d->unmaps;
  return d->inner->ops->munmap(d->inner->data, ptr, size);
}

static void test_custom_area(void) {
  struct aml_area *custom =
      AML_INNER_MALLOC(struct aml_area, struct aml_area_ops, struct counting_data);
  REQUIRE(custom != NULL);
  custom->ops = AML_INNER_MALLOC_GET_FIELD(custom, 2, struct aml_area, struct aml_area_ops,
                                           struct counting_data);
  custom->data = AML_INNER_MALLOC_GET_FIELD(custom, 3, struct aml_area, struct aml_area_ops,
                                            struct counting_data);
  /* the fields are where a struct would put them, zeroed, and apart from each other */
  CHECK((char *)custom->ops >= (char *)custom + sizeof(struct aml_area));
  CHECK((uintptr_t)custom->ops % sizeof(void *) == 0);
  CHECK((char *)custom->data >= (char *)custom->ops + sizeof(struct aml_area_ops));
  CHECK(custom->ops->mmap == NULL && custom->ops->fprintf == NULL);
  struct counting_data *d = (struct counting_data *)custom->data;
  CHECK(d->inner == NULL && d->maps == 0);

  custom->ops->mmap = counting_mmap;
  custom->ops->munmap = counting_munmap;
  REQUIRE(aml_area_linux_create(&d->inner, NULL, AML_AREA_LINUX_POLICY_INTERLEAVE) ==
          AML_SUCCESS);

  const size_t n = 16 * page;
  void *p = aml_area_mmap(custom, n, NULL);
  REQUIRE(p != NULL);
  CHECK_EQ(d->maps, 1);
  CHECK(untouched(p, n));
  CHECK(pages_have_policy(p, n, K_INTERLEAVE, &allowed));
  CHECK(memarea_host_memory(p, n));
  CHECK(write_read_random(p, n, 11));
  CHECK(pages_on(p, n, &allowed));
  CHECK_EQ(aml_area_fprintf(stdout, "custom", custom), -AML_ENOTSUP); /* no fprintf op */
  CHECK_EQ(aml_area_munmap(custom, p, n), AML_SUCCESS);
  CHECK_EQ(d->unmaps, 1);
  aml_area_linux_destroy(&d->inner);
  free(custom);
}

int main(void) {
  REQUIRE(aml_init(NULL, NULL) == AML_SUCCESS);
  linux_util_init();
  test_declarations();
  test_default_area();
  test_policies();
  test_create_errors();
  test_mmap_without_binding();
  test_mbind_and_check_binding();
  test_fprintf();
  test_custom_area();
  aml_finalize();
  return check_report("test_area_linux");
}
