#include "actors/streamer.h"

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <iterator>

#include "actors/admission.h"
#include "actors/atoms.h"
#include "actors/chat_turns.h"
#include "actors/clock.h"
#include "actors/grammar_compiler.h"
#include "actors/runtime_shared.h"
#include "actors/scheduler/scheduler.h"
#include "actors/spawn.h"
#include "engine/chat/output_parser.h"
#include "engine/chat/prompt_encoder.h"
#include "engine/chat/tool_call_grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/platform/fault_injection.h"

namespace tandem {
namespace {

struct streamer_state {
  request_id id = 0;
  generate_request req;
  std::shared_ptr<const runtime_shared> shared;
  scheduler_actor scheduler;
  admission_internal_actor admission;
  std::optional<incremental_decoder> decoder;
  // Chat replies with tools or thinking sections: text -> content, reasoning, tool calls.
  std::optional<chat_output_parser> parser;
  bool called_tools = false;     // the parser found tool calls (finish_reason "tool_calls")
  uint32_t thinking_tokens = 0;  // generated inside a thinking section
  bool thinking_closed = false;  // the budget's end tag was asked for
  std::string held;              // decoded text not sent yet: it may be the start of a stop string
  generation_delta pending;      // ready to send, waiting for the stream interval to fill
  bool sent_first = false;
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;
  double queue_ms = 0;
  std::vector<float> image_encode_seconds;  // the image encoder's reply, for the metrics
  bool image_rejected = false;
  clock_type::time_point submitted = clock_type::now();
  clock_type::time_point first_token, last_token;
  bool done = false;
  static inline const char* name = "tandem.streamer";
};

using self_ptr = streamer_actor::stateful_pointer<streamer_state>;

// The request's chat template: with tools, the file's tool_use variant when it has one.
const chat_template& template_for(const streamer_state& st) {
  return !st.req.tools_json.empty() && st.shared->tool_chat ? *st.shared->tool_chat : *st.shared->chat;
}

// The syntax of the reply's tool calls (harmony: the whole reply is harmony messages).
tool_call_parser::syntax reply_syntax(const streamer_state& st) {
  if (!st.req.tool_call_parser.empty()) return tool_call_parser::syntax_named(st.req.tool_call_parser);
  return st.shared->chat ? tool_call_parser::syntax_for(template_for(st)) : tool_call_parser::syntax::generic;
}

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

// Adds what the parser made of some reply text to the pending delta: a tool call's argument
// pieces join the piece before them while they belong to the same call.
void add_parsed(generation_delta& p, chat_output_delta&& d) {
  p.text += d.content;
  p.reasoning_content += d.reasoning_content;
  for (auto& c : d.tool_calls) {
    if (!p.tool_calls.empty() && p.tool_calls.back().index == c.index && c.id.empty()) {
      p.tool_calls.back().arguments += c.arguments;
    } else {
      p.tool_calls.push_back(
          {static_cast<uint32_t>(c.index), std::move(c.id), std::move(c.name), std::move(c.arguments)});
    }
  }
}

// The reply text after stop strings, into the pending delta (through the parser, if any).
void add_text(streamer_state& st, std::string&& text, bool at_end) {
  if (!st.parser) {
    st.pending.text += text;
    return;
  }
  if (!text.empty()) add_parsed(st.pending, st.parser->feed(text));
  if (at_end) {
    add_parsed(st.pending, st.parser->finish());
    st.called_tools = st.parser->has_tool_calls();
    st.parser.reset();
  }
}

// Sends the pending delta, if it holds anything.
void flush(self_ptr self) {
  auto& st = self->state;
  if (st.pending.empty()) return;
  st.pending.id = st.id;
  if (st.req.on_delta) {
    st.req.on_delta(std::move(st.pending));
  } else {
    self->send(st.req.sink, std::move(st.pending));
  }
  st.pending = generation_delta{};
  st.sent_first = true;
}

void close(self_ptr self, finish_reason reason, std::string error = "", uint16_t status = 200, std::string param = "") {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  if (st.parser) add_text(st, {}, /*at_end=*/true);  // text a parser held back is flushed too
  flush(self);                                       // nothing produced is lost, whatever the interval
  generation_done d;
  d.id = st.id;
  d.reason = reason == finish_reason::stop && st.called_tools ? finish_reason::tool_calls : reason;
  d.error = std::move(error);
  d.error_param = std::move(param);
  d.status = status;
  d.prompt_tokens = st.prompt_tokens;
  d.completion_tokens = st.completion_tokens;
  d.cached_tokens = st.cached_tokens;
  d.queue_ms = st.queue_ms;
  d.image_encode_seconds = std::move(st.image_encode_seconds);
  d.image_rejected = st.image_rejected;
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
  if (st.parser && st.parser->in_reasoning()) st.thinking_tokens += static_cast<uint32_t>(b.tokens.size());
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
  if (!b.prompt_logprobs.empty()) st.pending.prompt_logprobs = std::move(b.prompt_logprobs);
  if (!out.empty() || !b.tokens.empty() || !st.pending.prompt_logprobs.empty()) {
    auto& p = st.pending;
    add_text(st, std::move(out), stopped || b.finished);
    p.tokens.insert(p.tokens.end(), b.tokens.begin(), b.tokens.end());
    p.logprobs.insert(p.logprobs.end(), std::make_move_iterator(b.logprobs.begin()),
                      std::make_move_iterator(b.logprobs.end()));
    if (!st.sent_first || p.tokens.size() >= std::max<uint32_t>(1, st.req.stream_interval)) flush(self);
  }
  if (stopped) {
    self->send(st.scheduler, abort_atom::value, static_cast<seq_id>(st.id));
    return close(self, finish_reason::stop);
  }
  // The thinking budget is spent: the scheduler appends the section's end tag after the next
  // token (so tokens already on their way may pass the budget by a step's worth).
  if (!b.finished && st.req.thinking_token_budget > 0 && !st.thinking_closed && st.parser &&
      st.parser->in_reasoning() && st.thinking_tokens >= st.req.thinking_token_budget) {
    st.thinking_closed = true;
    self->send(st.scheduler, force_atom::value, static_cast<seq_id>(st.id),
               st.shared->tok.encode(st.parser->reasoning_close_text(), /*add_special=*/false,
                                     /*parse_special=*/true));
  }
  if (b.finished) {
    const bool failed = b.reason == finish_reason::error;
    close(self, b.reason, failed ? (b.error.empty() ? "the sequence failed" : b.error) : "", failed ? b.status : 200);
  }
}

// A constrained request: its grammar is compiled first (by the grammar compiler, on its own
// thread), then the sequence is enqueued with it. A bad grammar ends the request with a 400
// naming the field it came from.
void compile_then_enqueue(self_ptr self, sequence_request sr) {
  auto& st = self->state;
  const auto& g = st.req.grammar;
  grammar::grammar_kind kind = grammar::grammar_kind::gbnf;
  std::string text = g.text;
  std::string param = "response_format";
  try {
    switch (g.type) {
      case output_grammar::kind::json_object:
      case output_grammar::kind::json_schema: {
        const bool schema = g.type == output_grammar::kind::json_schema;
        if (!st.req.messages.empty() && reply_syntax(st) == tool_call_parser::syntax::harmony) {
          // A harmony reply: the JSON is its final message.
          text = harmony_final_grammar(schema ? grammar::json_schema_to_gbnf(g.text) : grammar::json_object_gbnf());
        } else {
          kind = schema ? grammar::grammar_kind::json_schema : grammar::grammar_kind::json_object;
        }
        break;
      }
      case output_grammar::kind::gbnf:
        param = "grammar";
        break;
      case output_grammar::kind::tool_call:
        param = "tool_choice";
        text = tool_call_grammar(st.req.tools_json, reply_syntax(st), g.text);
        break;
      case output_grammar::kind::none:
        break;
    }
  } catch (const std::exception& e) {
    return close(self, finish_reason::error, e.what(), 400, param);
  }
  auto pending = std::make_shared<sequence_request>(std::move(sr));
  pending->constrained = true;
  pending->grammar_kind = kind;
  pending->grammar_text = text;
  self->request(st.shared->grammar_compiler, caf::infinite, compile_atom::value, kind, std::move(text))
      .then(
          [self, pending, param](grammar_reply& r) {
            if (self->state.done) return;  // cancelled meanwhile
            if (!r.grammar) return close(self, finish_reason::error, r.error, 400, param);
            pending->grammar = std::move(r.grammar);
            self->send(self->state.scheduler, enqueue_atom::value, std::move(*pending));
          },
          [self](caf::error& err) {
            close(self, finish_reason::error, "the grammar compiler failed: " + self->system().render(err), 500);
          });
}

// The prompt's tokens (with each image's where its marker was), checked, then the sequence
// to the scheduler (through the grammar compiler for a constrained one).
void start_sequence(self_ptr self, const std::vector<vision::encoded_image>& images) {
  auto& st = self->state;
  const auto& tok = st.shared->tok;
  // Prompt tokens: chat messages through the template, or the raw prompt.
  std::vector<int32_t> prompt;
  std::vector<embedding_rows> media;  // the images' runs, at prompt positions
  try {
    if (!st.req.messages.empty()) {
      if (!st.shared->chat) throw std::invalid_argument(st.shared->chat_error);
      const chat_template& tmpl = template_for(st);
      const auto msgs = chat_messages(st.req.messages);
      chat_render_options ro;
      ro.add_generation_prompt = st.req.add_generation_prompt;
      ro.tools_json = st.req.tools_json;
      ro.template_kwargs_json = st.req.chat_template_kwargs_json;
      if (images.empty()) {
        prompt = encode_chat(tok, tmpl, msgs, ro);
      } else {
        // Each marker the request parser wrote where an image part was: that image's tokens.
        const auto& layout = st.shared->vision->layout;
        size_t n_markers = 0;
        prompt = encode_chat(
            tok, tmpl, msgs, ro, st.req.media_marker,
            [&](size_t k, std::vector<token_id>& out) {
              if (k >= images.size()) return;  // counted below
              vision::image_prompt ip = layout.lay_out(images[k], tok);
              for (embedding_rows& r : ip.runs) {
                r.offset += static_cast<int32_t>(out.size());
                media.push_back(std::move(r));
              }
              out.insert(out.end(), ip.tokens.begin(), ip.tokens.end());
            },
            n_markers);
        if (n_markers != images.size()) {
          throw std::invalid_argument("the chat template dropped " + std::to_string(images.size() - n_markers) +
                                      " of the request's images (it renders only some messages' content)");
        }
      }
      chat_output_options po;
      po.parse_reasoning = st.req.parse_reasoning;
      po.parse_tool_calls = st.req.parse_tool_calls;
      if (!st.req.tool_call_parser.empty()) po.tool_syntax = tool_call_parser::syntax_named(st.req.tool_call_parser);
      if (chat_output_parser::wanted(tmpl, po)) st.parser.emplace(tmpl, tmpl.render(msgs, ro), std::move(po));
    } else if (!st.req.prompt_tokens.empty()) {
      prompt = st.req.prompt_tokens;  // ids below the vocabulary size (the request parser checked)
    } else {
      prompt = encode_prompt(tok, st.req.prompt, st.req.prompt_special_tokens);
    }
  } catch (const std::exception& e) {
    return close(self, finish_reason::error, e.what(), 400);
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
  } else if (st.req.sampling.prompt_logprobs >= 0 && !media.empty()) {
    close(self, finish_reason::error, "prompt logprobs are not computed for prompts with images", 400,
          "prompt_logprobs");
  } else if (st.req.sampling.prompt_logprobs >= 0 && !st.shared->scores_prompts) {
    close(self, finish_reason::error, "prompt logprobs are computed by the CPU worker only; this server runs on a GPU",
          400, "prompt_logprobs");
  } else {
    sequence_request sr;
    sr.id = st.id;
    sr.media = std::move(media);
    sr.tenant = st.req.tenant;
    sr.weight = st.req.weight;
    sr.cache_group = st.req.cache_group;
    if (!st.req.lora_ids.empty()) {  // admission left one adapter here, or none
      sr.adapter_id = st.req.lora_ids.front();
      sr.adapter_scale = st.req.lora_scales.front();
      const uint64_t identity = st.shared->adapter_identities.at(static_cast<size_t>(sr.adapter_id));
      char key[64];
      std::snprintf(key, sizeof key, "lora:%016llx@%a", static_cast<unsigned long long>(identity),
                    static_cast<double>(sr.adapter_scale));
      sr.adapter = key;
    }
    sr.kv_cache_share = st.req.kv_cache_share;
    sr.priority = st.req.priority;
    sr.slo_ttft_ms = st.req.slo_ttft_ms;
    sr.slo_reject = st.req.slo_reject;
    sr.prompt = std::move(prompt);
    sr.sampling = st.req.sampling;
    sr.max_new_tokens = st.req.max_tokens;
    sr.max_total_tokens = limit;
    sr.stop_token_ids = st.req.stop_token_ids;
    // Tokens appended by a thinking budget would bypass the drafter's view of the sequence.
    sr.speculative = st.req.speculative && st.req.thinking_token_budget == 0;
    sr.prompt_group = st.req.prompt_group;
    sr.session = st.req.session;
    if (!st.req.ignore_eos) {
      for (token_id t : tok.end_of_generation_ids()) sr.stop_token_ids.push_back(t);
    }
    sr.streamer = self;
    if (st.req.grammar.type == output_grammar::kind::none) {
      self->send(st.scheduler, enqueue_atom::value, std::move(sr));
    } else {
      compile_then_enqueue(self, std::move(sr));
    }
  }
}

// A request with images: they are decoded and encoded first (image_encoder.h), then its
// sequence starts; a bad image ends the request with a 400 naming its part.
void encode_then_start(self_ptr self) {
  auto& st = self->state;
  if (!st.shared->vision) {
    return close(self, finish_reason::error,
                 "this server takes no images: start it with --mmproj PATH (the model's vision projector)", 400,
                 st.req.image_parts.empty() ? "" : st.req.image_parts.front());
  }
  if (st.req.images.size() > st.shared->vision->max_images) {
    return close(self, finish_reason::error,
                 "the request has " + std::to_string(st.req.images.size()) + " images; this server takes at most " +
                     std::to_string(st.shared->vision->max_images) + " per request (--limit-mm-per-prompt)",
                 400, "messages");
  }
  // The images' rows must fit the context with the text (counted once the template renders).
  self->request(st.shared->vision->encoder, caf::infinite, encode_atom::value, st.req.images,
                uint64_t{st.shared->max_model_len})
      .then(
          [self](image_reply& r) {
            const auto& parts = self->state.req.image_parts;
            if (self->state.done) return;  // cancelled meanwhile
            self->state.image_encode_seconds = std::move(r.encode_seconds);
            self->state.image_rejected = r.bad_index >= 0;
            if (r.bad_index >= 0) {
              const auto i = static_cast<size_t>(r.bad_index);
              const std::string part = i < parts.size() ? parts[i] : "image";
              return close(self, finish_reason::error, part + ": " + r.error, 400, part);
            }
            start_sequence(self, r.images);
          },
          [self](caf::error& err) {
            close(self, finish_reason::error, "the image encoder failed: " + self->system().render(err), 500);
          });
}

streamer_actor::behavior_type streamer(self_ptr self, request_id id, generate_request req,
                                       std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                                       admission_internal_actor admission) {
  auto& st = self->state;
  st.id = id;
  st.req = std::move(req);
  st.shared = std::move(shared);
  st.scheduler = std::move(scheduler);
  st.admission = std::move(admission);
  const auto& tok = st.shared->tok;
  // Tool-call markers such as <|python_tag|> and [TOOL_CALLS] are control tokens: the parser
  // needs them as text.
  st.decoder.emplace(tok, /*render_special=*/st.req.parse_tool_calls);

  if (st.req.images.empty()) {
    start_sequence(self, {});
  } else {
    encode_then_start(self);
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
                              admission_internal_actor admission) {
  return sys.spawn(streamer, id, std::move(req), std::move(shared), std::move(scheduler), std::move(admission));
}

}  // namespace tandem
