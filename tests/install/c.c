/* Uses an installed memarea through pkg-config. */
#include <memarea/memarea.h>
#include <stdio.h>
int main(void) { int n = -1; memarea_status s = memarea_get_device_count(&n); printf("status %d, %d device(s)\n", (int)s, n); return 0; }
