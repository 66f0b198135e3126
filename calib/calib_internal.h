/* Shared between the calib/ sources. */
#ifndef VKV_CALIB_INTERNAL_H
#define VKV_CALIB_INTERNAL_H

#include "calib/calib.h"

/* A calibration with its arrays allocated (maps zero, report NaN). */
vkv_calib *vkv_calib_alloc(const vkv_calib_identity *id);

#endif
