/*
 * kpdr.h — the kernel_pytorch Device Runtime ABI.
 *
 * This is the whole contract between kernel_pytorch's PyTorch integration
 * (csrc/aten) and a chip vendor's runtime. A vendor ships a shared library
 * exporting these C symbols; kernel_pytorch loads it with dlopen and never
 * talks to the hardware any other way.
 *
 * Conventions
 *  - Every call returns kpdrError_t; KPDR_SUCCESS is 0. On failure the
 *    runtime should leave a human readable detail for the calling thread in
 *    kpdrGetLastErrorMessage() (e.g. "requested 2.0 GiB, 1.5 GiB free").
 *  - Devices are numbered 0 .. count-1. All device work is asynchronous and
 *    goes through streams; a stream executes its work in submission order.
 *  - Every call is thread safe. No call may call back into Python.
 *  - The runtime is initialised once with kpdrInit(); every other call except
 *    kpdrGetAbiVersion, kpdrGetErrorString and kpdrGetLastErrorMessage
 *    returns KPDR_ERROR_NOT_INITIALIZED before that.
 */
#ifndef KPDR_H_
#define KPDR_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change; the loader refuses other versions. */
#define KPDR_ABI_VERSION 1

#if defined(_WIN32)
#define KPDR_API __declspec(dllexport)
#else
#define KPDR_API __attribute__((visibility("default")))
#endif

typedef enum kpdrError {
  KPDR_SUCCESS = 0,
  KPDR_ERROR_INVALID_VALUE = 1,     /* bad argument (null pointer, bad kind) */
  KPDR_ERROR_INVALID_DEVICE = 2,    /* device index out of range */
  KPDR_ERROR_OUT_OF_MEMORY = 3,     /* device capacity exhausted */
  KPDR_ERROR_NOT_READY = 4,         /* stream/event query: work still pending */
  KPDR_ERROR_NOT_INITIALIZED = 5,   /* kpdrInit has not succeeded yet */
  KPDR_ERROR_ALREADY_INITIALIZED = 6, /* kpdrInit called a second time */
  KPDR_ERROR_INVALID_HANDLE = 7,    /* unknown pointer, stream or event */
  KPDR_ERROR_UNKNOWN = 999
} kpdrError_t;

typedef enum kpdrMemcpyKind {
  KPDR_MEMCPY_HOST_TO_DEVICE = 1,
  KPDR_MEMCPY_DEVICE_TO_HOST = 2,
  KPDR_MEMCPY_DEVICE_TO_DEVICE = 3 /* same or different devices */
} kpdrMemcpyKind;

/* Event creation flags. */
#define KPDR_EVENT_DEFAULT 0u
#define KPDR_EVENT_DISABLE_TIMING 1u

typedef struct kpdrStream_st* kpdrStream_t;
typedef struct kpdrEvent_st* kpdrEvent_t;

typedef struct kpdrDeviceProperties {
  char name[256];
  uint64_t total_memory;    /* bytes of device memory (the enforced capacity) */
  int32_t compute_units;    /* cores / SMs / CUs, whatever the chip calls them */
  int32_t host_addressable; /* 1: device pointers may be read and written by
                               host code directly (kernel_pytorch then runs CPU
                               kernels in place); 0: only through kpdrMemcpy* */
  int32_t reserved[16];     /* zero; room for growth without an ABI bump */
} kpdrDeviceProperties;

/* --- version, initialisation, errors ----------------------------------- */
KPDR_API uint32_t kpdrGetAbiVersion(void);
/* options: "key=value" pairs separated by ';' (may be NULL or ""). Keys a
 * runtime does not know are ignored. The reference runtime understands
 * device_count, memory_mb, names (comma separated), host_addressable,
 * compute_units and copy_bandwidth_gbps (docs/device_runtime_abi.md). */
KPDR_API kpdrError_t kpdrInit(const char* options);
KPDR_API const char* kpdrGetErrorString(kpdrError_t error);
KPDR_API const char* kpdrGetLastErrorMessage(void);

/* --- devices ------------------------------------------------------------- */
KPDR_API kpdrError_t kpdrGetDeviceCount(int* count);
KPDR_API kpdrError_t kpdrGetDeviceProperties(int device, kpdrDeviceProperties* props);
/* Waits for all work on every stream of the device. */
KPDR_API kpdrError_t kpdrDeviceSynchronize(int device);
KPDR_API kpdrError_t kpdrMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes);

/* --- memory -------------------------------------------------------------- */
KPDR_API kpdrError_t kpdrMalloc(int device, void** ptr, size_t size);
KPDR_API kpdrError_t kpdrFree(int device, void* ptr);
/* Page-locked host memory: usable as the host side of an async copy. */
KPDR_API kpdrError_t kpdrMallocHost(void** ptr, size_t size);
KPDR_API kpdrError_t kpdrFreeHost(void* ptr);
/* Which device owns ptr (any address inside an allocation); -1 for memory
 * from kpdrMallocHost; KPDR_ERROR_INVALID_HANDLE for unknown memory. */
KPDR_API kpdrError_t kpdrPointerGetDevice(const void* ptr, int* device);
/* Enqueues a copy on stream. For DEVICE_TO_DEVICE across devices, stream
 * belongs to either device. Host memory not from kpdrMallocHost must stay
 * valid until the stream has finished the copy. */
KPDR_API kpdrError_t kpdrMemcpyAsync(void* dst, const void* src, size_t size,
                                     kpdrMemcpyKind kind, kpdrStream_t stream);

/* --- streams ------------------------------------------------------------- */
/* priority: 0 is the default, lower numbers are higher priority. */
KPDR_API kpdrError_t kpdrStreamCreate(int device, int priority, kpdrStream_t* stream);
KPDR_API kpdrError_t kpdrStreamDestroy(kpdrStream_t stream);
KPDR_API kpdrError_t kpdrStreamSynchronize(kpdrStream_t stream);
/* KPDR_SUCCESS when all submitted work is done, else KPDR_ERROR_NOT_READY. */
KPDR_API kpdrError_t kpdrStreamQuery(kpdrStream_t stream);
/* Work submitted to stream after this call waits until event completes. */
KPDR_API kpdrError_t kpdrStreamWaitEvent(kpdrStream_t stream, kpdrEvent_t event);

/* --- events -------------------------------------------------------------- */
KPDR_API kpdrError_t kpdrEventCreate(int device, unsigned int flags, kpdrEvent_t* event);
KPDR_API kpdrError_t kpdrEventDestroy(kpdrEvent_t event);
/* Captures the work submitted to stream so far; the event completes (and
 * takes its timestamp) when that work is done. Re-recording is allowed. */
KPDR_API kpdrError_t kpdrEventRecord(kpdrEvent_t event, kpdrStream_t stream);
/* KPDR_SUCCESS when complete (or never recorded), else KPDR_ERROR_NOT_READY. */
KPDR_API kpdrError_t kpdrEventQuery(kpdrEvent_t event);
KPDR_API kpdrError_t kpdrEventSynchronize(kpdrEvent_t event);
/* Milliseconds between two completed events created without
 * KPDR_EVENT_DISABLE_TIMING. */
KPDR_API kpdrError_t kpdrEventElapsedTime(float* ms, kpdrEvent_t start, kpdrEvent_t end);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KPDR_H_ */
