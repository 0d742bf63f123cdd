#include "actors/streamer.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "actors/admission.h"
#include "actors/clock.h"
#include "actors/runtime_shared.h"
#include "actors/scheduler.h"
#include "actors/spawn.h"
#include "engine/chat/prompt_encoder.h"
#include "engine/platform/fault_injection.h"

namespace tandem {
namespace {

struct streamer_state {
  request_id id = 0;
  generate_request req;
  std::shared_ptr<const runtime_shared> shared;
  scheduler_actor scheduler;
  admission_actor admission;
  std::optional<incremental_decoder> decoder;
  std::string held;          // decoded text not sent yet: it may be the start of a stop string
  generation_delta pending;  // ready to send, waiting for the stream interval to fill
  bool sent_first = false;
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;
  double queue_ms = 0;
  clock_type::time_point submitted = clock_type::now();
  clock_type::time_point first_token, last_token;
  bool done = false;
  static inline const char* name = "tandem.streamer";
};

using self_ptr = streamer_actor::stateful_pointer<streamer_state>;

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t held_back_length(const std::string& text, const std::vector<std::string>& stops) {
  size_t keep = 0;
  for (const auto& s : stops) {
    for (size_t n = std::min(text.size(), s.size() - 1); n > keep; --n) {
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  return keep;
}

// Sends the pending delta, if it holds anything.
void flush(self_ptr self) {
  auto& st = self->state;
  if (st.pending.text.empty() && st.pending.tokens.empty()) return;
  st.pending.id = st.id;
  if (st.req.on_delta) {
    st.req.on_delta(std::move(st.pending));
  } else {
    self->send(st.req.sink, std::move(st.pending));
  }
  st.pending = generation_delta{};
  st.sent_first = true;
}

void close(self_ptr self, finish_reason reason, std::string error = "", uint16_t status = 200) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  flush(self);  // nothing produced is lost, whatever the interval
  generation_done d;
  d.id = st.id;
  d.reason = reason;
  d.error = std::move(error);
  d.status = status;
  d.prompt_tokens = st.prompt_tokens;
  d.completion_tokens = st.completion_tokens;
  d.cached_tokens = st.cached_tokens;
  d.queue_ms = st.queue_ms;
  if (st.completion_tokens > 0) {
    d.ttft_ms = ms_between(st.submitted, st.first_token);
    if (st.completion_tokens > 1) d.tpot_ms = ms_between(st.first_token, st.last_token) / (st.completion_tokens - 1);
  }
  self->send(st.req.sink, std::move(d));
  self->send(st.admission, finished_atom::value, st.id, st.prompt_tokens + st.completion_tokens);
  self->quit();
}

void on_tokens(self_ptr self, token_batch& b) {
  auto& st = self->state;
  if (st.done) return;
  const auto now = clock_type::now();
  if (b.queue_ms > 0) st.queue_ms = b.queue_ms;
  if (b.cached_tokens > 0) st.cached_tokens = b.cached_tokens;
  std::string text;
  for (int32_t t : b.tokens) text += st.decoder->push(t);
  // A stop token ends the sequence without being shown, but it was generated.
  const uint32_t produced =
      static_cast<uint32_t>(b.tokens.size()) + (b.finished && b.reason == finish_reason::stop ? 1u : 0u);
  if (produced > 0) {
    if (st.completion_tokens == 0) st.first_token = now;
    st.last_token = now;
    st.completion_tokens += produced;
  }
  if (b.finished) text += st.decoder->flush();

  std::string out = std::move(st.held);
  out += text;
  st.held.clear();
  bool stopped = false;
  for (const auto& s : st.req.stop) {
    const auto at = out.find(s);
    if (!s.empty() && at != std::string::npos) {
      out.resize(at);
      stopped = true;
    }
  }
  if (!stopped && !b.finished) {
    const size_t keep = held_back_length(out, st.req.stop);
    st.held = out.substr(out.size() - keep);
    out.resize(out.size() - keep);
  }
  if (!out.empty() || !b.tokens.empty()) {
    auto& p = st.pending;
    p.text += out;
    p.tokens.insert(p.tokens.end(), b.tokens.begin(), b.tokens.end());
    p.logprobs.insert(p.logprobs.end(), std::make_move_iterator(b.logprobs.begin()),
                      std::make_move_iterator(b.logprobs.end()));
    if (!st.sent_first || p.tokens.size() >= std::max<uint32_t>(1, st.req.stream_interval)) flush(self);
  }
  if (stopped) {
    self->send(st.scheduler, abort_atom::value, static_cast<seq_id>(st.id));
    return close(self, finish_reason::stop);
  }
  if (b.finished) {
    const bool failed = b.reason == finish_reason::error;
    close(self, b.reason, failed ? (b.error.empty() ? "the sequence failed" : b.error) : "", failed ? 500 : 200);
  }
}

streamer_actor::behavior_type streamer(self_ptr self, request_id id, generate_request req,
                                       std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                                       admission_actor admission) {
  auto& st = self->state;
  st.id = id;
  st.req = std::move(req);
  st.shared = std::move(shared);
  st.scheduler = std::move(scheduler);
  st.admission = std::move(admission);
  const auto& tok = st.shared->tok;
  st.decoder.emplace(tok, /*render_special=*/false);

  // Prompt tokens: chat messages through the template, or the raw prompt.
  std::vector<int32_t> prompt;
  try {
    if (!st.req.messages.empty()) {
      if (!st.shared->chat) throw std::invalid_argument(st.shared->chat_error);
      std::vector<chat_message> msgs;
      for (const auto& m : st.req.messages) msgs.push_back({m.role, m.content});
      prompt = encode_chat(tok, *st.shared->chat, msgs, st.req.add_generation_prompt);
    } else {
      prompt = encode_prompt(tok, st.req.prompt);
    }
  } catch (const std::exception& e) {
    close(self, finish_reason::error, e.what(), 400);
    return {[](tokens_atom, token_batch&) {}, [](cancel_atom) {}};
  }
  st.prompt_tokens = static_cast<uint32_t>(prompt.size());
  const uint32_t limit = st.shared->max_model_len;
  if (prompt.empty()) {
    close(self, finish_reason::error, "the prompt is empty", 400);
  } else if (prompt.size() >= limit) {
    close(self, finish_reason::error,
          "the prompt has " + std::to_string(prompt.size()) + " tokens; this model's context is " +
              std::to_string(limit) + " tokens (prompt and completion together)",
          400);
  } else {
    sequence_request sr;
    sr.id = id;
    sr.tenant = st.req.tenant;
    sr.weight = st.req.weight;
    sr.cache_group = st.req.cache_group;
    sr.kv_cache_share = st.req.kv_cache_share;
    sr.prompt = std::move(prompt);
    sr.sampling = st.req.sampling;
    sr.max_new_tokens = st.req.max_tokens;
    sr.max_total_tokens = limit;
    sr.stop_token_ids = st.req.stop_token_ids;
    sr.speculative = st.req.speculative;
    sr.prompt_group = st.req.prompt_group;
    if (!st.req.ignore_eos) {
      for (token_id t : tok.end_of_generation_ids()) sr.stop_token_ids.push_back(t);
    }
    sr.streamer = self;
    self->send(st.scheduler, enqueue_atom::value, std::move(sr));
  }
  return {
      [self](tokens_atom, token_batch& b) {
        if (fault_point("streamer.tokens")) throw std::runtime_error("an injected fault that ends the streamer");
        on_tokens(self, b);
      },
      [self](cancel_atom) {
        self->send(self->state.scheduler, abort_atom::value, static_cast<seq_id>(self->state.id));
        close(self, finish_reason::abort);
      },
  };
}

}  // namespace

streamer_actor spawn_streamer(caf::actor_system& sys, request_id id, generate_request req,
                              std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                              admission_actor admission) {
  return sys.spawn(streamer, id, std::move(req), std::move(shared), std::move(scheduler), std::move(admission));
}

}  // namespace tandem
