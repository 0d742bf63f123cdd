// CUDA graphs at the device boundary (plain C++, no CUDA headers): a decode step's kernels
// captured once from a stream and replayed with one launch. What a graph may bake in (the
// plan: gpu/plan/graph_policy.h, gpu/plan/graph_cache.h) is the caller's business.
#pragma once

#include <functional>

#include "gpu/device.h"

namespace tandem::gpu {

class cuda_graph {
 public:
  cuda_graph() = default;
  ~cuda_graph();
  cuda_graph(cuda_graph&& o) noexcept : exec_(o.exec_) { o.exec_ = nullptr; }
  cuda_graph& operator=(cuda_graph&& o) noexcept;
  cuda_graph(const cuda_graph&) = delete;
  cuda_graph& operator=(const cuda_graph&) = delete;

  // Records what `enqueue` puts on `s` into a graph instead of running it (thread-local
  // capture: other threads' CUDA calls are unaffected). If enqueue throws or the capture
  // fails, the capture is ended, `s` is usable again and the error propagates.
  static cuda_graph capture(stream_handle s, const std::function<void()>& enqueue);
  // Enqueues the whole graph on `s`, after what is already there.
  void launch(stream_handle s) const;
  explicit operator bool() const { return exec_ != nullptr; }

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
};

}  // namespace tandem::gpu
