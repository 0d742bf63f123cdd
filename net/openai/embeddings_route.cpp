#include "net/openai/embeddings_route.h"

#include <variant>

#include "net/await_actor.h"
#include "net/openai/embeddings_request.h"
#include "net/request_sink.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace {

// The sink's events as they reach the strand; the last is generation_done (or a refusal).
struct gathered {
  explicit gathered(const boost::asio::any_io_executor& ex) : signal(ex) {}
  strand_signal signal;
  submit_reply reply;
  std::vector<embedding_result> results;
  generation_done done;
  bool finished = false;
};

}  // namespace

boost::asio::awaitable<void> serve_embeddings(const std::shared_ptr<server_context>& ctx, const std::string& body,
                                              const std::string& key, bool rerank, http_reply& out) {
  embeddings_call call = rerank ? parse_rerank_request(body) : parse_embeddings_request(body);
  // Held in this frame until the last event: the supervisor unloads no model a request holds.
  model_grant held;
  co_await acquire_model(ctx, call.model, key, held);
  const runtime& rt = *held.rt;
  const std::string model_label = held.name;  // "" in a server of one model
  const std::string served = held.name.empty() ? ctx->opts.served_model_name : held.name;
  const auto ex = co_await boost::asio::this_coro::executor;
  auto state = std::make_shared<gathered>(ex);
  std::weak_ptr<gathered> weak = state;
  generate_request req = call.req;
  req.api_key = key;
  req.model = call.model;
  // Each event is posted onto this strand; one that lands after the frame is gone is dropped.
  auto on_event = [ex, weak](sink_event e) {
    boost::asio::post(ex, [weak, e = std::move(e)]() mutable {
      const auto s = weak.lock();
      if (!s) return;
      if (auto* r = std::get_if<submit_reply>(&e)) {
        s->reply = std::move(*r);
        if (!s->reply.accepted) s->finished = true;
      } else if (auto* d = std::get_if<generation_delta>(&e)) {
        if (!d->embedding.empty()) s->results.push_back({d->index, std::move(d->embedding)});
      } else {
        s->done = std::move(std::get<generation_done>(e));
        s->finished = true;
      }
      s->signal.notify();
    });
  };
  spawn_request_sink(ctx->sys, rt.admission(), std::move(req), std::move(on_event));
  while (!state->finished) co_await state->signal.wait();

  const submit_reply& r = state->reply;
  const std::string tenant = r.tenant.empty() ? "unknown" : r.tenant;
  if (!r.accepted) {
    api_error e(r.status, r.error);
    e.retry_after_s = r.retry_after_s;
    out = error_reply(e);
    ctx->metrics.count_rejection(rejection_reason(r.status));
  } else if (state->done.reason != finish_reason::stop) {
    const generation_done& d = state->done;
    const int status = d.reason == finish_reason::error ? (d.status == 200 ? 500 : d.status) : 499;
    out = error_reply(api_error(status, d.error.empty() ? "the request was cancelled" : d.error, d.error_param));
  } else if (state->results.size() !=
             (call.req.embed_texts.empty() ? call.req.embed_tokens.size() : call.req.embed_texts.size())) {
    out = error_reply(api_error(500, "the runtime returned " + std::to_string(state->results.size()) +
                                         " vectors for this request's inputs"));
  } else {
    try {
      out.body = rerank ? rerank_body(call, std::move(state->results), state->done.prompt_tokens, served)
                        : embeddings_body(call, std::move(state->results), state->done.prompt_tokens, served);
    } catch (const std::exception& e) {  // an index outside the inputs
      out = error_reply(api_error(500, std::string("the embeddings are inconsistent: ") + e.what()));
    }
    ctx->metrics.observe_generation(tenant, state->done, model_label);
  }
  add_rate_limit_headers(out.headers, r);
  ctx->metrics.count_request(tenant, out.status, model_label);
}

}  // namespace tandem::net
