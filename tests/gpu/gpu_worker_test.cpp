// The GPU device worker actor through its protocol (device_worker_actor), driven by a
// scoped_actor like the scheduler drives it. Skips with "no CUDA device".
#include <gtest/gtest.h>

#include <algorithm>

#include <caf/all.hpp>

#include "actors/atoms.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_model.h"
#include "gpu/worker/gpu_device_worker.h"
#include "tests/gpu/gpu_test_support.h"

namespace tandem {
namespace {

struct fixture {
  std::vector<std::byte> bytes;
  std::shared_ptr<model> m;
  fixture() {
    synthetic_model_spec spec;
    spec.n_embd = 128, spec.n_head = 4, spec.n_head_kv = 2, spec.n_ff = 256, spec.n_vocab = 512;
    bytes = make_synthetic_model(spec).serialize();
    m = std::make_shared<model>(gguf::file::parse(bytes), model_options{2});
  }
};

// The prompt most tests prefill: 17 tokens, two blocks.
const std::vector<token_id> kPrompt = {1, 7, 42, 99, 3, 250, 17, 8, 64, 5, 11, 300, 2, 9, 77, 31, 400};

// A sequence's first step: its tokens and its whole table.
device_seq first(seq_id id, std::vector<token_id> tokens, block_table table, bool sample) {
  device_seq p;
  p.seq = id;
  p.n_new = static_cast<uint32_t>(tokens.size());
  p.new_tokens = std::move(tokens);
  p.delta.new_blocks = std::move(table);
  p.sample = sample;
  return p;
}

// A decode step: the device holds the token it emitted last, and the table is unchanged.
device_seq next(seq_id id, uint32_t pos, uint32_t table_size) {
  device_seq p;
  p.seq = id;
  p.start_pos = pos;
  p.n_new = 1;
  p.delta.table_keep = table_size;
  p.sample = true;
  return p;
}

// The step after `step`: sequences 1..n each decode the token they emitted last, all at the
// position after sequence 1's tokens, their tables of table_size blocks unchanged.
void decode_next(device_step& step, size_t n, uint32_t table_size) {
  const uint32_t pos = step.seqs[0].start_pos + step.seqs[0].n_new;
  ++step.step;
  step.started.clear();
  step.seqs.resize(n);
  for (size_t i = 0; i < n; ++i) step.seqs[i] = next(static_cast<seq_id>(i + 1), pos, table_size);
}

device_step_result run(caf::scoped_actor& self, const device_worker_actor& w, const device_step& step) {
  device_step_result out;
  self->request(w, caf::infinite, run_step_atom::value, step)
      .receive([&](device_step_result& r) { out = std::move(r); },
               [&](caf::error& e) { out.error = "actor error: " + caf::to_string(e); });
  return out;
}

// 32 KV blocks; steps of up to 256 tokens, 64 logit rows and 8 sequences.
gpu_worker_options small_worker_options() {
  gpu_worker_options opt;
  opt.n_blocks = 32;
  opt.limits.max_tokens = 256;
  opt.limits.max_logit_rows = 64;
  opt.limits.max_seqs = 8;
  opt.limits.max_table_width = 32;
  // The tests below compare the device sampler with the host one by asking for logprobs,
  // which then take the host path.
  opt.device_logprobs = false;
  return opt;
}

// A small synthetic model, and an actor system to spawn workers on it; self drives them.
class GpuWorker : public gpu::testing::CudaTest {
 protected:
  device_worker_actor spawn_worker(const gpu_worker_options& opt = small_worker_options()) {
    return spawn_gpu_device_worker(sys, fx.m, opt);
  }

  fixture fx;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
};

// Greedy on the device (ids only) and greedy on the host (logprobs asked: logits come back
// to engine/sampling/sampler.h) pick the same tokens; a prefill chunk emits nothing; a bad block id
// fails the step with a message and the worker goes on.
TEST_F(GpuWorker, DeviceAndHostSamplingAgreeAndErrorsAreReplies) {
  auto w = spawn_worker();

  sampling_options greedy_device;
  greedy_device.temperature = 0;
  sampling_options greedy_host = greedy_device;
  greedy_host.logprobs = true;
  greedy_host.top_logprobs = 2;

  // Two copies of one prompt in different blocks; one sampled on each path; and a third
  // sequence whose chunk does not reach its end (no sample).
  device_step step;
  step.step = 1;
  step.started = {{1, greedy_device, 17, nullptr}, {2, greedy_host, 17, nullptr}, {3, greedy_device, 3, nullptr}};
  step.seqs = {first(1, kPrompt, {0, 1}, true), first(2, kPrompt, {5, 6}, true), first(3, {4, 4, 4}, {9}, false)};
  for (int k = 0; k < 4; ++k) {
    const auto r = run(self, w, step);
    ASSERT_TRUE(r.error.empty()) << r.error;
    // One entry per sequence in the step: three in the first, the two decoding ones after.
    ASSERT_EQ(r.emitted.size(), step.seqs.size());
    ASSERT_EQ(r.emitted[0].size(), 1u);
    EXPECT_EQ(r.emitted[0], r.emitted[1]) << "step " << k;
    if (k == 0) {
      EXPECT_TRUE(r.emitted[2].empty());
    }
    EXPECT_EQ(r.logprobs[1].token, r.emitted[1][0]);
    decode_next(step, 2, 2);  // the two sampled sequences decode what they emitted
  }
  step.started = {{4, greedy_device, 2, nullptr}};
  step.seqs = {first(4, {1, 2}, {31, 999}, true)};
  EXPECT_FALSE(run(self, w, step).error.empty());
  device_stats stats;
  self->request(w, caf::infinite, stats_atom::value).receive([&](device_stats s) { stats = s; }, [&](caf::error&) {});
  EXPECT_EQ(stats.steps, 4u);
  self->send_exit(w, caf::exit_reason::user_shutdown);
}

// Penalties, top-k and top-p on the device (ids only) against the host path (logprobs asked,
// so engine/sampling/sampler.h samples): greedy with penalties, and top-k 1 with penalties, follow
// the host's greedy-with-penalties token for token while the history grows.
TEST_F(GpuWorker, DevicePenaltiesAndTopKMatchTheHostSampler) {
  auto w = spawn_worker();

  sampling_options device_greedy;
  device_greedy.temperature = 0;
  device_greedy.repetition_penalty = 1.8f;
  device_greedy.frequency_penalty = 0.7f;
  device_greedy.presence_penalty = 0.4f;
  sampling_options host_greedy = device_greedy;
  host_greedy.logprobs = true;
  sampling_options device_top1 = device_greedy;
  device_top1.temperature = 1.0f;
  device_top1.top_k = 1;
  device_top1.top_p = 0.9f;
  device_top1.seed = 5;

  const std::vector<block_table> tables = {{0, 1}, {5, 6}, {10, 11}};
  device_step step;
  step.step = 1;
  step.started = {{1, device_greedy, 17, nullptr}, {2, host_greedy, 17, nullptr}, {3, device_top1, 17, nullptr}};
  step.seqs = {first(1, kPrompt, tables[0], true), first(2, kPrompt, tables[1], true),
               first(3, kPrompt, tables[2], true)};
  for (int k = 0; k < 10; ++k) {
    const auto r = run(self, w, step);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.emitted.size(), 3u);
    ASSERT_EQ(r.emitted[1].size(), 1u);
    EXPECT_EQ(r.emitted[0], r.emitted[1]) << "step " << k;
    EXPECT_EQ(r.emitted[2], r.emitted[1]) << "step " << k;
    // Each continues with the token it emitted (the same three, as checked above), so all
    // three keep the same history.
    decode_next(step, 3, 2);
  }
  self->send_exit(w, caf::exit_reason::user_shutdown);
}

// Two workers on one model run the same steps: one samples rows with logprobs and logit bias
// on the device (ids and log-probabilities come back), the other copies those rows' logits
// to the host sampler. Greedy rows must emit the same tokens with the same log-probabilities
// and top alternatives, bias and penalties included, while the history grows.
TEST_F(GpuWorker, DeviceLogprobsAndLogitBiasAgreeWithTheHostPath) {
  gpu_worker_options on_device = small_worker_options();
  on_device.device_logprobs = true;
  auto dev = spawn_worker(on_device);
  auto host = spawn_worker();

  sampling_options lp5;
  lp5.temperature = 0;
  lp5.logprobs = true;
  lp5.top_logprobs = 5;
  sampling_options biased = lp5;  // bias, penalties, 20 alternatives
  biased.top_logprobs = 20;
  biased.repetition_penalty = 1.5f;
  biased.frequency_penalty = 0.5f;
  biased.presence_penalty = 0.3f;
  biased.logit_bias_ids = {42, 17, 300, 42};
  biased.logit_bias_values = {-100.0f, 3.0f, 2.0f, 4.0f};
  sampling_options bias_only;  // no logprobs: only the bias makes it a host row on `host`
  bias_only.temperature = 0;
  bias_only.logit_bias_ids = {5};
  bias_only.logit_bias_values = {100.0f};

  device_step step;
  step.step = 1;
  step.started = {{1, lp5, 17, nullptr}, {2, biased, 17, nullptr}, {3, bias_only, 17, nullptr}};
  step.seqs = {first(1, kPrompt, {0, 1}, true), first(2, kPrompt, {5, 6}, true), first(3, kPrompt, {10, 11}, true)};
  for (int k = 0; k < 8; ++k) {
    SCOPED_TRACE(::testing::Message() << "step " << k);
    const auto a = run(self, dev, step);
    const auto b = run(self, host, step);
    ASSERT_TRUE(a.error.empty()) << a.error;
    ASSERT_TRUE(b.error.empty()) << b.error;
    ASSERT_EQ(a.emitted.size(), 3u);
    ASSERT_EQ(b.emitted.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      SCOPED_TRACE(::testing::Message() << "sequence " << i + 1);
      ASSERT_EQ(a.emitted[i].size(), 1u);
      EXPECT_EQ(a.emitted[i], b.emitted[i]);
    }
    EXPECT_EQ(a.emitted[2], std::vector<token_id>{5});  // +100 wins
    for (size_t i = 0; i < 2; ++i) {
      SCOPED_TRACE(::testing::Message() << "sequence " << i + 1);
      const auto &x = a.logprobs[i], &y = b.logprobs[i];
      EXPECT_EQ(x.token, a.emitted[i][0]);
      EXPECT_EQ(x.token, y.token);
      EXPECT_NEAR(x.logprob, y.logprob, 1e-4);
      EXPECT_EQ(x.top_ids, y.top_ids);
      ASSERT_EQ(x.top_logprobs.size(), y.top_logprobs.size());
      EXPECT_EQ(x.top_ids.size(), i == 0 ? 5u : 20u);
      for (size_t j = 0; j < x.top_logprobs.size(); ++j) EXPECT_NEAR(x.top_logprobs[j], y.top_logprobs[j], 1e-4);
    }
    decode_next(step, 3, 2);
  }
  self->send_exit(dev, caf::exit_reason::user_shutdown);
  self->send_exit(host, caf::exit_reason::user_shutdown);
}

// Sampled rows with logprobs on the device: each step reports the emitted token with a
// logprob <= 0 and its alternatives best first; more alternatives than the device keeps
// (kMaxTopLogprobs) take the host path and still come back in full.
TEST_F(GpuWorker, SampledDeviceLogprobsAndTheHostFallback) {
  gpu_worker_options on_device = small_worker_options();
  on_device.device_logprobs = true;
  auto w = spawn_worker(on_device);

  sampling_options sampled;
  sampled.temperature = 0.8f;
  sampled.top_p = 0.95f;
  sampled.seed = 3;
  sampled.logprobs = true;
  sampled.top_logprobs = 3;
  sampling_options many = sampled;
  many.top_logprobs = 25;

  const std::vector<token_id> prompt = {1, 7, 42, 99, 3, 250, 17, 8};
  device_step step;
  step.step = 1;
  step.started = {{1, sampled, 8, nullptr}, {2, many, 8, nullptr}};
  step.seqs = {first(1, prompt, {0}, true), first(2, prompt, {5}, true)};
  for (int k = 0; k < 6; ++k) {
    SCOPED_TRACE(::testing::Message() << "step " << k);
    const auto r = run(self, w, step);
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(r.emitted[i].size(), 1u);
      const auto& lp = r.logprobs[i];
      EXPECT_EQ(lp.token, r.emitted[i][0]);
      EXPECT_LE(lp.logprob, 0.0f);
      ASSERT_EQ(lp.top_ids.size(), i == 0 ? 3u : 25u);
      EXPECT_TRUE(std::is_sorted(lp.top_logprobs.rbegin(), lp.top_logprobs.rend()));
      // The emitted token is among the alternatives exactly when its logprob reaches the last one.
      const bool listed = std::find(lp.top_ids.begin(), lp.top_ids.end(), lp.token) != lp.top_ids.end();
      if (lp.logprob > lp.top_logprobs.back() + 1e-4f) {
        EXPECT_TRUE(listed);
      }
      if (lp.logprob < lp.top_logprobs.back() - 1e-4f) {
        EXPECT_FALSE(listed);
      }
    }
    decode_next(step, 2, 1);
  }
  self->send_exit(w, caf::exit_reason::user_shutdown);
}

// Drafts verified on the device against the host's accept_drafts over the same logits: two
// workers run the same steps (a greedy and a penalised sequence, each first decoding a few
// tokens, then verifying drafts of which some are right and one is wrong) and must emit the
// same tokens.
TEST_F(GpuWorker, DeviceVerificationAgreesWithTheHostPath) {
  gpu_worker_options on_device = small_worker_options();
  on_device.device_logprobs = true;
  on_device.device_verification = true;
  gpu_worker_options on_host = small_worker_options();
  on_host.device_verification = false;
  auto dev = spawn_worker(on_device);
  auto host = spawn_worker(on_host);

  sampling_options greedy;
  greedy.temperature = 0;
  sampling_options penalised = greedy;
  penalised.repetition_penalty = 1.4f;
  penalised.frequency_penalty = 0.3f;
  penalised.logit_bias_ids = {7};
  penalised.logit_bias_values = {1.5f};

  device_step step;
  step.step = 1;
  step.started = {{1, greedy, 17, nullptr}, {2, penalised, 17, nullptr}};
  step.seqs = {first(1, kPrompt, {0, 1}, true), first(2, kPrompt, {5, 6}, true)};
  std::vector<std::vector<token_id>> out(2);
  for (int k = 0; k < 3; ++k) {  // prefill, then two decode steps
    const auto a = run(self, dev, step);
    const auto b = run(self, host, step);
    ASSERT_TRUE(a.error.empty()) << a.error;
    ASSERT_TRUE(b.error.empty()) << b.error;
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(a.emitted[i].size(), 1u);
      ASSERT_EQ(a.emitted[i], b.emitted[i]);
      out[i].push_back(a.emitted[i][0]);
    }
    decode_next(step, 2, 2);
  }
  // Verification steps: drafts copied from each sequence's own recent output (sometimes
  // right), then one token nobody expects.
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(::testing::Message() << "verification step " << k);
    for (size_t i = 0; i < 2; ++i) {
      const auto& o = out[i];
      step.seqs[i].draft = {o[o.size() - 2], o[o.size() - 1], static_cast<token_id>(500 - k)};
    }
    const auto a = run(self, dev, step);
    const auto b = run(self, host, step);
    ASSERT_TRUE(a.error.empty()) << a.error;
    ASSERT_TRUE(b.error.empty()) << b.error;
    for (size_t i = 0; i < 2; ++i) {
      SCOPED_TRACE(::testing::Message() << "sequence " << i + 1);
      EXPECT_EQ(a.emitted[i], b.emitted[i]);
      ASSERT_GE(a.emitted[i].size(), 1u);
      ASSERT_LE(a.emitted[i].size(), 4u);
      out[i].insert(out[i].end(), a.emitted[i].begin(), a.emitted[i].end());
    }
    // Both sequences go on from what they emitted: its count may differ between them, so
    // each is planned from its own position (the device holds the emitted tokens).
    step.step++;
    for (size_t i = 0; i < 2; ++i) {
      const uint32_t at = static_cast<uint32_t>(kPrompt.size() + out[i].size()) - 1;
      step.seqs[i] = next(i + 1, at, 3);
      step.seqs[i].delta.new_blocks = {static_cast<uint32_t>(i == 0 ? 2 : 7)};
      step.seqs[i].delta.table_keep = 2;
    }
  }
  self->send_exit(dev, caf::exit_reason::user_shutdown);
  self->send_exit(host, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace tandem
