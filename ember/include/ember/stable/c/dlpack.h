/* The DLPack tensor layout (https://github.com/dmlc/dlpack, v0.8 ABI) that an ember stable
 * tensor handle holds underneath.  Written here, not copied, with DLPack's field order and
 * enum values so a DLTensor from ember_stable_get_dlpack can be handed to DLPack consumers. */
#ifndef EMBER_STABLE_C_DLPACK_H
#define EMBER_STABLE_C_DLPACK_H
#include <stdint.h>

#ifndef DLPACK_VERSION
typedef enum { kDLCPU = 1 } DLDeviceType;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef enum { kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLOpaqueHandle = 3U,
               kDLBfloat = 4U, kDLComplex = 5U, kDLBool = 6U } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data;           /* base of the storage; the first element is at data + byte_offset */
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;     /* in elements, never NULL for an ember handle */
  uint64_t byte_offset;
} DLTensor;
#endif

#endif
