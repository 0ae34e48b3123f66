/* The includes of every fused-kernel module, precompiled at install time (toolchain.py). */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <stddef.h>
#include "kernel_support.h"
