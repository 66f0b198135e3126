/* The one translation unit that compiles volk's implementation. */
#define VOLK_IMPLEMENTATION
#include <volk.h>
