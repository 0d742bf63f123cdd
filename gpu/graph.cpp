#include "gpu/graph.h"

#include <cuda_runtime.h>

namespace tandem::gpu {

cuda_graph::~cuda_graph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

cuda_graph& cuda_graph::operator=(cuda_graph&& o) noexcept {
  if (this != &o) {
    if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    exec_ = o.exec_;
    o.exec_ = nullptr;
  }
  return *this;
}

cuda_graph cuda_graph::capture(stream_handle s, const std::function<void()>& enqueue) {
  check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    (void)cudaStreamEndCapture(s, &graph);  // leaves the stream out of capture mode
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  check_cuda(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(err, "cudaGraphInstantiate");
  cuda_graph g;
  g.exec_ = exec;
  return g;
}

void cuda_graph::launch(stream_handle s) const {
  check_cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), s), "cudaGraphLaunch");
}

}  // namespace tandem::gpu
