// The GPU device worker actor: the CPU worker's protocol (device_worker_actor), so the same
// scheduler drives either. It owns one CUDA stream, a gpu_model (weights uploaded once, KV
// pool in device memory) and pinned result buffers. A step is enqueued on the stream and
// ends with a host callback that sends the actor a message: no thread ever waits for the GPU,
// and the reply goes out through a response promise when that message arrives.
//
//   run_step ──▶ enqueue forward + sampling + id/logit copies ──▶ cudaLaunchHostFunc
//                                                                     │ (CUDA's thread)
//   reply ◀── finish: host-side sampling where needed ◀── gpu_done(step id) message
//
// One step is on the stream at a time: the scheduler plans after each result, and a step's
// changes to the sequences it holds (actors/device/device_sequences.h) apply in order.
//
// Sampling: rows whose options the device sampler covers (greedy or temperature, top-k,
// top-p, min-p, logit bias, repetition/frequency/presence penalties, logprobs with up to
// kMaxTopLogprobs alternatives, and the verification of drafted tokens) are sampled on the
// GPU (gpu/device_sampler.h) and only their ids, with the log-probabilities and verdicts
// asked for, come back; rows that follow a grammar copy their logits back and use the host
// sampling the CPU worker uses (actors/device/device_sequences.h, speculative acceptance included).
//
// Decode steps (one token per sequence) run as CUDA graphs unless options.cuda_graphs is
// false (--enforce-eager): gpu_model pads them to a batch bucket and captures or replays
// the input copy and the forward pass per (bucket, block-table width); prefill
// and verification run eagerly. Sampling stays outside the graphs (its inputs change size).
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <memory>

#include "actors/device/device_worker.h"
#include "gpu/plan/kv_dtype.h"
#include "gpu/plan/workspace_plan.h"

namespace tandem {

class model;

struct gpu_worker_options {
  int device = 0;
  double gpu_memory_utilization = 0.9;
  uint32_t n_blocks = 0;  // 0: as many as the memory budget allows
  uint32_t block_size = 16;
  gpu::step_limits limits;
  bool cuda_graphs = true;  // decode steps as CUDA graphs; false: --enforce-eager
  // Rows asking for logprobs or carrying a logit bias are sampled on the device, and drafts
  // are verified there; false sends them through the host sampler instead (the tests
  // compare the two paths).
  bool device_logprobs = true;
  bool device_verification = true;
  // BF16 copies of the quantized matrices for the GEMM of prefill steps (gpu_sizing decides).
  bool bf16_shadow = false;
  gpu::kv_dtype kv_dtype = gpu::kv_dtype::f16;  // --kv-cache-dtype
};

// Spawns the worker (detached: its own thread, so host-side sampling never occupies a CAF
// scheduler thread). The model's weights are read from `m` once, at start-up.
device_worker_actor spawn_gpu_device_worker(caf::actor_system& sys, std::shared_ptr<model> m,
                                            const gpu_worker_options& options);

// For device_factory (--device cuda): spawns the GPU worker with the runtime's KV block
// count and size, the rest from `options`.
std::function<device_worker_actor(caf::actor_system&, std::shared_ptr<model>, uint32_t, uint32_t)>
gpu_device_worker_factory(gpu_worker_options options);

}  // namespace tandem
