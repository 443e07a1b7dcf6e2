#ifndef AUTHBROKER_WIPE_ON_FREE_H
#define AUTHBROKER_WIPE_ON_FREE_H

/* 1 when the process's free() and realloc() are the ones of wipe_on_free.c (every
   library's calls reach them), 0 when something else resolved first. */
int wipe_on_free_in_effect(void);

#endif
