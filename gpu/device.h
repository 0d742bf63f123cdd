// The CUDA device boundary: plain C++ (no CUDA headers, no CAF), so actor code and CPU-only
// tests include it without nvcc. Owners of device memory, pinned host memory, streams and
// events; every asynchronous operation names its stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "engine/platform/owned_memory.h"

struct CUstream_st;
struct CUevent_st;

namespace tandem::gpu {

using stream_handle = CUstream_st*;  // cudaStream_t without the CUDA headers
using event_handle = CUevent_st*;

struct cuda_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws cuda_error naming `what` and CUDA's message when code (a cudaError_t) is not 0.
void check_cuda(int code, const char* what);
// Throws when the last launch on this thread failed (cudaGetLastError).
void check_launch(const char* what);

// True when a CUDA device is usable; any CUDA error counts as "no CUDA device".
bool cuda_available();
void select_device(int index);

struct device_memory_info {
  size_t free_bytes = 0, total_bytes = 0;
  int sm_count = 0;
};
device_memory_info memory_info();

// Device memory, freed on destruction. Move-only.
struct device_memory_policy {
  static void* allocate(size_t bytes);  // cudaMalloc; throws cuda_error
  static void release(void* p, size_t bytes) noexcept;
};
using device_buffer = owned_memory<device_memory_policy>;

// Page-locked host memory: the only host memory the hot path copies from or to, so copies
// are truly asynchronous. Move-only.
struct pinned_memory_policy {
  static void* allocate(size_t bytes);  // cudaMallocHost; throws cuda_error
  static void release(void* p, size_t bytes) noexcept;
};
using pinned_buffer = owned_memory<pinned_memory_policy>;

// A non-blocking stream (does not synchronize with the legacy default stream).
class stream {
 public:
  stream();
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  stream_handle handle() const { return s_; }
  void synchronize() const;  // tests and benchmarks only: the worker never blocks on it

 private:
  stream_handle s_ = nullptr;
};

class event {
 public:
  explicit event(bool timing = false);
  ~event();
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  event_handle handle() const { return e_; }
  void record(stream_handle s);
  bool ready() const;                     // cudaEventQuery: never blocks
  void make_wait(stream_handle s) const;  // s waits for this event (cross-stream order)
  void synchronize() const;
  // Milliseconds between two recorded timing events.
  static float elapsed_ms(const event& start, const event& end);

 private:
  event_handle e_ = nullptr;
};

void copy_to_device_async(void* dst, const void* src, size_t bytes, stream_handle s);
void copy_to_host_async(void* dst, const void* src, size_t bytes, stream_handle s);
void copy_on_device_async(void* dst, const void* src, size_t bytes, stream_handle s);
void fill_bytes_async(void* dst, int value, size_t bytes, stream_handle s);

// Runs fn(user) on CUDA's callback thread once everything enqueued before it on `s` is
// done. fn must not call CUDA; the GPU worker uses it to send itself a message.
void launch_host_callback(stream_handle s, void (*fn)(void*), void* user);

}  // namespace tandem::gpu
