#include "net/batch/batch_runner.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/json.hpp>
#include <optional>

#include "net/await_actor.h"
#include "net/generation_request.h"
#include "net/live_job.h"
#include "net/routes.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace {

// The key admission knows the tenant by: its first (open mode: none). Batches keep the
// tenant's name, never a key, on disk.
std::optional<std::string> key_of(const runtime& rt, const std::string& tenant) {
  const auto& tenants = rt.config().tenants;
  if (tenants.empty()) return std::string();
  for (const auto& t : tenants) {
    if (t.name == tenant && !t.api_keys.empty()) return t.api_keys.front();
  }
  return std::nullopt;
}

batch_answer answer_of(const batch_call& call, const http_reply& reply, std::string request_id) {
  batch_answer a;
  a.batch_id = call.batch_id;
  a.line = call.line;
  a.custom_id = call.custom_id;
  a.status = reply.status;
  a.body = reply.body;
  a.request_id = std::move(request_id);
  // Refused for now (rate limit, queue full, the server stopping): not an answer.
  a.retry = reply.status == 429 || reply.status == 503;
  return a;
}

// Runs the line on its strand (the coroutine's executor): the model its body names is
// acquired as a chat request's is (a server of several: loaded on first use, held until the
// line is answered; an unknown one is the line's 404 naming the models), then the request is
// submitted to that model's admission. `done` is called exactly once.
boost::asio::awaitable<void> run_line(std::shared_ptr<server_context> ctx, const runtime* dflt, batch_call call,
                                      std::function<void(batch_answer)> done) {
  const auto key = key_of(*dflt, call.tenant);
  if (!key) {
    done(answer_of(call,
                   error_reply(api_error(401, "the batch's tenant '" + call.tenant + "' has no API key now", "",
                                         "invalid_api_key")),
                   ""));
    co_return;
  }
  const api_kind kind = call.endpoint == "/v1/completions" ? api_kind::completion : api_kind::chat;
  boost::json::value body;
  std::optional<api_error> refused;
  try {
    body = parse_json_body(call.body);
  } catch (const api_error& e) {
    refused = e;
  }
  model_grant held;
  if (!refused) {
    // Named locals: GCC 12 mishandles temporaries passed into a coroutine call in co_await.
    const std::string model = named_model(body);
    const std::string& k = *key;
    try {
      co_await acquire_model(ctx, model, k, held);  // 404 (unknown), 503 (still loading: retried), ...
    } catch (const api_error& e) {
      refused = e;
    }
  }
  api_request req;
  if (!refused) {
    try {
      req = parse_api_request(body, kind, ctx->limits(*held.rt));
    } catch (const api_error& e) {
      refused = e;
    }
  }
  if (refused) {
    done(answer_of(call, error_reply(*refused), ""));
    co_return;
  }
  const runtime& rt = *held.rt;
  req.stream = false;
  req.include_usage = false;
  req.gen.priority = kBatchPriority;             // after every interactive request; preempted first
  if (req.model.empty()) req.model = held.name;  // a server of several: the one that serves it
  job_context jc = completion_context(req, *ctx, rt, ctx->new_id(kind == api_kind::chat ? "chatcmpl" : "cmpl"));
  jc.metrics_model = held.name;
  const std::string request_id = jc.response_id;
  auto lj = std::make_shared<live_job>(generation_job(
      std::move(req), kind == api_kind::chat ? job_format::chat_json : job_format::completion_json, std::move(jc)));
  lj->rt = held.rt;  // the model stays loaded while the line runs
  // The job keeps itself alive through `hold` until it has finished; then it answers once and
  // lets go (the strand's call that ran notify holds it until that call returns). A choice
  // aborted by the runtime (it is stopping) reads as "stop" in a JSON body: such a line is
  // not answered but run again (retry), after the restart.
  auto hold = std::make_shared<std::shared_ptr<live_job>>(lj);
  auto aborted = std::make_shared<bool>(false);  // touched on the strand only
  lj->notify = [hold, aborted, call = std::move(call), done = std::move(done), request_id]() mutable {
    const std::shared_ptr<live_job> l = *hold;
    if (!l || !l->job.finished()) return;
    hold->reset();
    batch_answer a = answer_of(call, generation_reply(l->job), request_id);
    a.retry = a.retry || *aborted;
    done(std::move(a));
  };
  // start_live_job's loop, with each final event looked at for an abort first.
  const auto ex = co_await boost::asio::this_coro::executor;
  auto reqs = lj->job.requests();
  for (uint32_t i = 0; i < reqs.size(); ++i) {
    reqs[i].api_key = *key;
    reqs[i].stream_interval = ctx->opts.stream_interval;
    std::weak_ptr<live_job> weak = lj;
    auto callback = [weak, ex, i, aborted](sink_event ev) {
      boost::asio::post(ex, [weak, i, aborted, ev = std::move(ev)]() mutable {
        if (const auto* d = std::get_if<generation_done>(&ev); d && d->reason == finish_reason::abort) *aborted = true;
        if (auto l = weak.lock()) {
          l->job.on_event(i, std::move(ev));
          if (l->notify) l->notify();
        }
      });
    };
    lj->sinks.push_back(spawn_request_sink(ctx->sys, rt.admission(), std::move(reqs[i]), std::move(callback)));
  }
}

}  // namespace

batch_runner make_batch_runner(std::weak_ptr<server_context> ctx, const runtime& rt) {
  return [weak = std::move(ctx), rt = &rt](batch_call call, std::function<void(batch_answer)> done) {
    const auto c = weak.lock();
    if (!c) {
      batch_answer a;
      a.batch_id = call.batch_id;
      a.line = call.line;
      a.custom_id = call.custom_id;
      a.retry = true;
      done(std::move(a));
      return;
    }
    // Parsing a body (up to the request size limit) and waiting for its model is work for the
    // pool, on a strand of its own, not the queue's thread.
    boost::asio::co_spawn(boost::asio::make_strand(c->work), run_line(c, rt, std::move(call), std::move(done)),
                          boost::asio::detached);
  };
}

}  // namespace tandem::net
