#ifndef CCOMMANDLINE_H
#define CCOMMANDLINE_H
/* argc and argv for the Swift runtime, as glibc hands them to the executable's initialisers
   (command_line.c). Nothing to call: linking the target is what it does. */
#endif
