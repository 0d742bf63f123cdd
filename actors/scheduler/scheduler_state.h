// The scheduler's state (actors/scheduler/scheduler.cpp) and the parts of its work that are plain
// bookkeeping over it, apart from the actor's message flow.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/clock.h"
#include "actors/scheduler/scheduler.h"
#include "actors/spawn.h"
#include "engine/schedule/device_mirror.h"
#include "engine/schedule/drafting.h"
#include "engine/schedule/postprocess.h"
#include "engine/schedule/prompt_groups.h"

namespace tandem {

struct seq_info {
  sequence_request req;
  clock_type::time_point enqueued = clock_type::now();
  output_state out;
  // Prompt logprobs: the scores of prompt positions 1 .. prompt_scored, held until its first
  // token batch carries them (a preempted sequence's recomputed chunks score again; only
  // positions past prompt_scored are kept).
  std::vector<output_logprob> prompt_scores;
  uint32_t prompt_scored = 0;
};

struct scheduler_state {
  std::unique_ptr<step_planner> planner;
  device_mirror mirror;
  prompt_groups groups;
  std::unique_ptr<drafting> spec;  // null: no speculative decoding
  cache_manager_actor cache;
  device_worker_actor device;
  drafter_actor drafter;
  std::unordered_map<seq_id, seq_info> seqs;
  uint64_t salt_key = std::random_device{}() * 0x9e3779b97f4a7c15ull ^ std::random_device{}();
  uint64_t model_identity = 0;
  // A disk tier under the prefix cache: a new sequence's prompt is prefetched (the cache
  // manager's prefetch) before it joins the planner. What the cache manager asks of the
  // device for it rides with the next step that runs (a plan may come back empty).
  bool disk_tier = false;
  disk_transfer pending_disk;
  std::function<device_worker_actor()> respawn_device;  // empty: the device is not supervised
  // Token batches for the streamers, sent once the next step is on its way to the device:
  // the streamers' work then overlaps the device's instead of delaying the plan (they share
  // CAF's threads with the cache manager and this actor). Kept in order per streamer.
  std::vector<std::pair<streamer_actor, token_batch>> outbox;
  step_plan_core in_flight;  // the plan the device is running
  bool busy = false;
  clock_type::time_point kicked;      // when planning of the current step began
  clock_type::time_point dispatched;  // when it went to the device
  uint32_t block_size = 16;
  uint32_t capacity = 0;  // tokens the KV pool holds
  clock_type::time_point epoch = clock_type::now();  // the planner's clock counts from here
  scheduler_stats stats;
  static inline const char* name = "tandem.scheduler";

  double now_ms() const { return ms_since(epoch); }
  // Moves the planner's clock to now (ageing, deadlines).
  void tick() { planner->set_now(now_ms()); }
  // Hands sequence id's prompt to the planner, under its prefix-cache salt (engine/kv/cache_salt.h).
  void add_to_planner(seq_id id);
  // That salt; a sequence that scores its prompt has one of its own (scores_prompt).
  uint64_t salt_of(seq_id id) const;
  bool scores_prompt(seq_id id) const { return seqs.at(id).req.sampling.prompt_logprobs >= 0; }
  // The plan as a change to what the device holds (engine/schedule/device_mirror.h); marks
  // each planned sequence's output state.
  device_step device_step_of(step_plan_core& plan);
  // The final batch of a request the scheduler cannot take (a duplicate id, an empty prompt,
  // or a prompt the KV pool cannot hold, which the error names).
  token_batch refusal(const sequence_request& req) const;
  // A request with x-slo-reject whose TTFT target the planner predicts it would miss: the
  // 503 that says so (finished batch); nullopt when it is taken.
  std::optional<token_batch> slo_refusal(const sequence_request& req) const;
};

}  // namespace tandem
