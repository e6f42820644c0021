/*
 * tiny_runtime.c — the smallest honest implementation of the kpdr ABI
 * (csrc/runtime/kpdr.h); tests plug it into kernel_pytorch to prove that the
 * header is the only contract. "TinyChip": 3 devices of 1 GiB, host
 * addressable, fully synchronous (copies happen inside kpdrMemcpyAsync, events
 * timestamp when recorded), so streams are always idle and events complete.
 * One kernel of the optional table, a float32 silu, shows a chip bringing its
 * own kernels: other dtypes answer KPDR_ERROR_NOT_SUPPORTED and other ops are
 * absent, so kernel_pytorch runs those through its CPU fallback.
 * Build: cc -shared -fPIC -I csrc/runtime tiny_runtime.c -o libtinychip.so
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "kpdr.h"

#define TINY_DEVICES 3
#define TINY_CAPACITY ((size_t)1 << 30)
#define TINY_HOST (-1) /* owner of kpdrMallocHost memory */
#define TRY(call) do { kpdrError_t error_ = (call); if (error_) return error_; } while (0)

struct Allocation { char* base; size_t size; int device; struct Allocation* next; };
/* Streams and events are kept in lists so a destroyed or foreign handle is an
 * error (KPDR_ERROR_INVALID_HANDLE), not a use after free. */
struct kpdrStream_st { int device; int priority; struct kpdrStream_st* next; };
struct kpdrEvent_st { int device; unsigned flags; int recorded; double ms; struct kpdrEvent_st* next; };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the allocation state below */
static atomic_int g_initialized;
static size_t g_used[TINY_DEVICES];
static struct Allocation* g_allocations;
static struct kpdrStream_st* g_streams;
static struct kpdrEvent_st* g_events;
static _Thread_local char g_message[256];

static kpdrError_t fail(kpdrError_t code, const char* message) {
  snprintf(g_message, sizeof(g_message), "%s", message);
  return code;
}

static kpdrError_t check_init(void) {
  return g_initialized ? KPDR_SUCCESS : fail(KPDR_ERROR_NOT_INITIALIZED, "call kpdrInit first");
}

static kpdrError_t check_device(int device) {
  if (!g_initialized) return check_init();
  if (device < 0 || device >= TINY_DEVICES)
    return fail(KPDR_ERROR_INVALID_DEVICE, "TinyChip has devices 0..2");
  return KPDR_SUCCESS;
}

static kpdrError_t check_stream(kpdrStream_t stream) {
  TRY(check_init());
  if (stream == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "stream is NULL");
  pthread_mutex_lock(&g_lock);
  struct kpdrStream_st* s = g_streams;
  while (s && s != stream) s = s->next;
  pthread_mutex_unlock(&g_lock);
  return s ? KPDR_SUCCESS : fail(KPDR_ERROR_INVALID_HANDLE, "not a live TinyChip stream (destroyed?)");
}

static kpdrError_t check_event(kpdrEvent_t event) {
  TRY(check_init());
  if (event == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "event is NULL");
  pthread_mutex_lock(&g_lock);
  struct kpdrEvent_st* e = g_events;
  while (e && e != event) e = e->next;
  pthread_mutex_unlock(&g_lock);
  return e ? KPDR_SUCCESS : fail(KPDR_ERROR_INVALID_HANDLE, "not a live TinyChip event (destroyed?)");
}

/* The allocation containing [p, p+size), or NULL. Caller holds g_lock. */
static struct Allocation* find(const void* p, size_t size) {
  for (struct Allocation* a = g_allocations; a; a = a->next)
    if ((const char*)p >= a->base && (const char*)p + size <= a->base + a->size) return a;
  return NULL;
}

static kpdrError_t add(int device, void** ptr, size_t size) {
  if (ptr == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "ptr is NULL");
  *ptr = NULL;
  if (size == 0) return KPDR_SUCCESS; /* size 0 gives NULL, like the reference runtime */
  struct Allocation* a = malloc(sizeof(*a));
  void* base = NULL;
  if (a == NULL || posix_memalign(&base, 64, size) != 0) {
    free(a);
    return fail(KPDR_ERROR_OUT_OF_MEMORY, "host malloc failed");
  }
  a->base = base, a->size = size, a->device = device;
  pthread_mutex_lock(&g_lock);
  if (device != TINY_HOST && size > TINY_CAPACITY - g_used[device]) {
    pthread_mutex_unlock(&g_lock);
    free(base); free(a);
    return fail(KPDR_ERROR_OUT_OF_MEMORY, "TinyChip device has less free memory than requested");
  }
  if (device != TINY_HOST) g_used[device] += size;
  a->next = g_allocations; g_allocations = a;
  pthread_mutex_unlock(&g_lock);
  *ptr = base;
  return KPDR_SUCCESS;
}

static kpdrError_t remove_allocation(int device, void* ptr) {
  if (ptr == NULL) return KPDR_SUCCESS;
  pthread_mutex_lock(&g_lock);
  for (struct Allocation** link = &g_allocations; *link; link = &(*link)->next) {
    struct Allocation* a = *link;
    if (a->base != ptr || a->device != device) continue;
    *link = a->next;
    if (device != TINY_HOST) g_used[device] -= a->size;
    pthread_mutex_unlock(&g_lock);
    free(a->base); free(a);
    return KPDR_SUCCESS;
  }
  pthread_mutex_unlock(&g_lock);
  return fail(KPDR_ERROR_INVALID_HANDLE, "pointer is not a live allocation of that device");
}

uint32_t kpdrGetAbiVersion(void) { return KPDR_ABI_VERSION; }
kpdrError_t kpdrInit(const char* options) {
  (void)options; /* TinyChip has nothing to configure */
  if (atomic_exchange(&g_initialized, 1))
    return fail(KPDR_ERROR_ALREADY_INITIALIZED, "kpdrInit was already called");
  return KPDR_SUCCESS;
}

static const char* const kErrorNames[] = {
    "KPDR_SUCCESS", "KPDR_ERROR_INVALID_VALUE", "KPDR_ERROR_INVALID_DEVICE",
    "KPDR_ERROR_OUT_OF_MEMORY", "KPDR_ERROR_NOT_READY", "KPDR_ERROR_NOT_INITIALIZED",
    "KPDR_ERROR_ALREADY_INITIALIZED", "KPDR_ERROR_INVALID_HANDLE", "KPDR_ERROR_NOT_SUPPORTED"};

const char* kpdrGetErrorString(kpdrError_t error) {
  return (unsigned)error < 9 ? kErrorNames[error] : "KPDR_ERROR_UNKNOWN";
}
const char* kpdrGetLastErrorMessage(void) { return g_message; }

kpdrError_t kpdrGetDeviceCount(int* count) {
  if (!g_initialized) return check_init();
  if (count == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "count is NULL");
  *count = TINY_DEVICES;
  return KPDR_SUCCESS;
}

kpdrError_t kpdrGetDeviceProperties(int device, kpdrDeviceProperties* props) {
  TRY(check_device(device));
  if (props == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "props is NULL");
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "TinyChip-%d", device);
  props->total_memory = TINY_CAPACITY;
  props->compute_units = props->host_addressable = 1;
  return KPDR_SUCCESS;
}

kpdrError_t kpdrDeviceSynchronize(int device) { return check_device(device); }
kpdrError_t kpdrMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes) {
  TRY(check_device(device));
  if (!free_bytes || !total_bytes) return fail(KPDR_ERROR_INVALID_VALUE, "NULL output pointer");
  pthread_mutex_lock(&g_lock);
  *free_bytes = TINY_CAPACITY - g_used[device];
  pthread_mutex_unlock(&g_lock);
  *total_bytes = TINY_CAPACITY;
  return KPDR_SUCCESS;
}

kpdrError_t kpdrMalloc(int device, void** ptr, size_t size) {
  TRY(check_device(device));
  return add(device, ptr, size);
}
kpdrError_t kpdrFree(int device, void* ptr) {
  TRY(check_device(device));
  return remove_allocation(device, ptr);
}
kpdrError_t kpdrMallocHost(void** ptr, size_t size) {
  TRY(check_init());
  return add(TINY_HOST, ptr, size);
}
kpdrError_t kpdrFreeHost(void* ptr) {
  TRY(check_init());
  return remove_allocation(TINY_HOST, ptr);
}

kpdrError_t kpdrPointerGetDevice(const void* ptr, int* device) {
  TRY(check_init());
  if (device == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "device is NULL");
  pthread_mutex_lock(&g_lock);
  struct Allocation* a = find(ptr, 1);
  if (a) *device = a->device;
  pthread_mutex_unlock(&g_lock);
  return a ? KPDR_SUCCESS : fail(KPDR_ERROR_INVALID_HANDLE, "pointer is not from this runtime");
}

kpdrError_t kpdrMemcpyAsync(void* dst, const void* src, size_t size, kpdrMemcpyKind kind,
                            kpdrStream_t stream) {
  TRY(check_stream(stream));
  if (kind < KPDR_MEMCPY_HOST_TO_DEVICE || kind > KPDR_MEMCPY_DEVICE_TO_DEVICE)
    return fail(KPDR_ERROR_INVALID_VALUE, "unknown kpdrMemcpyKind");
  if (size == 0) return KPDR_SUCCESS;
  pthread_mutex_lock(&g_lock);
  struct Allocation* d = find(dst, size);
  struct Allocation* s = find(src, size);
  int dst_ok = kind == KPDR_MEMCPY_DEVICE_TO_HOST ? dst != NULL : d && d->device != TINY_HOST;
  int src_ok = kind == KPDR_MEMCPY_HOST_TO_DEVICE ? src != NULL : s && s->device != TINY_HOST;
  /* The stream must belong to a device the copy touches. */
  int on_stream = (d && d->device == stream->device) || (s && s->device == stream->device);
  pthread_mutex_unlock(&g_lock);
  if (!dst_ok || !src_ok)
    return fail(KPDR_ERROR_INVALID_VALUE, "copy range is not device memory of the right kind");
  if (!on_stream)
    return fail(KPDR_ERROR_INVALID_VALUE, "the stream belongs to a device the copy does not touch");
  memmove(dst, src, size); /* synchronous: the stream is idle again on return */
  return KPDR_SUCCESS;
}

kpdrError_t kpdrStreamCreate(int device, int priority, kpdrStream_t* stream) {
  TRY(check_device(device));
  if (stream == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "stream is NULL");
  struct kpdrStream_st* s = malloc(sizeof(*s));
  if (s == NULL) return fail(KPDR_ERROR_OUT_OF_MEMORY, "malloc");
  s->device = device, s->priority = priority;
  pthread_mutex_lock(&g_lock);
  s->next = g_streams, g_streams = s;
  pthread_mutex_unlock(&g_lock);
  *stream = s;
  return KPDR_SUCCESS;
}
kpdrError_t kpdrStreamDestroy(kpdrStream_t stream) {
  TRY(check_init());
  if (stream == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "stream is NULL");
  pthread_mutex_lock(&g_lock);
  struct kpdrStream_st** link = &g_streams;
  while (*link && *link != stream) link = &(*link)->next;
  int found = *link != NULL;
  if (found) *link = stream->next;
  pthread_mutex_unlock(&g_lock);
  if (!found) return fail(KPDR_ERROR_INVALID_HANDLE, "not a live TinyChip stream (destroyed?)");
  free(stream); /* all its work is done: copies ran inside kpdrMemcpyAsync */
  return KPDR_SUCCESS;
}

/* All work finished inside the call that submitted it. */
kpdrError_t kpdrStreamSynchronize(kpdrStream_t stream) { return check_stream(stream); }
kpdrError_t kpdrStreamQuery(kpdrStream_t stream) { return check_stream(stream); }

kpdrError_t kpdrStreamWaitEvent(kpdrStream_t stream, kpdrEvent_t event) {
  TRY(check_stream(stream));
  return check_event(event); /* every recorded event is already complete */
}

kpdrError_t kpdrEventCreate(int device, unsigned int flags, kpdrEvent_t* event) {
  TRY(check_device(device));
  if (event == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "event is NULL");
  if (flags & ~KPDR_EVENT_DISABLE_TIMING) return fail(KPDR_ERROR_INVALID_VALUE, "unknown event flag bits");
  struct kpdrEvent_st* e = calloc(1, sizeof(*e));
  if (e == NULL) return fail(KPDR_ERROR_OUT_OF_MEMORY, "calloc");
  e->device = device, e->flags = flags;
  pthread_mutex_lock(&g_lock);
  e->next = g_events, g_events = e;
  pthread_mutex_unlock(&g_lock);
  *event = e;
  return KPDR_SUCCESS;
}
kpdrError_t kpdrEventDestroy(kpdrEvent_t event) {
  TRY(check_init());
  if (event == NULL) return fail(KPDR_ERROR_INVALID_VALUE, "event is NULL");
  pthread_mutex_lock(&g_lock);
  struct kpdrEvent_st** link = &g_events;
  while (*link && *link != event) link = &(*link)->next;
  int found = *link != NULL;
  if (found) *link = event->next;
  pthread_mutex_unlock(&g_lock);
  if (!found) return fail(KPDR_ERROR_INVALID_HANDLE, "not a live TinyChip event (destroyed?)");
  free(event);
  return KPDR_SUCCESS;
}

kpdrError_t kpdrEventRecord(kpdrEvent_t event, kpdrStream_t stream) {
  TRY(check_stream(stream));
  TRY(check_event(event));
  struct timespec now; /* all earlier work on the stream is already done */
  clock_gettime(CLOCK_MONOTONIC, &now);
  event->recorded = 1;
  event->ms = now.tv_sec * 1e3 + now.tv_nsec / 1e6;
  return KPDR_SUCCESS;
}

kpdrError_t kpdrEventQuery(kpdrEvent_t event) { return check_event(event); }
kpdrError_t kpdrEventSynchronize(kpdrEvent_t event) { return check_event(event); }

kpdrError_t kpdrEventElapsedTime(float* ms, kpdrEvent_t start, kpdrEvent_t end) {
  if (!ms) return fail(KPDR_ERROR_INVALID_VALUE, "ms is NULL");
  TRY(check_event(start));
  TRY(check_event(end));
  if ((start->flags | end->flags) & KPDR_EVENT_DISABLE_TIMING)
    return fail(KPDR_ERROR_INVALID_VALUE, "an event was created with KPDR_EVENT_DISABLE_TIMING");
  if (!start->recorded || !end->recorded)
    return fail(KPDR_ERROR_INVALID_VALUE, "an event was never recorded");
  *ms = (float)(end->ms - start->ms);
  return KPDR_SUCCESS;
}

/* --- the optional kernel table: one kernel -------------------------------- */

static kpdrError_t tiny_silu(const kpdrSiluArgs* a, kpdrStream_t stream) {
  if (!a || !stream) return fail(KPDR_ERROR_INVALID_VALUE, "NULL argument");
  if (a->dtype != KPDR_DTYPE_FLOAT32)
    return fail(KPDR_ERROR_NOT_SUPPORTED, "TinyChip's silu handles float32 only");
  /* Synchronous like everything here: the "device" is the host. */
  for (int64_t r = 0; r < a->rows; ++r) {
    const float* x = (const float*)a->x + r * a->x_row_stride;
    float* out = (float*)a->out + r * a->out_row_stride;
    for (int64_t i = 0; i < a->cols; ++i) {
      float s = x[i] / (1.0f + expf(-x[i]));
      out[i] = a->gated ? s * x[a->cols + i] : s;
    }
  }
  return KPDR_SUCCESS;
}

kpdrError_t kpdrGetKernels(kpdrKernelTable* table) {
  if (!table) return fail(KPDR_ERROR_INVALID_VALUE, "table is NULL");
  kpdrKernelTable ours;
  memset(&ours, 0, sizeof(ours));
  ours.struct_size = sizeof(ours);
  ours.silu = tiny_silu;
  size_t size = table->struct_size < sizeof(ours) ? table->struct_size : sizeof(ours);
  memcpy(table, &ours, size);
  table->struct_size = (uint32_t)size;
  return KPDR_SUCCESS;
}
