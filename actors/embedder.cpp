#include "actors/embedder.h"

#include <stdexcept>
#include <string>

#include "actors/admission.h"
#include "actors/atoms.h"
#include "actors/runtime_shared.h"
#include "actors/scheduler/scheduler.h"
#include "actors/spawn.h"

namespace tandem {

size_t embedding_inputs(const generate_request& req) {
  return req.embed_texts.empty() ? req.embed_tokens.size() : req.embed_texts.size();
}

namespace {

struct embedder_state {
  request_id id = 0;
  generate_request req;
  std::shared_ptr<const runtime_shared> shared;
  scheduler_actor scheduler;
  admission_internal_actor admission;
  std::vector<uint8_t> finished;  // per input: its final batch came
  size_t left = 0;                // inputs still computing
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
  double queue_ms = 0;
  bool done = false;
  static inline const char* name = "tandem.embedder";
};

using self_ptr = embedder_actor::stateful_pointer<embedder_state>;

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// One (query, document) pair as llama-server builds it (format_prompt_rerank): the file's
// rerank template with both put in, read with its control tokens; else BOS (when the model
// adds one), the query, EOS (when it adds one), the document, EOS.
std::vector<token_id> rerank_prompt(const runtime_shared& sh, const std::string& query, const std::string& doc) {
  const tokenizer& tok = sh.tok;
  if (!sh.rerank_template.empty()) {
    std::string text = sh.rerank_template;
    replace_all(text, "{query}", query);
    replace_all(text, "{document}", doc);
    return tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
  }
  std::vector<token_id> out;
  if (tok.add_bos() && tok.bos() >= 0) out.push_back(tok.bos());
  for (const std::string* part : {&query, &doc}) {
    const auto ids = tok.encode(*part, false, false);
    out.insert(out.end(), ids.begin(), ids.end());
    if (tok.add_eos() && tok.eos() >= 0) out.push_back(tok.eos());
  }
  return out;
}

// Input k's prompt tokens; throws std::invalid_argument naming the input.
std::vector<token_id> prompt_of(const embedder_state& st, size_t k) {
  const auto& r = st.req;
  if (r.rerank) return rerank_prompt(*st.shared, r.rerank_query, r.embed_texts[k]);
  if (!r.embed_texts.empty()) return st.shared->tok.encode(r.embed_texts[k], /*add_special=*/true, true);
  const auto& ids = r.embed_tokens[k];
  const auto vocab = static_cast<int64_t>(st.shared->tok.vocab_size());
  for (const int32_t t : ids) {
    if (t < 0 || t >= vocab) {
      throw std::invalid_argument("input[" + std::to_string(k) + "] has token id " + std::to_string(t) +
                                  ", outside the vocabulary of " + std::to_string(vocab));
    }
  }
  return {ids.begin(), ids.end()};
}

void deliver(self_ptr self, generation_delta&& d) {
  d.id = self->state.id;
  if (self->state.req.on_delta) {
    self->state.req.on_delta(std::move(d));
  } else {
    self->send(self->state.req.sink, std::move(d));
  }
}

// Every input still computing is dropped by the scheduler (its blocks freed).
void abort_unfinished(self_ptr self) {
  auto& st = self->state;
  for (size_t k = 0; k < st.finished.size(); ++k) {
    if (!st.finished[k]) self->send(st.scheduler, abort_atom::value, static_cast<seq_id>(st.id + k));
  }
}

void close(self_ptr self, finish_reason reason, std::string error = "", uint16_t status = 200, std::string param = "") {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  generation_done d;
  d.id = st.id;
  d.reason = reason;
  d.error = std::move(error);
  d.error_param = std::move(param);
  d.status = status;
  d.prompt_tokens = st.prompt_tokens;
  d.cached_tokens = st.cached_tokens;
  d.queue_ms = st.queue_ms;
  self->send(st.req.sink, std::move(d));
  self->send(st.admission, finished_atom::value, st.id, st.prompt_tokens);
  self->quit();
}

void on_batch(self_ptr self, token_batch& b) {
  auto& st = self->state;
  if (st.done || b.seq < st.id || b.seq - st.id >= st.finished.size()) return;
  const size_t k = b.seq - st.id;
  if (st.finished[k] || !b.finished) return;
  st.finished[k] = 1;
  --st.left;
  if (b.queue_ms > st.queue_ms) st.queue_ms = b.queue_ms;
  if (b.reason != finish_reason::stop || b.embedding.empty()) {
    abort_unfinished(self);
    const bool failed = b.reason == finish_reason::error || b.embedding.empty();
    return close(self, failed ? finish_reason::error : b.reason,
                 failed ? "input[" + std::to_string(k) + "]: " + (b.error.empty() ? "the sequence failed" : b.error) : "",
                 failed ? b.status : 200);
  }
  generation_delta d;
  d.index = static_cast<uint32_t>(k);
  if (st.req.rerank) {
    d.embedding = {b.embedding.front()};  // the first label's score, as llama-server reports it
  } else {
    d.embedding = embedding_output(b.embedding, st.req.dimensions);
  }
  deliver(self, std::move(d));
  if (st.left == 0) close(self, finish_reason::stop);
}

embedder_actor::behavior_type embedder(self_ptr self, request_id id, generate_request req,
                                       std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                                       admission_internal_actor admission) {
  auto& st = self->state;
  st.id = id;
  st.req = std::move(req);
  st.shared = std::move(shared);
  st.scheduler = std::move(scheduler);
  st.admission = std::move(admission);
  const size_t n = embedding_inputs(st.req);
  // An encoder runs an input whole in one step: the context or a step's tokens, the fewer.
  const uint32_t whole = st.shared->whole_prompt_limit;
  const uint32_t limit = whole > 0 ? whole : st.shared->max_model_len;
  std::vector<std::vector<token_id>> prompts(n);
  try {
    if (n == 0) throw std::invalid_argument("the request has no input");
    if (st.req.dimensions > st.shared->n_embd) {
      close(self, finish_reason::error,
            "dimensions " + std::to_string(st.req.dimensions) + " is more than this model's " +
                std::to_string(st.shared->n_embd),
            400, "dimensions");
    }
    for (size_t k = 0; k < n && !st.done; ++k) {
      prompts[k] = prompt_of(st, k);
      if (prompts[k].empty()) throw std::invalid_argument("input[" + std::to_string(k) + "] is empty");
      if (prompts[k].size() > limit) {
        throw std::invalid_argument("input[" + std::to_string(k) + "] has " + std::to_string(prompts[k].size()) +
                                    (whole > 0 ? " tokens; this encoder takes an input whole, at most "
                                               : " tokens; this model's context is ") +
                                    std::to_string(limit) + " tokens");
      }
      st.prompt_tokens += static_cast<uint32_t>(prompts[k].size());
    }
  } catch (const std::exception& e) {
    close(self, finish_reason::error, e.what(), 400, st.req.rerank ? "documents" : "input");
  }
  if (!st.done) {
    st.finished.assign(n, 0);
    st.left = n;
    for (size_t k = 0; k < n; ++k) {
      sequence_request sr;
      sr.id = id + k;
      sr.tenant = st.req.tenant;
      sr.weight = st.req.weight;
      sr.cache_group = st.req.cache_group;
      sr.kv_cache_share = st.req.kv_cache_share;
      sr.priority = st.req.priority;
      // A salt no other sequence has: no cached prefix is adopted (embedder.h).
      sr.input_hash = (sr.id + 1) * 0x9e3779b97f4a7c15ull | 1u;
      sr.prompt = std::move(prompts[k]);
      sr.max_new_tokens = 1;
      sr.speculative = false;
      sr.session = st.req.session;
      sr.pooling = st.shared->pooling;
      sr.streamer = self;
      self->send(st.scheduler, enqueue_atom::value, std::move(sr));
    }
  }
  return {
      [self](tokens_atom, token_batch& b) { on_batch(self, b); },
      [self](cancel_atom) {
        abort_unfinished(self);
        close(self, finish_reason::abort);
      },
  };
}

}  // namespace

embedder_actor spawn_embedder(caf::actor_system& sys, request_id id, generate_request req,
                              std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                              admission_internal_actor admission) {
  return sys.spawn(embedder, id, std::move(req), std::move(shared), std::move(scheduler), std::move(admission));
}

}  // namespace tandem
