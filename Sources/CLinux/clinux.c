#include "clinux.h"
#include <malloc.h>
#include <sys/prctl.h>

int clinux_set_nondumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
int clinux_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
int clinux_malloc_trim(void) { return malloc_trim(0); }
