#ifndef CREADADVICE_H
#define CREADADVICE_H
/* authctl's entry point in a release build (read_advice.c, Package.swift's -e): nothing to
   call from Swift. */
#endif
