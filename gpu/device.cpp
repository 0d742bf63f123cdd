#include "gpu/device.h"

#include <cuda_runtime.h>

#include <utility>

namespace tandem::gpu {

void check_cuda(int code, const char* what) {
  if (code == cudaSuccess) return;
  throw cuda_error(std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(code)));
}

void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

bool cuda_available() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err == cudaSuccess && n > 0;
}

void select_device(int index) { check_cuda(cudaSetDevice(index), "cudaSetDevice"); }

device_memory_info memory_info() {
  device_memory_info m;
  check_cuda(cudaMemGetInfo(&m.free_bytes, &m.total_bytes), "cudaMemGetInfo");
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&m.sm_count, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  return m;
}

void* device_memory_policy::allocate(size_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}
void device_memory_policy::release(void* p, size_t) noexcept { cudaFree(p); }

void* pinned_memory_policy::allocate(size_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}
void pinned_memory_policy::release(void* p, size_t) noexcept { cudaFreeHost(p); }

stream::stream() { check_cuda(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
stream::~stream() {
  if (s_) cudaStreamDestroy(s_);
}
void stream::synchronize() const { check_cuda(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

event::event(bool timing) {
  check_cuda(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming), "cudaEventCreate");
}
event::~event() {
  if (e_) cudaEventDestroy(e_);
}
void event::record(stream_handle s) { check_cuda(cudaEventRecord(e_, s), "cudaEventRecord"); }
bool event::ready() const {
  const cudaError_t err = cudaEventQuery(e_);
  if (err == cudaErrorNotReady) return false;
  check_cuda(err, "cudaEventQuery");
  return true;
}
void event::make_wait(stream_handle s) const { check_cuda(cudaStreamWaitEvent(s, e_, 0), "cudaStreamWaitEvent"); }
void event::synchronize() const { check_cuda(cudaEventSynchronize(e_), "cudaEventSynchronize"); }
float event::elapsed_ms(const event& start, const event& end) {
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start.e_, end.e_), "cudaEventElapsedTime");
  return ms;
}

void copy_to_device_async(void* dst, const void* src, size_t bytes, stream_handle s) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "copy to device");
}
void copy_to_host_async(void* dst, const void* src, size_t bytes, stream_handle s) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "copy to host");
}
void copy_on_device_async(void* dst, const void* src, size_t bytes, stream_handle s) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "copy on device");
}
void fill_bytes_async(void* dst, int value, size_t bytes, stream_handle s) {
  check_cuda(cudaMemsetAsync(dst, value, bytes, s), "cudaMemsetAsync");
}

void launch_host_callback(stream_handle s, void (*fn)(void*), void* user) {
  check_cuda(cudaLaunchHostFunc(s, fn, user), "cudaLaunchHostFunc");
}

}  // namespace tandem::gpu
